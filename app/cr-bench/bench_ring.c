/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The raw peers: an rte_ring (through cr_ring, the same rings the mailboxes use) between
 * two pinned threads that do nothing but move messages, and a thread blocked on an
 * eventfd for the wake figure. These are the figures ours are divided by.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"

#define MAX_BURST 32
_Static_assert(BENCH_RAW_DEQ <= MAX_BURST, "dequeue burst fits the buffers");

/* Where the two threads of a pair meet before they start timing. */
struct pair_gate {
	_Atomic unsigned ready;
	_Atomic bool cancel; /* the partner could not be started */
};

/*
 * Wait for the partner so that neither side times the other's start-up.
 * @return false when the run was called off.
 */
static bool
start_line(struct pair_gate *g)
{
	/* acq_rel / acquire: each side's set-up is visible to the other past the line. */
	atomic_fetch_add_explicit(&g->ready, 1, memory_order_acq_rel);
	while (atomic_load_explicit(&g->ready, memory_order_acquire) < 2) {
		if (atomic_load_explicit(&g->cancel, memory_order_relaxed))
			return false;
		bench_relax();
	}
	return true;
}

/*
 * Run @p a pinned to the main lcore's CPU and @p b to the other's, both with @p arg, and
 * wait for both. Each calls start_line(@p g) first.
 */
static int
run_pair(const struct bench_env *env, struct pair_gate *g, void *(*a)(void *), void *(*b)(void *),
	 void *arg)
{
	void *ta, *tb;
	int rc;

	rc = cr_thread_create(&ta, env->main, "bench-a", a, arg);
	if (rc != 0) {
		fprintf(stderr, "cr-bench: cannot start a thread on CPU %u: %s\n", env->main,
			cr_strerror(rc));
		return rc;
	}
	rc = cr_thread_create(&tb, env->other, "bench-b", b, arg);
	if (rc != 0) {
		fprintf(stderr, "cr-bench: cannot start a thread on CPU %u: %s\n", env->other,
			cr_strerror(rc));
		atomic_store_explicit(&g->cancel, true, memory_order_relaxed);
		cr_thread_join(ta);
		return rc;
	}
	cr_thread_join(ta);
	cr_thread_join(tb);
	return 0;
}

static void
enqueue_all(struct cr_ring *r, const struct cr_msg *m, unsigned n)
{
	unsigned done = 0, got;

	while (done < n) {
		got = cr_ring_enqueue_burst(r, m + done, n - done);
		if (got == 0)
			bench_relax();
		done += got;
	}
}

static void
dequeue_one(struct cr_ring *r, struct cr_msg *m)
{
	while (cr_ring_dequeue_burst(r, m, 1) == 0)
		bench_relax();
}

/* A ring consumed on lcore @p consumer. */
static struct cr_ring *
make_ring(const struct bench_env *env, const char *name, unsigned consumer)
{
	/* The size of a mailbox's per-source ring, on the consumer's node, as the mailbox. */
	struct cr_ring *r =
	    cr_ring_create(name, CR_MAILBOX_RING_SIZE, CR_RING_SPSC, bench_numa(env, consumer));

	if (r == NULL)
		fprintf(stderr, "cr-bench: cannot create ring %s: %s\n", name, cr_strerror(errno));
	return r;
}

/* ---- throughput ---- */

struct ring_tp {
	struct cr_ring *r;
	unsigned burst;
	uint64_t n;
	struct pair_gate gate;
	struct bench_counter cnt; /* consumer only */
};

static void *
tp_producer(void *arg)
{
	struct ring_tp *t = arg;
	struct cr_msg m[MAX_BURST];
	uint64_t left = t->n;
	unsigned i, k;

	for (i = 0; i < MAX_BURST; i++)
		m[i] = (struct cr_msg){bench_count_msg, &t->cnt};
	if (!start_line(&t->gate))
		return NULL;
	while (left > 0) {
		k = left < t->burst ? (unsigned)left : t->burst;
		enqueue_all(t->r, m, k);
		left -= k;
	}
	return NULL;
}

static void *
tp_consumer(void *arg)
{
	struct ring_tp *t = arg;
	struct cr_msg m[BENCH_RAW_DEQ];
	unsigned i, got;

	if (!start_line(&t->gate))
		return NULL;
	while (t->cnt.n < t->n) {
		got = cr_ring_dequeue_burst(t->r, m, BENCH_RAW_DEQ);
		if (got == 0)
			bench_relax();
		for (i = 0; i < got; i++)
			m[i].fn(m[i].arg);
	}
	return NULL;
}

int
bench_ring_throughput(const struct bench_env *env, unsigned burst, double *mps)
{
	struct ring_tp t;
	int rc;

	if (burst == 0 || burst > MAX_BURST)
		return -EINVAL;
	memset(&t, 0, sizeof(t));
	t.r = make_ring(env, "bench-tp", env->other);
	if (t.r == NULL)
		return -ENOMEM;
	t.burst = burst;
	t.n = env->messages;
	t.cnt.target = env->messages;
	rc = run_pair(env, &t.gate, tp_producer, tp_consumer, &t);
	cr_ring_free(t.r);
	if (rc == 0)
		*mps = bench_counter_mps(&t.cnt);
	return rc;
}

/* ---- round trip ---- */

struct ring_rtt {
	struct cr_ring *ab, *ba;
	struct pair_gate gate;
	uint64_t hits_a, hits_b;	      /* each written by one side only */
	uint64_t batch_ns[BENCH_RTT_BATCHES]; /* pinger only */
};

static void
touch(void *arg)
{
	(*(uint64_t *)arg)++;
}

static void *
rtt_pinger(void *arg)
{
	struct ring_rtt *t = arg;
	struct cr_msg m = {touch, &t->hits_b}, r;
	uint64_t t0;
	unsigned b, i;

	if (!start_line(&t->gate))
		return NULL;
	/* Batch 0 warms the caches and is not recorded. */
	for (b = 0; b <= BENCH_RTT_BATCHES; b++) {
		t0 = cr_clock_ns();
		for (i = 0; i < BENCH_RTT_BATCH; i++) {
			enqueue_all(t->ab, &m, 1);
			dequeue_one(t->ba, &r);
			r.fn(r.arg);
		}
		if (b > 0)
			t->batch_ns[b - 1] = cr_clock_ns() - t0;
	}
	return NULL;
}

static void *
rtt_ponger(void *arg)
{
	struct ring_rtt *t = arg;
	struct cr_msg m, reply = {touch, &t->hits_a};
	uint64_t i;

	if (!start_line(&t->gate))
		return NULL;
	for (i = 0; i < (uint64_t)(BENCH_RTT_BATCHES + 1) * BENCH_RTT_BATCH; i++) {
		dequeue_one(t->ab, &m);
		m.fn(m.arg);
		enqueue_all(t->ba, &reply, 1);
	}
	return NULL;
}

int
bench_ring_rtt(const struct bench_env *env, double *rtt_ns)
{
	struct ring_rtt *t;
	int rc = -ENOMEM;

	t = cr_numa_zalloc(sizeof(*t), -1);
	if (t == NULL)
		return -ENOMEM;
	t->ab = make_ring(env, "bench-ab", env->other);
	t->ba = make_ring(env, "bench-ba", env->main);
	if (t->ab != NULL && t->ba != NULL)
		rc = run_pair(env, &t->gate, rtt_pinger, rtt_ponger, t);
	if (rc == 0)
		*rtt_ns =
		    (double)bench_percentile(t->batch_ns, BENCH_RTT_BATCHES, 50) / BENCH_RTT_BATCH;
	cr_ring_free(t->ab);
	cr_ring_free(t->ba);
	cr_numa_free(t);
	return rc;
}

/* ---- wake: a thread blocked in read(2) on an eventfd, woken by a write ---- */

struct raw_wake {
	int efd;
	struct pair_gate gate;
	_Atomic uint64_t stamp; /* release by the waker, acquire by the waiter */
	_Atomic unsigned got;	/* samples taken: release by the waiter */
	_Atomic bool failed;
	uint64_t lat_ns[BENCH_WAKE_TOTAL];
};

static void *
wake_waiter(void *arg)
{
	struct raw_wake *w = arg;
	uint64_t v;
	unsigned i;

	if (!start_line(&w->gate))
		return NULL;
	for (i = 0; i < BENCH_WAKE_TOTAL; i++) {
		if (read(w->efd, &v, sizeof(v)) != sizeof(v)) {
			atomic_store_explicit(&w->failed, true, memory_order_relaxed);
			return NULL;
		}
		/* The waker gave up and wrote only to let us go. */
		if (atomic_load_explicit(&w->failed, memory_order_acquire))
			return NULL;
		w->lat_ns[i] =
		    cr_clock_ns() - atomic_load_explicit(&w->stamp, memory_order_acquire);
		atomic_store_explicit(&w->got, i + 1, memory_order_release);
	}
	return NULL;
}

static void *
wake_waker(void *arg)
{
	struct raw_wake *w = arg;
	uint64_t one = 1;
	unsigned i;

	if (!start_line(&w->gate))
		return NULL;
	for (i = 0; i < BENCH_WAKE_TOTAL; i++) {
		bench_sleep_ns(BENCH_WAKE_GAP_NS);
		atomic_store_explicit(&w->stamp, cr_clock_ns(), memory_order_release);
		if (write(w->efd, &one, sizeof(one)) != sizeof(one) ||
		    !bench_wait_count(&w->got, i + 1)) {
			/* release: pairs with the waiter's acquire; then unblock it so that the
			 * pair can be joined (writes add up into one read, so one is enough). */
			atomic_store_explicit(&w->failed, true, memory_order_release);
			(void)!write(w->efd, &one, sizeof(one));
			return NULL;
		}
	}
	return NULL;
}

int
bench_wake_raw(const struct bench_env *env, struct wake_result *out)
{
	struct raw_wake *w;
	int rc;

	w = cr_numa_zalloc(sizeof(*w), -1);
	if (w == NULL)
		return -ENOMEM;
	w->efd = eventfd(0, EFD_CLOEXEC);
	if (w->efd < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = run_pair(env, &w->gate, wake_waker, wake_waiter, w);
	close(w->efd);
	if (rc == 0 && atomic_load(&w->failed)) {
		fprintf(stderr, "cr-bench: the raw eventfd wake lost a sample\n");
		rc = -EIO;
	}
	if (rc == 0) {
		memset(out, 0, sizeof(*out));
		bench_wake_summary(out, w->lat_ns + BENCH_WAKE_WARMUP, BENCH_WAKE_SAMPLES);
		/* A reader blocked in read(2) for 2 ms is asleep every time. */
		out->parked_samples = BENCH_WAKE_SAMPLES;
	}
out_free:
	cr_numa_free(w);
	return rc;
}
