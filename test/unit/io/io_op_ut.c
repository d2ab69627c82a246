/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/io's op slots on the driver named by $CR_UT_DRIVER: handles and generations, cancel,
 * abandon and its release, deadlines, stale completions, slot exhaustion and reuse from a
 * callback. Sockets are AF_UNIX pairs; nothing leaves the host.
 */
#include <sys/uio.h>

#include "cr_io_driver.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"

#define INDEX(id) (((id) >> CR_OP_TAG_BITS) & (CR_OP_MAX - 1))

/* What one op's callback saw. */
struct rec {
	unsigned calls, finals, after_final;
	int32_t res; /* of the last call */
	uint32_t flags;
	uint64_t bytes;
	cr_op_id id; /* to check from inside the callback */
	bool live_in_final;
};

static void
rec_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct rec *r = ctx;

	if (r->finals != 0)
		r->after_final++;
	r->calls++;
	r->res = cqe->res;
	r->flags = cqe->flags;
	if (cqe->res > 0 && (cqe->flags & CR_IO_F_BUFFER))
		r->bytes += (uint64_t)cqe->res;
	if (!(cqe->flags & CR_IO_F_MORE)) {
		r->finals++;
		/* The slot is retired before the last callback runs. */
		r->live_in_final = r->id != 0 && cr_io_live(r->id);
	}
	if (cqe->flags & CR_IO_F_BUFFER)
		cr_io_buf_release(cqe->buf_id);
}

struct msgbuf {
	struct msghdr msg;
	struct iovec iov;
	uint8_t data[64];
};

static struct msghdr *
msg_init(struct msgbuf *m)
{
	memset(m, 0, sizeof(*m));
	m->iov.iov_base = m->data;
	m->iov.iov_len = sizeof(m->data);
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	return &m->msg;
}

/* ---- off an lcore ---- */

static void
test_off_lcore(void)
{
	errno = 0;
	CU_ASSERT_EQUAL(cr_io_recv(0, rec_cb, NULL), 0);
	CU_ASSERT_EQUAL(errno, EPERM);
	CU_ASSERT_EQUAL(cr_io_cancel(8), -EPERM);
	CU_ASSERT_EQUAL(cr_io_abandon(8, NULL, NULL), -EPERM);
	CU_ASSERT_EQUAL(cr_io_set_deadline(8, 1), -EPERM);
	CU_ASSERT_FALSE(cr_io_live(8));
	CU_ASSERT_EQUAL(cr_io_inflight(), 0);
	CU_ASSERT_EQUAL(cr_io_buf_size(), 0);
}

/* ---- handles, generations, stale completions ---- */

struct gen {
	int sv[2], phase;
	struct msgbuf m;
	struct rec r1, r2;
	cr_op_id id1, id2;
};

static int
gen_step(void *arg)
{
	struct gen *s = arg;

	switch (s->phase) {
	case 0:
		CU_ASSERT_EQUAL(cr_io_cancel(0), -ENOENT);
		CU_ASSERT_FALSE(cr_io_live(0));
		CU_ASSERT(cr_io_buf_size() > 0);
		s->id1 = s->r1.id = cr_io_recvmsg(s->sv[0], msg_init(&s->m), rec_cb, &s->r1);
		CU_ASSERT_FATAL(s->id1 != 0);
		CU_ASSERT_EQUAL(s->id1 & ((1u << CR_OP_TAG_BITS) - 1), 0);
		CU_ASSERT(cr_io_live(s->id1));
		CU_ASSERT_EQUAL(cr_io_inflight(), 1);
		CU_ASSERT_EQUAL(cr_io_cancel(s->id1), 0);
		CU_ASSERT_EQUAL(cr_io_cancel(s->id1), 0); /* asked once, still live */
		CU_ASSERT_EQUAL(s->r1.calls, 0);	  /* never from inside the call */
		s->phase = 1;
		break;
	case 1:
		if (s->r1.calls == 0)
			break;
		CU_ASSERT_EQUAL(s->r1.calls, 1);
		CU_ASSERT_EQUAL(s->r1.res, -ECANCELED);
		CU_ASSERT_EQUAL(s->r1.flags, 0);
		CU_ASSERT_FALSE(s->r1.live_in_final);
		CU_ASSERT_FALSE(cr_io_live(s->id1));
		CU_ASSERT_EQUAL(cr_io_cancel(s->id1), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_abandon(s->id1, NULL, NULL), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_set_deadline(s->id1, UT_MS), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		/* The freed slot comes back with a new generation: the old handle stays dead. */
		s->id2 = s->r2.id = cr_io_recvmsg(s->sv[0], msg_init(&s->m), rec_cb, &s->r2);
		CU_ASSERT_FATAL(s->id2 != 0);
		CU_ASSERT_EQUAL(INDEX(s->id2), INDEX(s->id1));
		CU_ASSERT_NOT_EQUAL(s->id2, s->id1);
		CU_ASSERT_EQUAL(cr_io_cancel(s->id1), -ENOENT);
		CU_ASSERT_FALSE(cr_io_live(s->id1));
		CU_ASSERT(cr_io_live(s->id2));
		/* A late CQE for the old generation calls nobody and frees nothing. */
		cr_io_complete(s->id1, 7, 0, NULL, 0);
		CU_ASSERT_EQUAL(s->r1.calls, 1);
		CU_ASSERT_EQUAL(s->r2.calls, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 1);
		CU_ASSERT_EQUAL(write(s->sv[1], "hello", 5), 5);
		s->phase = 2;
		break;
	case 2:
		if (s->r2.calls == 0)
			break;
		CU_ASSERT_EQUAL(s->r2.calls, 1);
		CU_ASSERT_EQUAL(s->r2.res, 5);
		CU_ASSERT_EQUAL(memcmp(s->m.data, "hello", 5), 0);
		CU_ASSERT_FALSE(cr_io_live(s->id2));
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_generations_and_stale(void)
{
	struct gen s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(gen_step, &s);
	CU_ASSERT_EQUAL(s.phase, 2);
	close(s.sv[0]);
	close(s.sv[1]);
}

/*
 * White-box: a slot reused 2^37 times wraps its generation. The handle must stay non-zero
 * (the old shift-and-add turned slot 0's next handle into 0, which op_submit reports as a
 * failure for an op the kernel then holds) and keep its index.
 */
static void
test_generation_wrap(void)
{
	cr_op_id last0 = (CR_OP_GEN_MASK << CR_OP_GEN_SHIFT) | 0;
	cr_op_id last7 = (CR_OP_GEN_MASK << CR_OP_GEN_SHIFT) | (7u << CR_OP_TAG_BITS);
	cr_op_id id;
	unsigned i;

	CU_ASSERT_NOT_EQUAL(cr_op_next_id(last0, 0), 0);
	CU_ASSERT_EQUAL(cr_op_next_id(last0, 0) >> CR_OP_GEN_SHIFT, 1);
	CU_ASSERT_EQUAL(INDEX(cr_op_next_id(last7, 7)), 7);
	CU_ASSERT_EQUAL(cr_op_next_id(last7, 7) >> CR_OP_GEN_SHIFT, 1);
	CU_ASSERT_EQUAL(cr_op_next_id(last7, 7) & ((1u << CR_OP_TAG_BITS) - 1), 0);
	/* Away from the wrap, one step is one generation, and never a repeat. */
	id = (UINT64_C(5) << CR_OP_GEN_SHIFT) | (3u << CR_OP_TAG_BITS);
	for (i = 0; i < 1000; i++) {
		cr_op_id next = cr_op_next_id(id, 3);

		CU_ASSERT_EQUAL(next >> CR_OP_GEN_SHIFT, (id >> CR_OP_GEN_SHIFT) + 1);
		CU_ASSERT_EQUAL(INDEX(next), 3);
		id = next;
	}
}

/* ---- abandon: no callback, release after the CQE, memory left alone afterwards ---- */

struct aband {
	int sv[2], phase;
	struct msgbuf m;
	struct rec r;
	cr_op_id id;
	unsigned released;
	uint64_t until;
};

static void
released(void *arg)
{
	struct aband *s = arg;

	s->released++;
}

static int
abandon_step(void *arg)
{
	struct aband *s = arg;
	char got[16];
	unsigned i;

	switch (s->phase) {
	case 0:
		msg_init(&s->m);
		memset(s->m.data, 0xaa, sizeof(s->m.data));
		s->id = cr_io_recvmsg(s->sv[0], &s->m.msg, rec_cb, &s->r);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(cr_io_abandon(s->id, released, s), 0);
		CU_ASSERT_EQUAL(s->released, 0); /* the kernel may still hold the buffer */
		CU_ASSERT_FALSE(cr_io_live(s->id));
		CU_ASSERT_EQUAL(cr_io_cancel(s->id), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_abandon(s->id, released, s), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_inflight(), 1); /* until its CQE */
		s->phase = 1;
		break;
	case 1:
		if (s->released == 0)
			break;
		CU_ASSERT_EQUAL(s->released, 1);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		/* Released: whatever arrives now must not land in the old buffer. */
		CU_ASSERT_EQUAL(write(s->sv[1], "0123456789", 10), 10);
		s->until = cr_now_ns() + 30 * UT_MS;
		s->phase = 2;
		break;
	case 2:
		if (cr_now_ns() < s->until)
			break;
		for (i = 0; i < sizeof(s->m.data); i++)
			if (s->m.data[i] != 0xaa)
				break;
		CU_ASSERT_EQUAL(i, sizeof(s->m.data));
		CU_ASSERT_EQUAL(s->r.calls, 0);
		CU_ASSERT_EQUAL(s->released, 1);
		/* ...and the bytes are still in the socket for the next reader. */
		CU_ASSERT_EQUAL(recv(s->sv[0], got, sizeof(got), MSG_DONTWAIT), 10);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_abandon_releases_after_cqe(void)
{
	struct aband s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(abandon_step, &s);
	CU_ASSERT_EQUAL(s.phase, 2);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* Cancel, then abandon before the CQE: the abandon wins, no callback, one release. */
static int
cancel_abandon_step(void *arg)
{
	struct aband *s = arg;

	switch (s->phase) {
	case 0:
		s->id = cr_io_recvmsg(s->sv[0], msg_init(&s->m), rec_cb, &s->r);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(cr_io_cancel(s->id), 0);
		CU_ASSERT_EQUAL(cr_io_abandon(s->id, released, s), 0);
		s->phase = 1;
		break;
	case 1:
		if (s->released == 0)
			break;
		s->until = cr_now_ns() + 10 * UT_MS;
		s->phase = 2;
		break;
	case 2:
		if (cr_now_ns() < s->until)
			break;
		CU_ASSERT_EQUAL(s->released, 1);
		CU_ASSERT_EQUAL(s->r.calls, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_cancel_then_abandon(void)
{
	struct aband s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(cancel_abandon_step, &s);
	CU_ASSERT_EQUAL(s.phase, 2);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* A multishot recv abandoned from its own callback: nothing more is called. */
static void
abandon_self_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct aband *s = ctx;

	s->r.calls++;
	if (cqe->flags & CR_IO_F_BUFFER)
		cr_io_buf_release(cqe->buf_id);
	CU_ASSERT_EQUAL(cr_io_abandon(s->id, released, s), s->r.calls == 1 ? 0 : -ENOENT);
}

static int
abandon_self_step(void *arg)
{
	struct aband *s = arg;

	switch (s->phase) {
	case 0:
		s->id = cr_io_recv(s->sv[0], abandon_self_cb, s);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(write(s->sv[1], "a", 1), 1);
		s->phase = 1;
		break;
	case 1:
		if (s->r.calls == 0)
			break;
		/* More data while the abandoned op is being retired */
		CU_ASSERT_EQUAL(write(s->sv[1], "bcd", 3), 3);
		s->phase = 2;
		break;
	case 2:
		if (s->released == 0)
			break;
		s->until = cr_now_ns() + 20 * UT_MS;
		CU_ASSERT_EQUAL(write(s->sv[1], "e", 1), 1);
		s->phase = 3;
		break;
	case 3:
		if (cr_now_ns() < s->until)
			break;
		CU_ASSERT_EQUAL(s->r.calls, 1);
		CU_ASSERT_EQUAL(s->released, 1);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_abandon_multishot_from_callback(void)
{
	struct aband s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(abandon_self_step, &s);
	CU_ASSERT_EQUAL(s.phase, 3);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* ---- deadlines ---- */

struct dl {
	int sv[2], phase;
	struct msgbuf m;
	struct rec r;
	cr_op_id id;
	uint64_t t0, until;
};

static int
deadline_step(void *arg)
{
	struct dl *s = arg;
	char got[16];

	switch (s->phase) {
	case 0:
		s->id = cr_io_recvmsg(s->sv[0], msg_init(&s->m), rec_cb, &s->r);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(cr_io_set_deadline(s->id, 30 * UT_MS), 0);
		s->t0 = cr_now_ns();
		s->phase = 1;
		break;
	case 1:
		if (s->r.calls == 0)
			break;
		CU_ASSERT_EQUAL(s->r.calls, 1);
		CU_ASSERT_EQUAL(s->r.res, -ETIMEDOUT);
		CU_ASSERT(cr_now_ns() - s->t0 >= 29 * UT_MS);
		CU_ASSERT_FALSE(cr_io_live(s->id));
		/* A deadline that is not reached changes nothing. */
		s->r = (struct rec){0};
		s->id = cr_io_recvmsg(s->sv[0], msg_init(&s->m), rec_cb, &s->r);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(cr_io_set_deadline(s->id, 20 * UT_MS), 0);
		CU_ASSERT_EQUAL(write(s->sv[1], "xyz", 3), 3);
		s->phase = 2;
		break;
	case 2:
		if (s->r.calls == 0)
			break;
		CU_ASSERT_EQUAL(s->r.res, 3);
		s->until = cr_now_ns() + 40 * UT_MS;
		s->phase = 3;
		break;
	case 3:
		if (cr_now_ns() < s->until)
			break;
		CU_ASSERT_EQUAL(s->r.calls, 1);
		CU_ASSERT_EQUAL(s->r.after_final, 0);
		/* Nothing was consumed by the timed-out op. */
		CU_ASSERT_EQUAL(recv(s->sv[0], got, sizeof(got), MSG_DONTWAIT), -1);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_deadline_single_shot(void)
{
	struct dl s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(deadline_step, &s);
	CU_ASSERT_EQUAL(s.phase, 3);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* A multishot recv with a deadline: its data, then one final -ETIMEDOUT. */
static int
deadline_multi_step(void *arg)
{
	struct dl *s = arg;

	switch (s->phase) {
	case 0:
		s->id = cr_io_recv(s->sv[0], rec_cb, &s->r);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(cr_io_set_deadline(s->id, 50 * UT_MS), 0);
		CU_ASSERT_EQUAL(write(s->sv[1], "abc", 3), 3);
		s->phase = 1;
		break;
	case 1:
		if (s->r.finals == 0)
			break;
		CU_ASSERT_EQUAL(s->r.finals, 1);
		CU_ASSERT_EQUAL(s->r.res, -ETIMEDOUT);
		CU_ASSERT_EQUAL(s->r.bytes, 3);
		CU_ASSERT_EQUAL(s->r.calls, 2);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_deadline_multishot(void)
{
	struct dl s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(deadline_multi_step, &s);
	CU_ASSERT_EQUAL(s.phase, 1);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* ---- every slot taken: ENOSPC; then all cancelled, each exactly once ---- */

struct full {
	int sv[2], phase;
	struct msgbuf m; /* shared: none of these ops ever receives */
	unsigned *calls;
	unsigned done, wrong;
	cr_op_id *ids;
};

static struct full *full_state;

static void
slot_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	unsigned i = (unsigned)(uintptr_t)ctx;

	if (full_state->calls[i]++ != 0 || cqe->res != -ECANCELED || cqe->flags != 0)
		full_state->wrong++;
	full_state->done++;
}

static int
full_step(void *arg)
{
	struct full *s = arg;
	unsigned i;

	switch (s->phase) {
	case 0:
		msg_init(&s->m);
		for (i = 0; i < CR_IO_OPS; i++) {
			void *ctx = (void *)(uintptr_t)i;

			s->ids[i] = cr_io_recvmsg(s->sv[0], &s->m.msg, slot_cb, ctx);
			if (s->ids[i] == 0)
				break;
		}
		CU_ASSERT_EQUAL(i, CR_IO_OPS);
		errno = 0;
		CU_ASSERT_EQUAL(cr_io_recvmsg(s->sv[0], &s->m.msg, slot_cb, NULL), 0);
		CU_ASSERT_EQUAL(errno, ENOSPC);
		CU_ASSERT_EQUAL(cr_io_inflight(), CR_IO_OPS);
		s->phase = 1;
		break;
	case 1:
		/* Let the SQEs reach the kernel first, so the cancels find them there. */
		for (i = 0; i < CR_IO_OPS; i++)
			CU_ASSERT_EQUAL(cr_io_cancel(s->ids[i]), 0);
		s->phase = 2;
		break;
	case 2:
		if (s->done < CR_IO_OPS)
			break;
		CU_ASSERT_EQUAL(s->done, CR_IO_OPS);
		CU_ASSERT_EQUAL(s->wrong, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_slots_exhausted(void)
{
	struct full s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	s.calls = calloc(CR_IO_OPS, sizeof(*s.calls));
	s.ids = calloc(CR_IO_OPS, sizeof(*s.ids));
	CU_ASSERT_FATAL(s.calls != NULL && s.ids != NULL);
	full_state = &s;
	ut_run(full_step, &s);
	CU_ASSERT_EQUAL(s.phase, 2);
	free(s.calls);
	free(s.ids);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* ---- a callback starts the next op, in the slot just freed ---- */

#define CHAIN 1000

struct chain {
	int sv[2];
	unsigned n, wrong;
	cr_op_id last;
	size_t got;
	bool started, over;
};

static void
chain_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct chain *s = ctx;
	cr_op_id id;

	if (cqe->res != 1)
		s->wrong++;
	if (++s->n == CHAIN) {
		s->over = true;
		return;
	}
	id = cr_io_send(s->sv[0], "x", 1, chain_cb, s);
	if (id == 0 || INDEX(id) != INDEX(s->last) || id == s->last)
		s->wrong++;
	s->last = id;
}

static int
chain_step(void *arg)
{
	struct chain *s = arg;
	char buf[256];
	ssize_t n;

	/* Drain the peer, or a unix socket fills up after a few hundred tiny sends. */
	while ((n = recv(s->sv[1], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		s->got += (size_t)n;
	if (!s->started) {
		s->started = true;
		s->last = cr_io_send(s->sv[0], "x", 1, chain_cb, s);
		CU_ASSERT_FATAL(s->last != 0);
	} else if (s->over && s->got == CHAIN) {
		CU_ASSERT_EQUAL(s->wrong, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
	}
	return 1;
}

static void
test_callback_reuses_slot(void)
{
	struct chain s = {0};

	CU_ASSERT_FATAL(ut_unix_pair(s.sv) == 0);
	ut_run(chain_step, &s);
	CU_ASSERT_EQUAL(s.n, CHAIN);
	CU_ASSERT_EQUAL(s.got, CHAIN);
	close(s.sv[0]);
	close(s.sv[1]);
}

static const struct ut_case cases[] = {
	UT_CASE(test_off_lcore),
	UT_CASE(test_generations_and_stale),
	UT_CASE(test_generation_wrap),
	UT_CASE(test_abandon_releases_after_cqe),
	UT_CASE(test_cancel_then_abandon),
	UT_CASE(test_abandon_multishot_from_callback),
	UT_CASE(test_deadline_single_shot),
	UT_CASE(test_deadline_multishot),
	UT_CASE(test_slots_exhausted),
	UT_CASE(test_callback_reuses_slot),
};

UT_MAIN("io_op", cases, ut_rt_setup, NULL)
