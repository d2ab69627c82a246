/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The log thread and the buffers it empties, so that no log line blocks an lcore (a
 * callback never blocks: a full pipe on stderr, a slow disk or a stuck syslog daemon stop
 * the log thread, not the lcore).
 *
 * Each attached thread (an lcore) owns one buffer: a single-producer single-consumer byte
 * ring of records {u16 len, u8 level, u8 body, line}. The producer copies its line in if
 * it fits and counts it as dropped if not; the log thread is the consumer. Threads that
 * are not attached (the control path, the telemetry and signal threads, offload helpers)
 * may block, and write their lines themselves, so that they stay in order with what the
 * app prints. The log thread sleeps on an eventfd that a producer writes only when the
 * thread said it sleeps, claimed by an exchange, as lcores wake each other (rule 8).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cr_eal.h"
#include "cr_log.h"
#include "eal_internal.h"

#define DEFAULT_BUF_SIZE (64 * 1024)
#define REC_HDR		 4
/* A sleep is bounded, so a wake nobody sends costs a late line, not a lost one. */
#define SLEEP_MS 1000
/* The abort handler waits this long for the log thread to finish its pass. */
#define ABORT_WAIT_NS (200ull * 1000 * 1000)

struct log_buf {
	_Alignas(64) _Atomic uint64_t head; /* producer: bytes ever written */
	_Atomic uint64_t dropped;	    /* producer writes, anyone reads */
	_Alignas(64) _Atomic uint64_t tail; /* consumer: bytes ever read */
	uint64_t reported;		    /* consumer: drops already reported */
	_Atomic bool attached;		    /* a thread produces into it */
	size_t cap;			    /* a power of two */
	char data[];
};

#define N_BUFS CR_MAX_LCORES

static struct log_buf *_Atomic bufs[N_BUFS];
static _Thread_local struct log_buf *my_buf;

/* Start and stop, and allocation of buffers. */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	_Atomic bool running; /* release at start: producers may enqueue */
	_Atomic bool stop;
	_Atomic bool paused;  /* tests */
	_Atomic int sleeping; /* the thread is about to sleep or sleeps */
	_Atomic int draining; /* one consumer at a time: the thread, a flush, the abort path */
	int efd;
	pthread_t thread;
	size_t buf_size;
	bool exit_hooked;
	struct sigaction old_abrt;
} lt = {.efd = -1, .buf_size = DEFAULT_BUF_SIZE};

/* ---- buffers ---- */

static struct log_buf *
buf_new(size_t cap)
{
	struct log_buf *b = aligned_alloc(64, (sizeof(*b) + cap + 63) & ~(size_t)63);

	if (b == NULL)
		return NULL;
	memset(b, 0, sizeof(*b));
	b->cap = cap;
	return b;
}

/* Under ctl_lock. */
static struct log_buf *
buf_get(unsigned id)
{
	struct log_buf *b = atomic_load_explicit(&bufs[id], memory_order_relaxed);

	if (b == NULL) {
		b = buf_new(lt.buf_size);
		/* release: pairs with the acquire in drain_all(); the header is set up */
		if (b != NULL)
			atomic_store_explicit(&bufs[id], b, memory_order_release);
	}
	return b;
}

static void
ring_copy_in(struct log_buf *b, uint64_t pos, const void *src, size_t n)
{
	size_t off = (size_t)(pos & (b->cap - 1)), first = b->cap - off < n ? b->cap - off : n;

	memcpy(b->data + off, src, first);
	memcpy(b->data, (const char *)src + first, n - first);
}

static void
ring_copy_out(const struct log_buf *b, uint64_t pos, void *dst, size_t n)
{
	size_t off = (size_t)(pos & (b->cap - 1)), first = b->cap - off < n ? b->cap - off : n;

	memcpy(dst, b->data + off, first);
	memcpy((char *)dst + first, b->data, n - first);
}

/* The producer side; one producer at a time. @return false when the line did not fit. */
static bool
buf_put(struct log_buf *b, const char *line, size_t len, size_t body, int level)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
	/* acquire: pairs with the release in buf_take(); the consumer is done with those bytes */
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	unsigned char hdr[REC_HDR] = {(unsigned char)(len & 0xff), (unsigned char)(len >> 8),
				      (unsigned char)level, (unsigned char)body};

	if (REC_HDR + len > b->cap - (size_t)(head - tail))
		return false;
	ring_copy_in(b, head, hdr, REC_HDR);
	ring_copy_in(b, head + REC_HDR, line, len);
	/* release: pairs with the acquire in buf_take(); the record is complete */
	atomic_store_explicit(&b->head, head + REC_HDR + len, memory_order_release);
	return true;
}

static bool
buf_pending(struct log_buf *b)
{
	return atomic_load_explicit(&b->head, memory_order_acquire) !=
	       atomic_load_explicit(&b->tail, memory_order_relaxed);
}

/* The consumer side (the drainer). Write out every complete record of @p b. */
static unsigned
buf_take(struct log_buf *b, unsigned id, struct cr__log_batch *out)
{
	char line[CR_LOG_FILE_LINE_MAX + 8];
	/* acquire: pairs with the release in buf_put(); records below head are complete */
	uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
	uint64_t dropped;
	unsigned n = 0;

	while (tail != head) {
		unsigned char hdr[REC_HDR];
		size_t len;

		ring_copy_out(b, tail, hdr, REC_HDR);
		len = (size_t)hdr[0] | (size_t)hdr[1] << 8;
		ring_copy_out(b, tail + REC_HDR, line, len);
		if (hdr[2] & CR__LOG_REC_FILE)
			cr__log_file_add(hdr[2] & ~CR__LOG_REC_FILE, line, len);
		else
			cr__log_batch_add(out, line, len, hdr[3], hdr[2]);
		tail += REC_HDR + len;
		n++;
	}
	/* release: pairs with the acquire in buf_put(); the bytes may be reused */
	atomic_store_explicit(&b->tail, tail, memory_order_release);
	dropped = atomic_load_explicit(&b->dropped, memory_order_relaxed);
	if (dropped != b->reported) {
		size_t len = cr__log_timestamp(line, sizeof(line)), body = len;
		int k = snprintf(line + len, sizeof(line) - len,
				 "%s: warning: %llu log lines dropped on lcore %u: its log buffer "
				 "was full\n",
				 cr__eal_log.name, (unsigned long long)(dropped - b->reported), id);

		if (k > 0 && (size_t)k < sizeof(line) - len)
			cr__log_batch_add(out, line, len + (size_t)k, body, CR_LOG_WARNING);
		b->reported = dropped;
	}
	return n;
}

/* ---- draining ---- */

static bool
drain_claim(uint64_t wait_ns)
{
	uint64_t until = wait_ns != 0 ? cr_clock_ns() + wait_ns : 0;

	for (;;) {
		int free_ = 0;

		/* acquire: pairs with the release in drain_release(); the last pass is seen */
		if (atomic_compare_exchange_weak_explicit(
			&lt.draining, &free_, 1, memory_order_acquire, memory_order_relaxed))
			return true;
		if (until != 0 && cr_clock_ns() > until)
			return false;
		sched_yield();
	}
}

static void
drain_release(void)
{
	atomic_store_explicit(&lt.draining, 0, memory_order_release);
}

/* Empty every buffer into the sink. With the drain claimed; @p lock: take the sink lock
 * (everyone but the abort handler). @return records written. */
static unsigned
drain_all(bool lock)
{
	struct cr__log_batch out;
	unsigned n = 0;

	out.file = 0;
	out.len = 0;
	if (lock)
		cr__log_sink_lock();
	for (unsigned id = 0; id < N_BUFS; id++) {
		/* acquire: pairs with the release in buf_get() */
		struct log_buf *b = atomic_load_explicit(&bufs[id], memory_order_acquire);

		if (b != NULL)
			n += buf_take(b, id, &out);
	}
	cr__log_files_flush(&out);
	cr__log_batch_flush(&out);
	if (lock)
		cr__log_sink_unlock();
	return n;
}

static bool
any_pending(void)
{
	for (unsigned id = 0; id < N_BUFS; id++) {
		struct log_buf *b = atomic_load_explicit(&bufs[id], memory_order_acquire);

		if (b != NULL && buf_pending(b))
			return true;
	}
	return false;
}

void
cr_log_flush(void)
{
	if (!atomic_load_explicit(&lt.running, memory_order_acquire))
		return;
	drain_claim(0);
	drain_all(true);
	drain_release();
}

/* ---- the thread ---- */

static void
wake_thread(void)
{
	uint64_t one = 1;

	/* seq_cst: pairs with the fence in log_main(); either it sees our record, or we see
	 * its flag and wake it */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&lt.sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&lt.sleeping, 0, memory_order_relaxed))
		(void)!write(lt.efd, &one, sizeof(one));
}

static void
sleep_until_woken(void)
{
	struct pollfd p = {.fd = lt.efd, .events = POLLIN};
	uint64_t v;

	atomic_store_explicit(&lt.sleeping, 1, memory_order_relaxed);
	/* seq_cst: pairs with the fence in wake_thread() */
	atomic_thread_fence(memory_order_seq_cst);
	if ((!atomic_load_explicit(&lt.paused, memory_order_relaxed) && any_pending()) ||
	    atomic_load_explicit(&lt.stop, memory_order_acquire)) {
		atomic_store_explicit(&lt.sleeping, 0, memory_order_relaxed);
		return;
	}
	if (poll(&p, 1, SLEEP_MS) > 0)
		(void)!read(lt.efd, &v, sizeof(v));
	atomic_store_explicit(&lt.sleeping, 0, memory_order_relaxed);
}

static void *
log_main(void *arg)
{
	sigset_t all;

	(void)arg;
	/* Signals are for the app's signal thread, not for this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* Started from an lcore, it would share that lcore's CPU: take the process's. */
	(void)cr_thread_unpin_self();
	while (!atomic_load_explicit(&lt.stop, memory_order_acquire)) {
		unsigned n = 0;

		if (!atomic_load_explicit(&lt.paused, memory_order_relaxed)) {
			drain_claim(0);
			n = drain_all(true);
			drain_release();
		}
		if (n == 0)
			sleep_until_woken();
	}
	return NULL;
}

/* abort() would lose what the lcores buffered, the line that says why included. Write it
 * out with async-signal-safe calls only (no lock; the drain claim is an atomic), then let
 * the previous disposition end the process. */
static void
on_abort(int sig)
{
	if (drain_claim(ABORT_WAIT_NS)) {
		drain_all(false);
		drain_release();
	}
	sigaction(SIGABRT, &lt.old_abrt, NULL);
	raise(sig);
}

static void
at_fork_child(void)
{
	/* The child has no log thread: it writes its own lines (cr-bench's children exec). */
	atomic_store_explicit(&lt.running, false, memory_order_relaxed);
	my_buf = NULL;
}

static void
at_exit(void)
{
	cr_log_stop();
}

/* Under ctl_lock. */
static int
start_thread(void)
{
	struct sigaction sa;
	int rc;

	if (atomic_load_explicit(&lt.running, memory_order_relaxed))
		return 0;
	lt.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (lt.efd < 0)
		return -errno;
	atomic_store_explicit(&lt.stop, false, memory_order_relaxed);
	rc = -pthread_create(&lt.thread, NULL, log_main, NULL);
	if (rc != 0) {
		close(lt.efd);
		lt.efd = -1;
		return rc;
	}
	pthread_setname_np(lt.thread, "cr-log");
	if (!lt.exit_hooked) {
		lt.exit_hooked = true;
		atexit(at_exit);
		pthread_atfork(NULL, NULL, at_fork_child);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_abort;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGABRT, &sa, &lt.old_abrt);
	/* release: pairs with the acquire in cr__log_emit(); buffers and eventfd are set up */
	atomic_store_explicit(&lt.running, true, memory_order_release);
	return 0;
}

void
cr_log_stop(void)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ctl_lock);
	if (!atomic_load_explicit(&lt.running, memory_order_relaxed)) {
		pthread_mutex_unlock(&ctl_lock);
		return;
	}
	/* From here on every thread writes its own lines; what is buffered goes out below. */
	atomic_store_explicit(&lt.running, false, memory_order_release);
	atomic_store_explicit(&lt.stop, true, memory_order_release);
	(void)!write(lt.efd, &one, sizeof(one));
	pthread_join(lt.thread, NULL);
	sigaction(SIGABRT, &lt.old_abrt, NULL);
	drain_claim(0);
	drain_all(true);
	drain_release();
	close(lt.efd);
	lt.efd = -1;
	pthread_mutex_unlock(&ctl_lock);
}

/* ---- producers ---- */

int
cr_log_attach(unsigned id)
{
	struct log_buf *b;
	int rc;

	if (id >= CR_MAX_LCORES)
		return -EINVAL;
	if (my_buf != NULL)
		cr_log_detach();
	pthread_mutex_lock(&ctl_lock);
	b = buf_get(id);
	if (b == NULL) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if (atomic_exchange_explicit(&b->attached, true, memory_order_relaxed)) {
		rc = -EBUSY;
		goto out_unlock;
	}
	rc = start_thread();
	if (rc != 0) {
		atomic_store_explicit(&b->attached, false, memory_order_relaxed);
		goto out_unlock;
	}
	my_buf = b;
out_unlock:
	pthread_mutex_unlock(&ctl_lock);
	return rc;
}

void
cr_log_detach(void)
{
	struct log_buf *b = my_buf;

	if (b == NULL)
		return;
	my_buf = NULL;
	cr_log_flush();
	atomic_store_explicit(&b->attached, false, memory_order_relaxed);
}

uint64_t
cr_log_dropped(unsigned id)
{
	struct log_buf *b;

	if (id >= N_BUFS)
		return 0;
	b = atomic_load_explicit(&bufs[id], memory_order_acquire);
	return b != NULL ? atomic_load_explicit(&b->dropped, memory_order_relaxed) : 0;
}

void
cr__log_emit(const char *line, size_t len, size_t body, int level)
{
	struct log_buf *b = my_buf;

	/* acquire: pairs with the release in start_thread(); a thread that is not attached,
	 * or one whose log thread has stopped, writes the line itself */
	if (b == NULL || !atomic_load_explicit(&lt.running, memory_order_acquire)) {
		cr__log_sink_line(line, len, body, level);
		return;
	}
	if (buf_put(b, line, len, body, level)) {
		wake_thread();
		return;
	}
	/* relaxed: the producer is the only writer; readers want a count, no order */
	atomic_store_explicit(&b->dropped, atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

int
cr_log_file_put(int id, const char *line, size_t len)
{
	struct log_buf *b = my_buf;

	if (len == 0 || !cr__log_file_ok(id))
		return -EINVAL;
	if (len > CR_LOG_FILE_LINE_MAX)
		return -EMSGSIZE;
	/* acquire: pairs with the release in start_thread(), as in cr__log_emit() */
	if (b == NULL || !atomic_load_explicit(&lt.running, memory_order_acquire)) {
		cr__log_file_line(id, line, len);
		return 0;
	}
	if (!buf_put(b, line, len, 0, CR__LOG_REC_FILE | id)) {
		cr__log_file_count_drop(id);
		return -ENOBUFS;
	}
	wake_thread();
	return 0;
}

/* ---- tests ---- */

void
cr__log_set_buf_size(size_t bytes)
{
	pthread_mutex_lock(&ctl_lock);
	lt.buf_size = bytes;
	pthread_mutex_unlock(&ctl_lock);
}

void
cr__log_pause(bool paused)
{
	atomic_store_explicit(&lt.paused, paused, memory_order_relaxed);
	if (!paused)
		wake_thread();
}
