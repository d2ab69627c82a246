/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io_uring backend: the lcore's private ring. Park is submit-and-wait with a timeout;
 * lcore-to-lcore wakes are IORING_OP_MSG_RING SQEs riding on the sender's next submit;
 * every other waker writes the lcore's wake channel, an eventfd that outlives the ring,
 * on which the lcore keeps a poll armed (a poll, not a read: a ring on its way out must
 * not consume a wake meant for the next incarnation). The I/O
 * ops of lib/io ride on the same ring (uring_io.c); user_data tags are in uring_internal.h.
 *
 * Ring size: RING_ENTRIES SQEs and a CQ four times that, so bursts of multishot
 * completions fit. The environment variable CR_URING_CQ_ENTRIES (2..65536, read when each
 * lcore's ring is set up) overrides the CQ size, the SQ shrinking to match if needed; the
 * tests use a tiny CQ to force overflow. Completions that do not fit wait in the kernel's
 * overflow list (IORING_FEAT_NODROP) and are fetched by poll().
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <liburing.h>

#include "cr_log.h"
#include "cr_reactor_backend.h"
#include "uring_internal.h"

CR_LOG_COMPONENT(log_uring, "drv.uring");

#define RING_ENTRIES	 256
#define CQ_PER_SQ	 4
#define CQ_ENTRIES_MAX	 65536
#define CQ_ENTRIES_ENV	 "CR_URING_CQ_ENTRIES"
/* Overflowed CQEs are flushed into the CQ a CQ-full at a time; a few rounds per poll. */
#define OVERFLOW_ROUNDS	 4

static int
probe(char *why, size_t len)
{
	struct io_uring ring;
	struct io_uring_probe *p;
	int rc, fd;

	rc = io_uring_queue_init(4, &ring, 0);
	if (rc < 0) {
		fd = rc == -EPERM ? open("/proc/sys/kernel/io_uring_disabled", O_RDONLY) : -1;
		if (fd >= 0) {
			char c = '0';

			if (read(fd, &c, 1) != 1)
				c = '?';
			close(fd);
			snprintf(why, len, "io_uring_setup: %s (kernel.io_uring_disabled = %c)",
				 strerror(-rc), c);
		} else {
			snprintf(why, len, "io_uring_setup: %s", strerror(-rc));
		}
		return rc;
	}
	p = io_uring_get_probe_ring(&ring);
	rc = 0;
	if (p == NULL || !io_uring_opcode_supported(p, IORING_OP_MSG_RING)) {
		snprintf(why, len, "the kernel lacks IORING_OP_MSG_RING");
		rc = -ENOSYS;
	}
	io_uring_free_probe(p);
	if (rc == 0)
		rc = cr__uring_io_probe(&ring, why, len);
	io_uring_queue_exit(&ring);
	return rc;
}

/* SQ and CQ sizes: the defaults, or a CQ size from the environment (tests). */
static void
ring_sizes(unsigned *sq, unsigned *cq)
{
	const char *s = getenv(CQ_ENTRIES_ENV);
	unsigned long v;
	char *end;

	*sq = RING_ENTRIES;
	*cq = RING_ENTRIES * CQ_PER_SQ;
	if (s == NULL || *s == '\0')
		return;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 2 || v > CQ_ENTRIES_MAX) {
		CR_LOG(log_uring, WARNING, "%s=%s ignored: expected 2..%u", CQ_ENTRIES_ENV, s,
		       CQ_ENTRIES_MAX);
		return;
	}
	*cq = (unsigned)v;
	if (*sq > *cq)
		*sq = *cq; /* the kernel wants at least as many CQ entries as SQ entries */
}

/* Newest flags first; older kernels refuse some with EINVAL. */
static int
ring_setup(struct cr_backend *be)
{
	static const unsigned tries[] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
		0,
	};
	struct io_uring_params p;
	unsigned i, sq, cq;
	int rc = -EINVAL;

	ring_sizes(&sq, &cq);
	for (i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = tries[i] | IORING_SETUP_CQSIZE;
		p.cq_entries = cq;
		rc = io_uring_queue_init_params(sq, &be->ring, &p);
		if (rc == 0) {
			be->setup_flags = tries[i];
			if (i != 0)
				CR_LOG(log_uring, INFO, "ring set up with fewer flags (%#x)",
				       tries[i]);
			if (!(p.features & IORING_FEAT_NODROP))
				CR_LOG(log_uring, WARNING,
				       "no IORING_FEAT_NODROP: a full CQ may drop completions");
			return 0;
		}
		if (rc != -EINVAL)
			break;
	}
	return rc;
}

struct io_uring_sqe *
cr__uring_get_sqe(struct cr_backend *be)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&be->ring);

	if (sqe == NULL) {
		io_uring_submit(&be->ring);
		sqe = io_uring_get_sqe(&be->ring);
	}
	return sqe;
}

/* The lcore record's wake channel: made once, kept across incarnations (nonblocking: it
 * is drained with read(2) after the poll says it is readable). */
static int
wake_init(struct cr_wake *w)
{
	w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return w->fd < 0 ? -errno : 0;
}

static void
wake_fini(struct cr_wake *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

static void
efd_arm(struct cr_backend *be)
{
	struct io_uring_sqe *sqe = cr__uring_get_sqe(be);

	if (sqe == NULL)
		return; /* retried at the next poll */
	io_uring_prep_poll_add(sqe, be->wake->fd, POLLIN);
	io_uring_sqe_set_data64(sqe, TAG_EFD);
	be->efd_armed = true;
}

/* The poll fired: empty the counter so that the next poll waits for a new write. */
static void
efd_drain(struct cr_backend *be)
{
	uint64_t v;

	if (read(be->wake->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		CR_LOG(log_uring, ERR, "eventfd read: %s", strerror(errno));
}

static int
init(struct cr_backend **out, unsigned lcore, struct cr_wake *wake,
     const struct cr_eal_config *cfg)
{
	struct cr_backend *be;
	int rc;

	(void)lcore;
	(void)cfg;
	be = calloc(1, sizeof(*be));
	if (be == NULL)
		return -ENOMEM;
	be->wake = wake;
	rc = ring_setup(be);
	if (rc != 0)
		goto out_free;
	efd_arm(be);
	io_uring_submit(&be->ring);
	*out = be;
	return 0;

out_free:
	free(be);
	return rc;
}

static void
fini(struct cr_backend *be)
{
	if (be == NULL)
		return;
	/* Closing the ring cancels the armed poll; the kernel then owns nothing of ours. The
	 * wake channel stays for the next incarnation. */
	io_uring_queue_exit(&be->ring);
	/* Normally lib/io's stop freed the receive buffers; if not, only now is it safe. */
	cr__uring_io_free(be);
	free(be);
}

static unsigned
sq_flags(const struct cr_backend *be)
{
	return IO_URING_READ_ONCE(*be->ring.sq.kflags);
}

static bool
needs_enter(const struct cr_backend *be)
{
	/* Deferred task work (DEFER_TASKRUN) or an overflowed CQ only reach the CQ through
	 * io_uring_enter; the kernel flags both in sq_flags. */
	return sq_flags(be) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW);
}

static void wake_foreign(struct cr_wake *w);

static void
dispatch(struct cr_backend *be, uint64_t ud, int32_t res, uint32_t flags, uint64_t *wakes)
{
	switch (ud & TAG_MASK) {
	case TAG_OP:
		cr__uring_io_cqe(be, ud, res, flags);
		break;
	case TAG_WAKE:
		(*wakes)++;
		break;
	case TAG_EFD:
		(*wakes)++;
		be->efd_armed = false;
		efd_drain(be);
		break;
	case TAG_MSGERR:
		/* The target's CQ could not take our wake; never lose it. Its wake channel
		 * lives as long as the runtime, whichever incarnation is up by now. */
		CR_LOG(log_uring, DEBUG, "MSG_RING wake failed: %s", strerror(-res));
		wake_foreign((struct cr_wake *)(uintptr_t)(ud & ~(uint64_t)TAG_MASK));
		break;
	case TAG_CANCEL:
		/* -ENOENT or -EALREADY: the op completes by itself; its own CQE says how. */
		break;
	default:
		CR_LOG(log_uring, ERR, "CQE with unknown tag: user_data %#llx res %d",
		       (unsigned long long)ud, res);
		break;
	}
}

static unsigned
poll(struct cr_backend *be, unsigned budget, uint64_t *wakes)
{
	struct io_uring_cqe *cqe;
	unsigned n = 0, rounds = 0;

	/* What the last turn queued: liburing enters with GETEVENTS when task work or an
	 * overflow waits, so this one entry also brings their completions in. */
	if (io_uring_sq_ready(&be->ring) != 0)
		io_uring_submit(&be->ring);
	while (n < budget) {
		uint64_t ud;
		int32_t res;
		uint32_t flags;

		if (io_uring_cq_ready(&be->ring) == 0) {
			if (!needs_enter(be) || rounds++ == OVERFLOW_ROUNDS)
				break;
			if (sq_flags(be) & IORING_SQ_CQ_OVERFLOW)
				be->io.stats.cq_overflows++;
			io_uring_get_events(&be->ring);
			continue;
		}
		if (__io_uring_peek_cqe(&be->ring, &cqe, NULL) != 0 || cqe == NULL)
			break;
		ud = cqe->user_data;
		res = cqe->res;
		flags = cqe->flags;
		/* Consumed before it is acted on: a callback may submit, and so reap, more. */
		io_uring_cqe_seen(&be->ring, cqe);
		n++;
		dispatch(be, ud, res, flags, wakes);
	}
	/* Even with no budget left: re-arming a recv that waits for buffers completes
	 * nothing, and skipping it let a full CQ keep a connection deaf for seconds. */
	n += cr__uring_io_run(be, budget - n);
	if (!be->efd_armed)
		efd_arm(be);
	return n;
}

static bool
pending(struct cr_backend *be)
{
	return io_uring_cq_ready(&be->ring) != 0 || needs_enter(be) || cr__uring_io_pending(be);
}

static void
submit(struct cr_backend *be)
{
	if (io_uring_sq_ready(&be->ring) != 0)
		io_uring_submit(&be->ring);
}

static void
park(struct cr_backend *be, uint64_t timeout_ns)
{
	struct __kernel_timespec ts;
	struct io_uring_cqe *cqe;

	if (timeout_ns == 0) {
		submit(be);
		return;
	}
	/* Never sleep deaf to the wake channel (its poll is re-armed in poll(), which an SQ
	 * shortage may have put off). */
	if (!be->efd_armed)
		efd_arm(be);
	ts.tv_sec = (long long)(timeout_ns / 1000000000u);
	ts.tv_nsec = (long long)(timeout_ns % 1000000000u);
	io_uring_submit_and_wait_timeout(&be->ring, &cqe, 1,
					 timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
}

_Static_assert(_Alignof(struct cr_wake) > TAG_MASK, "a wake pointer leaves the tag bits free");

/* The reactor holds @p target's mailbox admission until our next submit (see the ops). */
static void
wake_lcore(struct cr_backend *self, struct cr_backend *target, struct cr_wake *tw)
{
	struct io_uring_sqe *sqe = cr__uring_get_sqe(self);

	if (sqe == NULL) {
		wake_foreign(tw);
		return;
	}
	io_uring_prep_msg_ring(sqe, target->ring.ring_fd, 0, TAG_WAKE, 0);
	/* No CQE for us on success; a failure comes back tagged with the target's channel. */
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)tw | TAG_MSGERR);
}

static void
wake_foreign(struct cr_wake *w)
{
	uint64_t one = 1;

	/* The counter cannot saturate: each poll that fires empties it. */
	if (write(w->fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		CR_LOG(log_uring, ERR, "eventfd wake failed: %s", strerror(errno));
	atomic_fetch_add_explicit(&w->signals, 1, memory_order_relaxed);
}

static const struct cr_backend_ops uring_ops = {
	.name = "uring",
	.probe = probe,
	.wake_init = wake_init,
	.wake_fini = wake_fini,
	.init = init,
	.fini = fini,
	.poll = poll,
	.pending = pending,
	.submit = submit,
	.poll_submits = true,
	.park = park,
	.wake_from_lcore = wake_lcore,
	.wake_from_foreign = wake_foreign,
	.io = &cr__uring_io_ops,
};

CR_BACKEND_REGISTER(uring_ops)
