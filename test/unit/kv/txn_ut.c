/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/txn.c: the connection's hold of a transaction whose locks cannot all be taken.
 * A script's transaction keeps its hold to its end (block_to_end, script_run.c): granted
 * locks do not release it, and a failure to take one does (the client's next command is
 * parsed); an EXEC-like one releases it once its locks are held. One origin on this
 * thread; the shards' answers are stubbed (shard 0 grants, shard 1 is unreachable).
 */
#include <stdlib.h>
#include <string.h>

#include "txn.c"

#include "ut_cunit.h"

/* ---- stubs of what txn.c calls below it ---- */

struct kv_global kv;
const char kv_err_oom[] = "OOM out of memory storing the value";
static struct kv_shard shard;
static struct kconn conn;
static unsigned parsed;	  /* times the connection was let go on (blocked fell to 0) */
static bool one_down;	  /* shard 1 unreachable */
static unsigned finished; /* replies made final */
static char last[128];

unsigned
key_shard(const struct kv_arg *a)
{
	return a->p[0] == 'b' ? 1 : 0;
}

void
kv_unblock(struct kconn *kc)
{
	if (--kc->blocked == 0)
		parsed++;
}

void
kv_tx_await(struct kv_shard *sh, int delta)
{
	(void)sh, (void)delta;
}

struct kv_release *
kv_tx_release_new(void)
{
	return calloc(1, sizeof(struct kv_release));
}

void
kv_tx_release(unsigned s, void *hold, uint64_t epoch, struct kv_release **rel)
{
	(void)s, (void)epoch;
	if (hold != NULL) {
		free(*rel);
		*rel = NULL;
	}
}

static int granted;

/* A lock part: shard 0 grants at once, shard 1 answers it cannot be reached. */
void
kv_part_send(struct kv_shard *sh, struct kpart *p)
{
	(void)sh;
	if (p->shard == 1 && one_down)
		rb_error(&p->out, "ERR the shard of this key is unavailable (test)");
	else
		p->lock->hold = &granted;
	p->on_answer(p);
}

void
kreq_launch(struct kreq *kr)
{
	(void)kr;
	CU_FAIL("no steps here");
}

void
kreq_finish(struct kreq *kr)
{
	size_t n = kr->final->len < sizeof(last) - 1 ? kr->final->len : sizeof(last) - 1;

	memcpy(last, kr->final->p, n);
	last[n] = '\0';
	finished++;
	kr->state_fini(kr->state);
	kr->state = NULL;
}

/* ---- the tests ---- */

static struct kv_arg args[4];
static struct kreq req;
static unsigned nexts;

static void
next(struct kv_tx *tx)
{
	nexts++;
	/* still held here, for a script (block_to_end) */
	CU_ASSERT_EQUAL(conn.blocked, tx->block_to_end ? 1 : 0);
	kv_tx_finish(tx, "+OK\r\n", 5);
}

static struct kv_tx *
start(bool block_to_end)
{
	struct kv_tx *tx;

	memset(&req, 0, sizeof(req));
	memset(&conn, 0, sizeof(conn));
	conn.sh = &shard;
	req.kc = &conn;
	args[0] = (struct kv_arg){"EVAL", 4};
	args[1] = (struct kv_arg){"a0", 2};
	args[2] = (struct kv_arg){"b0", 2};
	req.argv = args;
	req.argc = 3;
	rb_init(&req.reply, NULL, 0);
	parsed = finished = nexts = 0;
	last[0] = '\0';
	tx = kv_tx_new(&req);
	CU_ASSERT_PTR_NOT_NULL_FATAL(tx);
	CU_ASSERT_EQUAL(conn.blocked, 1);
	tx->block_to_end = block_to_end;
	CU_ASSERT_EQUAL(kv_tx_key(tx, 1, true), 0);
	CU_ASSERT_EQUAL(kv_tx_key(tx, 2, true), 0);
	return tx;
}

/* the second shard cannot be reached: answered, and the connection goes on */
static void
t_lock_fails(void)
{
	int bte;

	for (bte = 0; bte <= 1; bte++) {
		one_down = true;
		kv_tx_lock(start(bte), NULL, 1, next);
		CU_ASSERT_EQUAL(nexts, 0);
		CU_ASSERT_EQUAL(finished, 1);
		CU_ASSERT_STRING_EQUAL(last,
				       "-ERR the shard of this key is unavailable (test)\r\n");
		CU_ASSERT_EQUAL(conn.blocked, 0);
		CU_ASSERT_EQUAL(parsed, 1);
		rb_fini(&req.reply);
	}
}

/* every lock granted: a script's hold lasts to its end, an EXEC's to its locks */
static void
t_locks_held(void)
{
	int bte;

	for (bte = 0; bte <= 1; bte++) {
		one_down = false;
		kv_tx_lock(start(bte), NULL, 1, next);
		CU_ASSERT_EQUAL(nexts, 1);
		CU_ASSERT_EQUAL(finished, 1);
		CU_ASSERT_STRING_EQUAL(last, "+OK\r\n");
		CU_ASSERT_EQUAL(conn.blocked, 0);
		CU_ASSERT_EQUAL(parsed, 1);
		rb_fini(&req.reply);
	}
}

static int
setup(void)
{
	kv.nshards = 2;
	return 0;
}

static const struct ut_case cases[] = {
    UT_CASE(t_lock_fails),
    UT_CASE(t_locks_held),
};

UT_MAIN("kv_txn", cases, setup, NULL)
