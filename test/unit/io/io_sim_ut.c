/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/io's op state machine stepped one turn at a time on a simulated lcore, over the
 * harness's fake I/O driver (ut_io.h): every completion is one the test chose, reported
 * in the next turn, so the interleavings real drivers make rare — a deadline in the same
 * turn as the result, a cancel after the final completion was queued, data queued for an
 * op being abandoned, a handle kept past its slot's reuse — happen exactly when asked.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "cr_io.h"
#include "ut_cunit.h"
#include "ut_io.h"

#define MS (1000ull * 1000)

/* What an op's callback saw. */
struct seen {
	unsigned calls;
	int32_t res[8];
	uint32_t flags[8];
	char data[64];
	size_t data_len;
};

static void
on_cqe(void *ctx, const struct cr_io_cqe *cqe)
{
	struct seen *s = ctx;

	if (s->calls < 8) {
		s->res[s->calls] = cqe->res;
		s->flags[s->calls] = cqe->flags;
	}
	s->calls++;
	if (cqe->flags & CR_IO_F_BUFFER) {
		memcpy(s->data + s->data_len, cqe->buf, (size_t)cqe->res);
		s->data_len += (size_t)cqe->res;
		cr_io_buf_release(cqe->buf_id);
	}
}

static unsigned releases;

static void
on_release(void *arg)
{
	(void)arg;
	releases++;
}

static void
test_recv_multishot(void)
{
	struct seen s = {0};
	cr_op_id id = cr_io_recv(42, on_cqe, &s);
	struct cr_op *op;

	CU_ASSERT_NOT_EQUAL_FATAL(id, 0);
	op = ut_io_op(0, CR_OP_RECV, 42);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_EQUAL(cr_io_inflight(), 1);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "hello ", 6, true), 0);
	/* Never from inside a call: only the next turn reports it. */
	CU_ASSERT_EQUAL(s.calls, 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(s.calls, 1);
	CU_ASSERT_EQUAL(s.flags[0], CR_IO_F_BUFFER | CR_IO_F_MORE);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "wor", 3, true), 0);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "ld", 2, true), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(s.calls, 3);
	CU_ASSERT_EQUAL(s.data_len, 11);
	CU_ASSERT_EQUAL(memcmp(s.data, "hello world", 11), 0);
	CU_ASSERT_EQUAL(ut_io_bufs_out(0), 0); /* each callback gave its buffer back */
	/* EOF: the final completion; the handle is dead after it. */
	ut_io_complete(0, op, 0, false);
	ut_turn(0);
	CU_ASSERT_EQUAL(s.calls, 4);
	CU_ASSERT_EQUAL(s.res[3], 0);
	CU_ASSERT_EQUAL(s.flags[3], 0);
	CU_ASSERT_FALSE(cr_io_live(id));
	CU_ASSERT_EQUAL(cr_io_inflight(), 0);
	CU_ASSERT_EQUAL(ut_io_waiting(0), 0);
}

static void
test_deadline(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	struct seen s = {0}, t = {0};
	cr_op_id id;
	struct cr_op *op;

	/* Nothing comes: at the deadline lib/io cancels, and the -ECANCELED the driver
	 * reports is the op's one outcome, as -ETIMEDOUT. */
	id = cr_io_connect(7, (struct sockaddr *)&a, sizeof(a), 10 * MS, on_cqe, &s);
	CU_ASSERT_NOT_EQUAL_FATAL(id, 0);
	ut_turn(0);
	ut_now += 9 * MS;
	ut_turn(0);
	CU_ASSERT_EQUAL(ut_io(0)->cancels, 0);
	CU_ASSERT_EQUAL(s.calls, 0);
	ut_now += 2 * MS;
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL(ut_io(0)->cancels, 1);
	CU_ASSERT_EQUAL(s.calls, 1);
	CU_ASSERT_EQUAL(s.res[0], -ETIMEDOUT);
	/* The result and the deadline in the same turn: completions run before timers, so
	 * the result wins and the deadline never fires. */
	id = cr_io_connect(8, (struct sockaddr *)&a, sizeof(a), 10 * MS, on_cqe, &t);
	op = ut_io_op(0, CR_OP_CONNECT, 8);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	ut_io_complete(0, op, 0, false);
	ut_now += 20 * MS;
	ut_poll_k(0, 3);
	CU_ASSERT_EQUAL(t.calls, 1);
	CU_ASSERT_EQUAL(t.res[0], 0);
	CU_ASSERT_EQUAL(ut_io(0)->cancels, 1);
	CU_ASSERT_FALSE(cr_io_live(id));
}

static void
test_cancel_after_final(void)
{
	struct seen s = {0};
	cr_op_id id = cr_io_send(9, "ping", 4, on_cqe, &s);
	struct cr_op *op = ut_io_op(0, CR_OP_SEND, 9);

	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	/* The result is queued, not yet reported: a cancel still finds the op live, the
	 * driver has nothing left to cancel, and the result is the one outcome. */
	ut_io_complete(0, op, 4, false);
	CU_ASSERT_EQUAL(cr_io_cancel(id), 0);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL(s.calls, 1);
	CU_ASSERT_EQUAL(s.res[0], 4);
	CU_ASSERT_EQUAL(cr_io_cancel(id), -ENOENT);
}

static void
test_abandon(void)
{
	struct seen s = {0};
	cr_op_id id = cr_io_recv(11, on_cqe, &s);
	struct cr_op *op = ut_io_op(0, CR_OP_RECV, 11);

	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	/* Data already on its way when the owner goes: nobody is called, the buffer comes
	 * back, and release runs once, after the final completion. */
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "late", 4, true), 0);
	releases = 0;
	CU_ASSERT_EQUAL(cr_io_abandon(id, on_release, NULL), 0);
	CU_ASSERT_FALSE(cr_io_live(id));
	CU_ASSERT_EQUAL(cr_io_inflight(), 1); /* the kernel's (driver's) until its last CQE */
	CU_ASSERT_EQUAL(releases, 0);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL(s.calls, 0);
	CU_ASSERT_EQUAL(releases, 1);
	CU_ASSERT_EQUAL(ut_io_bufs_out(0), 0);
	CU_ASSERT_EQUAL(cr_io_inflight(), 0);
	CU_ASSERT_EQUAL(cr_io_abandon(id, on_release, NULL), -ENOENT);
}

static void
test_stale_handle(void)
{
	struct seen s = {0}, t = {0};
	cr_op_id old = cr_io_send(12, "a", 1, on_cqe, &s), id;
	struct cr_op *op = ut_io_op(0, CR_OP_SEND, 12);
	uint64_t cancels = ut_io(0)->cancels;

	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	ut_io_complete(0, op, 1, false);
	ut_turn(0);
	/* The slot is free again, and the next op takes it (LIFO): a new generation. */
	id = cr_io_send(13, "b", 1, on_cqe, &t);
	CU_ASSERT_PTR_EQUAL(ut_io_op(0, CR_OP_SEND, 13), op);
	CU_ASSERT_NOT_EQUAL(id, old);
	CU_ASSERT_FALSE(cr_io_live(old));
	CU_ASSERT_EQUAL(cr_io_cancel(old), -ENOENT); /* the old handle touches nothing */
	CU_ASSERT_EQUAL(ut_io(0)->cancels, cancels);
	CU_ASSERT_TRUE(cr_io_live(id));
	CU_ASSERT_EQUAL(cr_io_cancel(id), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(t.calls, 1);
	CU_ASSERT_EQUAL(t.res[0], -ECANCELED);
	CU_ASSERT_EQUAL(s.calls, 1);
}

static const struct ut_case cases[] = {
    {"multishot recv: buffers, order, EOF", test_recv_multishot},
    {"deadline: timed out, and a result in the same turn wins", test_deadline},
    {"cancel after the final completion was queued", test_cancel_after_final},
    {"abandon with data on its way: release after the last completion", test_abandon},
    {"a handle past its slot's reuse", test_stale_handle},
};

UT_MAIN("io_sim", cases, ut_io_suite_init, ut_io_suite_fini)
