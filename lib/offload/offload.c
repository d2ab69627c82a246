/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helper threads fed by a bounded MPMC ring of job slots. Slots come from a free ring, so
 * submitting never allocates and never blocks; helpers sleep on a semaphore that counts
 * queued jobs. The helpers start with the first lcore and stop after the last one, so
 * every lcore's jobs finish on a live pool.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cr_log.h"
#include "cr_offload.h"
#include "cr_reactor.h"
#include "cr_reactor_module.h"
#include "cr_ring.h"

CR_LOG_COMPONENT(log_offload, "lib.offload");

struct job {
	cr_msg_fn fn;
	cr_msg_fn done;
	void *arg;
	unsigned origin;
};

struct offload {
	struct job jobs[CR_OFFLOAD_JOBS];
	struct cr_ring *queue;	/* job indexes, helpers dequeue */
	struct cr_ring *free;	/* job indexes not in use */
	sem_t queued;
	void *threads[CR_OFFLOAD_THREADS];
	unsigned n_threads;
	_Atomic bool stopping;
	unsigned users;		/* lcores started; guarded by lock */
	pthread_mutex_t lock;
};

static struct offload ol = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* Jobs out per lcore; written by the owner only (plus the read in lcore_busy, same lcore). */
static unsigned pending[CR_MAX_LCORES];

/* Index rings carry cr_msg-sized elements; only .arg is used, as the index. */
static bool
put_index(struct cr_ring *r, uintptr_t i)
{
	struct cr_msg m = {NULL, (void *)i};

	return cr_ring_enqueue_burst(r, &m, 1) == 1;
}

static bool
get_index(struct cr_ring *r, uintptr_t *i)
{
	struct cr_msg m;

	if (cr_ring_dequeue_burst(r, &m, 1) != 1)
		return false;
	*i = (uintptr_t)m.arg;
	return true;
}

static void
job_done(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	struct job j = ol.jobs[i];

	put_index(ol.free, i);
	pending[cr_lcore_id()]--;
	j.done(j.arg);
}

static void
sleep_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

static void *
helper(void *unused)
{
	uintptr_t i;

	(void)unused;
	/* Created from a pinned lcore: run wherever the process may, not behind it. */
	cr_thread_unpin_self();
	for (;;) {
		while (sem_wait(&ol.queued) != 0)
			;
		if (!get_index(ol.queue, &i)) {
			if (atomic_load(&ol.stopping))
				return NULL; /* woken to exit with nothing queued */
			continue;
		}
		ol.jobs[i].fn(ol.jobs[i].arg);
		/*
		 * The origin waits for this completion before it closes its mailbox, so the only
		 * failure is a full mailbox: wait for room. This thread may block; an lcore
		 * never does.
		 */
		for (;;) {
			int rc = cr_send(ol.jobs[i].origin, job_done, (void *)i);

			if (rc == 0)
				break;
			if (rc != -EAGAIN) {
				CR_LOG(log_offload, ERR, "completion to lcore %u lost: %s",
				       ol.jobs[i].origin, cr_strerror(rc));
				break;
			}
			sleep_us(50);
		}
	}
}

int
cr_offload(cr_msg_fn fn, void *arg, cr_msg_fn done)
{
	unsigned id = cr_lcore_id();
	uintptr_t i;

	if (id == CR_LCORE_NONE)
		return -EPERM;
	if (fn == NULL || done == NULL)
		return -EINVAL;
	if (cr_lcore_state(id) != CR_LCORE_RUNNING || ol.n_threads == 0 ||
	    atomic_load(&ol.stopping))
		return -ESHUTDOWN;
	if (!get_index(ol.free, &i))
		return -EAGAIN;
	ol.jobs[i] = (struct job){fn, done, arg, id};
	pending[id]++;
	/* The queue has a slot for every job index, so this cannot fail. */
	put_index(ol.queue, i);
	sem_post(&ol.queued);
	return 0;
}

unsigned
cr_offload_pending(void)
{
	unsigned id = cr_lcore_id();

	return id == CR_LCORE_NONE ? 0 : pending[id];
}

static int
pool_start(void)
{
	char name[16];
	uintptr_t i;
	unsigned t;
	int rc;

	/* Rings of 2 * jobs: power of two, and never full of job indexes. */
	unsigned size = 1;

	while (size <= CR_OFFLOAD_JOBS)
		size <<= 1;
	ol.queue = cr_ring_create("offload-queue", size, CR_RING_MPSC_HTS, -1);
	ol.free = cr_ring_create("offload-free", size, CR_RING_MPSC_HTS, -1);
	if (ol.queue == NULL || ol.free == NULL) {
		rc = -ENOMEM;
		goto out_free_rings;
	}
	for (i = 0; i < CR_OFFLOAD_JOBS; i++)
		put_index(ol.free, i);
	sem_init(&ol.queued, 0, 0);
	atomic_store(&ol.stopping, false);
	for (t = 0; t < CR_OFFLOAD_THREADS; t++) {
		snprintf(name, sizeof(name), "cr-offload-%u", t);
		/* Unpinned; the helper widens its inherited one-CPU affinity itself. */
		rc = cr_thread_create(&ol.threads[t], CR_CPU_ANY, name, helper, NULL);
		if (rc != 0)
			break;
		ol.n_threads++;
	}
	if (ol.n_threads == 0) {
		rc = -EAGAIN;
		goto out_free_rings;
	}
	return 0;

out_free_rings:
	cr_ring_free(ol.queue);
	cr_ring_free(ol.free);
	ol.queue = ol.free = NULL;
	return rc;
}

static void
pool_stop(void)
{
	unsigned t;

	atomic_store(&ol.stopping, true);
	for (t = 0; t < ol.n_threads; t++)
		sem_post(&ol.queued);
	for (t = 0; t < ol.n_threads; t++)
		cr_thread_join(ol.threads[t]);
	ol.n_threads = 0;
	sem_destroy(&ol.queued);
	cr_ring_free(ol.queue);
	cr_ring_free(ol.free);
	ol.queue = ol.free = NULL;
}

static int
offload_lcore_start(unsigned lcore)
{
	int rc = 0;

	pending[lcore] = 0;
	pthread_mutex_lock(&ol.lock);
	if (ol.users++ == 0) {
		rc = pool_start();
		if (rc != 0)
			ol.users--;
	}
	pthread_mutex_unlock(&ol.lock);
	return rc;
}

static void
offload_lcore_stop(unsigned lcore)
{
	(void)lcore;
	pthread_mutex_lock(&ol.lock);
	if (--ol.users == 0)
		pool_stop();
	pthread_mutex_unlock(&ol.lock);
}

/* Accepted jobs finish even in a forced shutdown: they are bounded blocking calls whose
 * completion the submitter was promised. */
static bool
offload_lcore_busy(unsigned lcore, bool forced)
{
	(void)forced;
	return pending[lcore] != 0;
}

static const struct cr_reactor_module offload_module = {
	.name = "offload",
	.lcore_start = offload_lcore_start,
	.lcore_stop = offload_lcore_stop,
	.lcore_busy = offload_lcore_busy,
};

__attribute__((constructor(CR_MODULE_PRIO_TOP))) static void
offload_register(void)
{
	cr_reactor_module_register(&offload_module);
}
