/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/kmove.c with outq.c: what a client leaves behind on its old lcore when it
 * moves. One shard on this thread; lib/net's connection is stubbed (its queue a count,
 * its chunk pool full or not), and so is what lies below (pub/sub, memory, timers).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kmove.c"
#include "outq.c"

#include "ut_cunit.h"

/* ---- stubs ---- */

struct kv_global kv;
static struct kv_shard shard;

/* lib/net's connection: its queue, and a chunk pool that refuses while starved. */
static size_t queued;
static bool pool_empty;
int
cr_conn_send(struct cr_conn *c, const void *p, size_t n)
{
	(void)c, (void)p;
	if (pool_empty)
		return -ENOBUFS;
	queued += n;
	return 0;
}
size_t
cr_conn_queued(const struct cr_conn *c)
{
	(void)c;
	return queued;
}
static struct kconn *conn_kc;
void *
cr_conn_data(const struct cr_conn *c)
{
	(void)c;
	return conn_kc;
}
void
cr_conn_set_data(struct cr_conn *c, void *d)
{
	(void)c;
	conn_kc = d;
}
void
cr_conn_close(struct cr_conn *c)
{
	(void)c;
}

unsigned
cr_lcore_id(void)
{
	return 0;
}
unsigned
cr_lcore_next(unsigned prev)
{
	return prev == CR_LCORE_NONE ? 0 : CR_LCORE_NONE;
}
uint64_t
cr_now_ns(void)
{
	return 0;
}
int
cr_defer(cr_msg_fn fn, void *arg)
{
	(void)fn, (void)arg;
	return 0;
}
static unsigned timers_started;
void
cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg)
{
	memset(t, 0, sizeof(*t));
	t->fn = fn;
	t->arg = arg;
}
void
cr_timer_start(struct cr_timer *t, uint64_t ns)
{
	t->expires = ns;
	t->pprev = &t->next; /* armed */
	timers_started++;
}
bool
cr_timer_stop(struct cr_timer *t)
{
	bool was = cr_timer_armed(t);

	t->pprev = NULL;
	return was;
}
struct cr__tel_row cr__tel_rows[CR_MAX_LCORES];
void
cr_log_register(struct cr_log_component *c)
{
	(void)c;
}
void
cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
{
	(void)c, (void)level, (void)fmt;
}

int
kv_ps_move_out(struct kconn *kc)
{
	(void)kc;
	return 0;
}
void
kv_ps_move_in(struct kconn *kc)
{
	(void)kc;
}
void
kv_ps_move_drop(struct kconn *kc)
{
	(void)kc;
}
void
kv_ps_client(struct kv_shard *sh, int delta)
{
	(void)sh, (void)delta;
}
bool
kv_ps_limits(const struct kconn *kc, unsigned long long lim[3])
{
	(void)kc, (void)lim;
	return false;
}
void
kc_mem_update(struct kconn *kc)
{
	(void)kc;
}
int64_t
kv_now_ms(void)
{
	return 0;
}
static unsigned aborted;
void
kc_abort(struct kconn *kc)
{
	aborted++;
	kc->conn = NULL;
}
void
kc_flush(struct kconn *kc)
{
	(void)kc;
}
void
kc_maybe_free(struct kconn *kc)
{
	(void)kc;
}
void
kconn_free(struct kconn *kc)
{
	(void)kc;
}
void
kv_unblock(struct kconn *kc)
{
	(void)kc;
}

/* ---- the cases ---- */

static struct kconn *
client(void)
{
	struct kconn *kc = calloc(1, sizeof(*kc));

	CU_ASSERT_PTR_NOT_NULL_FATAL(kc);
	kc->sh = &shard;
	kc->conn = (struct cr_conn *)kc; /* any non-NULL handle */
	conn_kc = kc;
	kc->next = shard.conns;
	if (shard.conns != NULL)
		shard.conns->pprev = &kc->next;
	shard.conns = kc;
	kc->pprev = &shard.conns;
	return kc;
}

/*
 * A reply refused chunks puts the client on the shard's starved list; lib/net's on_drain
 * then sends all of it (kc_pump), which leaves the list as it was. At that boundary the
 * client moves: it must leave the list, or the old lcore's retry timer pumps a client
 * another lcore owns (and may have freed). (Before: it stayed on it.)
 */
static void
test_move_leaves_starved_list(void)
{
	struct kconn *kc;
	static char reply[1000];

	memset(&shard, 0, sizeof(shard));
	kv.shards[0] = &shard;
	kv_outq_init(&shard);
	queued = 0;
	kc = client();
	pool_empty = true;
	CU_ASSERT_TRUE(kc_send(kc, reply, sizeof(reply)));
	CU_ASSERT(kc->starved && shard.starved == kc);
	pool_empty = false;
	kc_pump(kc); /* on_drain */
	CU_ASSERT_PTR_NULL(kc->oq_head);
	CU_ASSERT_EQUAL(queued, sizeof(reply));
	queued = 0; /* the peer read it: lib/net's queue is empty, a boundary */
	CU_ASSERT_PTR_EQUAL(kv_conn_move_out(kc->conn), kc);
	CU_ASSERT_FALSE(kc->starved);
	CU_ASSERT_PTR_NULL(shard.starved);
	CU_ASSERT_PTR_NULL(shard.conns);
	kv_outq_fini(&shard);
	free(kc);
}

/* A pump in the retry round closes and frees another starved client: that one leaves the
 * round, which does not touch it again. (Before: the round had been detached from the
 * shard, kept it and read it after the free: caught by the ASan build.) */
static struct kconn *victim;
static void
close_victim(struct kconn *kc)
{
	(void)kc;
	kc_oq_drop(victim); /* what kc_gone() does */
	free(victim);	    /* and kc_maybe_free() */
	victim = NULL;
}

static void
test_retry_round_unlinks(void)
{
	struct kconn *a, *b;
	static char reply[1000];

	memset(&shard, 0, sizeof(shard));
	kv.shards[0] = &shard;
	kv_outq_init(&shard);
	queued = 0;
	b = client();
	a = client();
	pool_empty = true;
	CU_ASSERT_TRUE(kc_send(b, reply, sizeof(reply)));
	CU_ASSERT_TRUE(kc_send(a, reply, sizeof(reply)));
	CU_ASSERT(shard.starved == a && a->starved_next == b); /* a is pumped first */
	pool_empty = false;
	victim = b;
	a->out_paused = true; /* its pump resumes its parsing: which closes b */
	a->resume = close_victim;
	starved_retry(&shard.starved_timer, &shard);
	CU_ASSERT_FALSE(a->starved);
	CU_ASSERT_PTR_NULL(shard.starved);
	CU_ASSERT_PTR_NULL(shard.starved_round);
	CU_ASSERT_PTR_NULL(victim);
	kv_outq_fini(&shard);
	kc_oq_drop(a);
	free(a);
}

static const struct ut_case cases[] = {
    UT_CASE(test_move_leaves_starved_list),
    UT_CASE(test_retry_round_unlinks),
};

UT_MAIN("kv_kmove", cases, NULL, NULL)
