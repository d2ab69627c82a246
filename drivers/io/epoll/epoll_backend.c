/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoll backend: readiness + nonblocking syscalls, for kernels or sandboxes that refuse
 * io_uring. Wakes (from lcores and foreign threads alike) raise a flag and write an
 * eventfd registered in the lcore's epoll set; the flag lets poll() skip the read
 * syscall when no wake came. The I/O ops live in epoll_io.c; this file hands them the
 * readiness events, whether a park or a poll collected them.
 */
#include <errno.h>
#include <limits.h>
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
#include "epoll_internal.h"

CR_LOG_COMPONENT(log_epoll, "drv.epoll");

/* pending() asks the kernel for readiness once in this many calls (see there). */
#define PEEK_EVERY 16

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

/* The lcore record's wake channel: a nonblocking eventfd that outlives every backend. */
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

static int
init(struct cr_backend **out, unsigned lcore, struct cr_wake *wake,
     const struct cr_eal_config *cfg)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EPOLL_TAG_EFD};
	struct cr_backend *be;
	int rc;

	(void)cfg;
	be = calloc(1, sizeof(*be));
	if (be == NULL)
		return -ENOMEM;
	be->lcore = lcore;
	be->wake = wake;
	be->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (be->epfd < 0) {
		rc = -errno;
		goto out_free;
	}
	if (epoll_ctl(be->epfd, EPOLL_CTL_ADD, wake->fd, &ev) < 0) {
		rc = -errno;
		goto out_close_ep;
	}
	*out = be;
	return 0;

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
	cr__epoll_io_free(be);
	/* The wake channel stays (it leaves the set with the epoll fd). */
	close(be->epfd);
	free(be);
}

static void
drain_efd(struct cr_backend *be)
{
	uint64_t v;

	if (read(be->wake->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		CR_LOG(log_epoll, ERR, "eventfd read: %s", strerror(errno));
}

/* Hand the collected events to their owners; none stays behind for the next turn. */
static void
apply_events(struct cr_backend *be)
{
	int i;

	for (i = 0; i < be->n_evs; i++) {
		uint64_t tag = be->evs[i].data.u64;

		if (tag == EPOLL_TAG_EFD)
			/* The wake flag carries the wake; the counter is emptied so that the
			 * level-triggered eventfd does not end every later park at once (a
			 * wake's write can land after the poll that took its flag). */
			drain_efd(be);
		else
			cr__epoll_io_event(be, (int)(tag - 1), be->evs[i].events);
	}
	be->n_evs = 0;
}

static unsigned
poll(struct cr_backend *be, unsigned budget, uint64_t *wakes)
{
	unsigned n = 0;
	int rc;

	/* acquire: pairs with the release in wake() */
	if (atomic_exchange_explicit(&be->wake->woken, 0, memory_order_acquire)) {
		drain_efd(be);
		(*wakes)++;
		n++;
	}
	/* One syscall per turn, and only while some fd waits for readiness. */
	if (be->n_evs == 0 && cr__epoll_io_watching(be)) {
		rc = epoll_wait(be->epfd, be->evs, EPOLL_MAX_EVENTS, 0);
		if (rc < 0 && errno != EINTR)
			CR_LOG(log_epoll, ERR, "epoll_wait: %s", strerror(errno));
		be->n_evs = rc > 0 ? rc : 0;
	}
	apply_events(be);
	if (n < budget)
		n += cr__epoll_io_poll(be, budget - n);
	return n;
}

/*
 * The spinning lcore asks this every few hundred ns. io_uring completions show up in a
 * shared ring, but epoll readiness only through a syscall: without one in a while, I/O
 * that arrives during the spin would wait for the park, behind any message that came
 * meanwhile. So one call in PEEK_EVERY, while some fd is watched, asks the kernel (no
 * wait) and keeps what it finds for the next poll.
 */
static bool
pending(struct cr_backend *be)
{
	int rc;

	if (atomic_load_explicit(&be->wake->woken, memory_order_relaxed) != 0 || be->n_evs != 0 ||
	    cr__epoll_io_pending(be))
		return true;
	if (!cr__epoll_io_watching(be) || ++be->peeks % PEEK_EVERY != 0)
		return false;
	rc = epoll_wait(be->epfd, be->evs, EPOLL_MAX_EVENTS, 0);
	be->n_evs = rc > 0 ? rc : 0;
	return be->n_evs != 0;
}

static void
submit(struct cr_backend *be)
{
	(void)be;
}

static int
wait_events(struct cr_backend *be, uint64_t timeout_ns)
{
	struct timespec ts;
	uint64_t ms;
	int rc;

	if (!be->no_pwait2) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long)(timeout_ns % 1000000000u);
		rc = epoll_pwait2(be->epfd, be->evs, EPOLL_MAX_EVENTS,
				  timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
		if (rc >= 0 || errno != ENOSYS)
			return rc;
		CR_LOG(log_epoll, INFO, "no epoll_pwait2 here; parking with ms timeouts");
		be->no_pwait2 = true;
	}
	/* Rounded up: waking early would only park again. */
	ms = timeout_ns == UINT64_MAX ? 0 : timeout_ns / 1000000u + (timeout_ns % 1000000u != 0);
	return epoll_wait(be->epfd, be->evs, EPOLL_MAX_EVENTS,
			  timeout_ns == UINT64_MAX ? -1 : (ms > INT_MAX ? INT_MAX : (int)ms));
}

/* The events that end the sleep are kept for the next poll, which applies them. */
static void
park(struct cr_backend *be, uint64_t timeout_ns)
{
	int rc;

	if (timeout_ns == 0 || be->n_evs != 0 || cr__epoll_io_pending(be))
		return;
	rc = wait_events(be, timeout_ns);
	if (rc < 0 && errno != EINTR)
		CR_LOG(log_epoll, ERR, "epoll_pwait2: %s", strerror(errno));
	be->n_evs = rc > 0 ? rc : 0;
}

static void
wake(struct cr_wake *w)
{
	uint64_t one = 1;

	/*
	 * Write first, flag second: the reader drains the eventfd only after seeing the flag,
	 * so the flag can never be consumed while our write is still to come (which left
	 * the eventfd readable and every park returning at once).
	 */
	if (write(w->fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		CR_LOG(log_epoll, ERR, "eventfd wake failed: %s", strerror(errno));
	atomic_fetch_add_explicit(&w->signals, 1, memory_order_relaxed);
	/* release: pairs with the acquire exchange in poll() */
	atomic_store_explicit(&w->woken, 1, memory_order_release);
}

static void
wake_lcore(struct cr_backend *self, struct cr_backend *target, struct cr_wake *tw)
{
	(void)self;
	(void)target;
	wake(tw);
}

static const struct cr_backend_ops epoll_ops = {
	.name = "epoll",
	.probe = probe,
	.wake_init = wake_init,
	.wake_fini = wake_fini,
	.init = init,
	.fini = fini,
	.poll = poll,
	.pending = pending,
	.submit = submit,
	.park = park,
	.wake_from_lcore = wake_lcore,
	.wake_from_foreign = wake,
	.io = &cr__epoll_io_ops,
};

CR_BACKEND_REGISTER(epoll_ops)
