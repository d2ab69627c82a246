/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io_uring backend: the lcore's private ring. Park is submit-and-wait with a timeout;
 * lcore-to-lcore wakes are IORING_OP_MSG_RING SQEs riding on the sender's next submit;
 * foreign threads write an eventfd whose read the lcore keeps armed in its ring.
 *
 * user_data tags (low 3 bits; the rest is a pointer or an index):
 *   TAG_WAKE   a MSG_RING wake posted into our CQ by another lcore
 *   TAG_EFD    our eventfd read completed: a foreign wake
 *   TAG_MSGERR a MSG_RING we sent failed; the payload is the target backend
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <liburing.h>

#include "cr_log.h"
#include "cr_reactor_backend.h"

CR_LOG_COMPONENT(log_uring, "drv.uring");

#define RING_ENTRIES 256
#define TAG_MASK 7u
#define TAG_WAKE 1u
#define TAG_EFD 2u
#define TAG_MSGERR 3u

struct cr_backend {
	struct io_uring ring;
	int efd;
	uint64_t efd_val; /* the armed read's buffer */
	bool efd_armed;
	unsigned setup_flags;
};

static int
probe(char *why, size_t len)
{
	struct io_uring ring;
	struct io_uring_probe *p;
	int rc, fd;

	rc = io_uring_queue_init(4, &ring, 0);
	if (rc < 0) {
		if (rc == -EPERM && (fd = open("/proc/sys/kernel/io_uring_disabled", O_RDONLY)) >= 0) {
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
	io_uring_queue_exit(&ring);
	return rc;
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
	unsigned i;
	int rc = -EINVAL;

	for (i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = tries[i];
		rc = io_uring_queue_init_params(RING_ENTRIES, &be->ring, &p);
		if (rc == 0) {
			be->setup_flags = tries[i];
			if (i != 0)
				CR_LOG(log_uring, INFO, "ring set up with fewer flags (%#x)", tries[i]);
			return 0;
		}
		if (rc != -EINVAL)
			break;
	}
	return rc;
}

static struct io_uring_sqe *
get_sqe(struct cr_backend *be)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&be->ring);

	if (sqe == NULL) {
		io_uring_submit(&be->ring);
		sqe = io_uring_get_sqe(&be->ring);
	}
	return sqe;
}

static void
efd_arm(struct cr_backend *be)
{
	struct io_uring_sqe *sqe = get_sqe(be);

	if (sqe == NULL)
		return; /* retried at the next poll */
	io_uring_prep_read(sqe, be->efd, &be->efd_val, sizeof(be->efd_val), 0);
	io_uring_sqe_set_data64(sqe, TAG_EFD);
	be->efd_armed = true;
}

static int
init(struct cr_backend **out, unsigned lcore, const struct cr_eal_config *cfg)
{
	struct cr_backend *be;
	int rc;

	(void)lcore;
	(void)cfg;
	be = calloc(1, sizeof(*be));
	if (be == NULL)
		return -ENOMEM;
	rc = ring_setup(be);
	if (rc != 0)
		goto out_free;
	/* Blocking: io_uring would fail a read on an O_NONBLOCK fd with -EAGAIN
	 * instead of waiting for it. */
	be->efd = eventfd(0, EFD_CLOEXEC);
	if (be->efd < 0) {
		rc = -errno;
		goto out_exit_ring;
	}
	efd_arm(be);
	io_uring_submit(&be->ring);
	*out = be;
	return 0;

out_exit_ring:
	io_uring_queue_exit(&be->ring);
out_free:
	free(be);
	return rc;
}

static void
fini(struct cr_backend *be)
{
	if (be == NULL)
		return;
	/* Closing the ring cancels the armed eventfd read; the kernel then owns nothing of
	 * ours (efd_val lives until this free, after the exit that waits for it). */
	io_uring_queue_exit(&be->ring);
	close(be->efd);
	free(be);
}

static bool
needs_enter(const struct cr_backend *be)
{
	/* Deferred task work (DEFER_TASKRUN) or an overflowed CQ only reach the CQ through
	 * io_uring_enter; the kernel flags both in sq_flags. */
	return IO_URING_READ_ONCE(*be->ring.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW);
}

static void wake_foreign(struct cr_backend *target);

static unsigned
poll(struct cr_backend *be, unsigned budget, uint64_t *wakes)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	if (needs_enter(be))
		io_uring_get_events(&be->ring);
	io_uring_for_each_cqe(&be->ring, head, cqe)
	{
		uint64_t ud = cqe->user_data;

		if (n == budget)
			break;
		n++;
		switch (ud & TAG_MASK) {
		case TAG_WAKE:
			(*wakes)++;
			break;
		case TAG_EFD:
			(*wakes)++;
			be->efd_armed = false;
			break;
		case TAG_MSGERR:
			/* The target's CQ could not take our wake; never lose it. */
			CR_LOG(log_uring, DEBUG, "MSG_RING wake failed: %s", strerror(-cqe->res));
			wake_foreign((struct cr_backend *)(uintptr_t)(ud & ~(uint64_t)TAG_MASK));
			break;
		default:
			break;
		}
	}
	io_uring_cq_advance(&be->ring, n);
	if (!be->efd_armed)
		efd_arm(be);
	return n;
}

static bool
pending(struct cr_backend *be)
{
	/* An unarmed eventfd read could miss a foreign wake: keep turning until re-armed. */
	return io_uring_cq_ready(&be->ring) != 0 || needs_enter(be) || !be->efd_armed;
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
	ts.tv_sec = (long long)(timeout_ns / 1000000000u);
	ts.tv_nsec = (long long)(timeout_ns % 1000000000u);
	io_uring_submit_and_wait_timeout(&be->ring, &cqe, 1,
					 timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
}

static void
wake_lcore(struct cr_backend *self, struct cr_backend *target)
{
	struct io_uring_sqe *sqe = get_sqe(self);

	if (sqe == NULL) {
		wake_foreign(target);
		return;
	}
	io_uring_prep_msg_ring(sqe, target->ring.ring_fd, 0, TAG_WAKE, 0);
	/* No CQE for us on success; a failure comes back tagged with the target. */
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)target | TAG_MSGERR);
}

static void
wake_foreign(struct cr_backend *target)
{
	uint64_t one = 1;

	/* The counter cannot saturate: each armed read empties it. */
	if (write(target->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		CR_LOG(log_uring, ERR, "eventfd wake failed: %s", strerror(errno));
}

static const struct cr_backend_ops uring_ops = {
	.name = "uring",
	.probe = probe,
	.init = init,
	.fini = fini,
	.poll = poll,
	.pending = pending,
	.submit = submit,
	.park = park,
	.wake_from_lcore = wake_lcore,
	.wake_from_foreign = wake_foreign,
};

CR_BACKEND_REGISTER(uring_ops)
