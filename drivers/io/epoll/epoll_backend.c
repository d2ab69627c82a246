/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoll backend: readiness + nonblocking syscalls, for kernels or sandboxes that refuse
 * io_uring. Wakes (from lcores and foreign threads alike) raise a flag and write an
 * eventfd registered in the lcore's epoll set; the flag lets poll() skip the read
 * syscall when no wake came.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cr_log.h"
#include "cr_reactor_backend.h"

CR_LOG_COMPONENT(log_epoll, "drv.epoll");

#define MAX_EVENTS 64

struct cr_backend {
	int epfd;
	int efd;
	_Atomic int woken; /* set by wakers before the eventfd write */
};

static int
probe(char *why, size_t len)
{
	int fd = epoll_create1(EPOLL_CLOEXEC);

	if (fd < 0) {
		snprintf(why, len, "epoll_create1: %s", strerror(errno));
		return -errno;
	}
	close(fd);
	return 0;
}

static int
init(struct cr_backend **out, unsigned lcore, const struct cr_eal_config *cfg)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
	struct cr_backend *be;
	int rc;

	(void)lcore;
	(void)cfg;
	be = calloc(1, sizeof(*be));
	if (be == NULL)
		return -ENOMEM;
	be->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (be->epfd < 0) {
		rc = -errno;
		goto out_free;
	}
	be->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (be->efd < 0) {
		rc = -errno;
		goto out_close_ep;
	}
	if (epoll_ctl(be->epfd, EPOLL_CTL_ADD, be->efd, &ev) < 0) {
		rc = -errno;
		goto out_close_efd;
	}
	*out = be;
	return 0;

out_close_efd:
	close(be->efd);
out_close_ep:
	close(be->epfd);
out_free:
	free(be);
	return rc;
}

static void
fini(struct cr_backend *be)
{
	if (be == NULL)
		return;
	close(be->efd);
	close(be->epfd);
	free(be);
}

static unsigned
poll(struct cr_backend *be, unsigned budget, uint64_t *wakes)
{
	uint64_t v;

	(void)budget;
	/* acquire: pairs with the release in wake() */
	if (!atomic_exchange_explicit(&be->woken, 0, memory_order_acquire))
		return 0;
	if (read(be->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		CR_LOG(log_epoll, ERR, "eventfd read: %s", strerror(errno));
	(*wakes)++;
	return 1;
}

static bool
pending(struct cr_backend *be)
{
	return atomic_load_explicit(&be->woken, memory_order_relaxed) != 0;
}

static void
submit(struct cr_backend *be)
{
	(void)be;
}

static void
park(struct cr_backend *be, uint64_t timeout_ns)
{
	struct epoll_event evs[MAX_EVENTS];
	struct timespec ts;

	if (timeout_ns == 0)
		return;
	ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
	ts.tv_nsec = (long)(timeout_ns % 1000000000u);
	epoll_pwait2(be->epfd, evs, MAX_EVENTS, timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
}

static void
wake(struct cr_backend *target)
{
	uint64_t one = 1;

	/*
	 * Write first, flag second: the reader drains the eventfd only after seeing the flag,
	 * so the flag can never be consumed while our write is still to come (which left
	 * the eventfd readable and every park returning at once).
	 */
	if (write(target->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		CR_LOG(log_epoll, ERR, "eventfd wake failed: %s", strerror(errno));
	atomic_store_explicit(&target->woken, 1, memory_order_release);
}

static void
wake_lcore(struct cr_backend *self, struct cr_backend *target)
{
	(void)self;
	wake(target);
}

static const struct cr_backend_ops epoll_ops = {
	.name = "epoll",
	.probe = probe,
	.init = init,
	.fini = fini,
	.poll = poll,
	.pending = pending,
	.submit = submit,
	.park = park,
	.wake_from_lcore = wake_lcore,
	.wake_from_foreign = wake,
};

CR_BACKEND_REGISTER(epoll_ops)
