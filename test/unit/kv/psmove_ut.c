/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/psmove.c: a subscriber's move between two lcores, stepped on this thread.
 * Lcores are simulated: the current one is a variable, cr_send() queues a message per
 * target (run when the test says), and each lcore's PUBLISH parts are delivered when the
 * test says, in each publishing lcore's order (as the per-pair FIFO path does). pubsub.c
 * and psmove.c are the real ones; what lies below (output, leases, timers) is stubbed:
 * a client's output is a buffer.
 *
 * The checks: the client's output holds, per publisher, exactly the messages published
 * since it subscribed, once each and in order, whatever the interleaving: the old lcore
 * behind the new one or ahead of it, the cut arriving before or after the old lcore
 * caught up, a refused move, the client closing meanwhile, the old lcore stopping, the
 * socket dropped on arrival; and a seeded stress over random interleavings.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pubsub.c"
#include "psmove.c"

#include "ut_cunit.h"

/* ---- the simulated lcores ---- */

#define NL 3 /* lcores 0 and 1 serve clients; 2 only publishes */

struct kv_global kv;
static struct kv_shard shards[NL];
static unsigned cur;
static bool stopped[NL];

unsigned
cr_lcore_id(void)
{
	return cur;
}

struct msg {
	void (*fn)(void *);
	void *arg;
};
static struct msg mbox[NL][256];
static unsigned mb_head[NL], mb_tail[NL];
static bool mbox_full[NL];

_Thread_local struct cr__outbox *cr__send_out; /* NULL: every send is cr__send()'s */

int
cr__send(unsigned target, cr_msg_fn fn, void *arg)
{
	if (stopped[target])
		return -ESHUTDOWN;
	if (mbox_full[target])
		return -EAGAIN;
	mbox[target][mb_tail[target]++ % 256] = (struct msg){fn, arg};
	return 0;
}

/* Run lcore @p id's messages; how many. */
static unsigned
run_mbox(unsigned id)
{
	unsigned n = 0, was = cur;

	cur = id;
	while (mb_head[id] != mb_tail[id]) {
		struct msg m = mbox[id][mb_head[id]++ % 256];

		m.fn(m.arg);
		n++;
	}
	cur = was;
	return n;
}

/* Timers: armed or not; fired by the test. */
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
}
bool
cr_timer_stop(struct cr_timer *t)
{
	bool was = cr_timer_armed(t);

	t->pprev = NULL;
	return was;
}
static void
fire(struct cr_timer *t, unsigned on)
{
	unsigned was = cur;

	CU_ASSERT_FATAL(cr_timer_armed(t));
	t->pprev = NULL;
	cur = on;
	t->fn(t, t->arg);
	cur = was;
}

/* Leases as lib/lease keeps them: a release of one not held does nothing (-EALREADY),
 * and is counted: pub/sub never releases its lease twice. */
static int leases_held, lease_double_releases;
int
cr_lease_acquire(struct cr_lease *l)
{
	if (atomic_load(&l->self) == l)
		return -EBUSY;
	atomic_store(&l->self, l);
	leases_held++;
	return 0;
}
int
cr_lease_release(struct cr_lease *l)
{
	if (atomic_load(&l->self) != l) {
		lease_double_releases++;
		return -EALREADY;
	}
	atomic_store(&l->self, NULL);
	leases_held--;
	return 0;
}
bool
cr_lease_active(const struct cr_lease *l)
{
	return atomic_load(&l->self) == l;
}
struct cr__tel_row cr__tel_rows[CR_MAX_LCORES];
static uint64_t now_ns; /* the lcores' clock, moved by the test */
uint64_t
cr_now_ns(void)
{
	return now_ns;
}
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
const char *
cr_strerror(int e)
{
	(void)e;
	return "error";
}

/* The client's output, and what cr-kv does around it. */
static struct rbuf out[8];
static unsigned nkc;
static struct kconn kcs[8];

bool
kc_send(struct kconn *kc, const char *p, size_t n)
{
	rb_raw(&out[kc - kcs], p, n);
	return true;
}
struct rbuf *
kc_local_out(struct kconn *kc)
{
	return &out[kc - kcs];
}
void
kc_abort(struct kconn *kc)
{
	kc->conn = NULL;
}
void
kc_maybe_free(struct kconn *kc)
{
	(void)kc;
}
/* A client's parsing: resumed as cr-kv's kv_unblock() does, at once; or from the loop
 * (kv_unblock_later()), run when the test says. Never while a PUBLISH part runs: that is
 * inside another client's input pass, whose replies wait in the lcore's batch. */
static bool in_publish;
static unsigned resumed, resume_in_publish;
static struct kconn *deferred[8];
static unsigned ndeferred;
static void
resume(struct kconn *kc)
{
	(void)kc;
	resumed++;
	if (in_publish)
		resume_in_publish++;
}
void
kv_unblock(struct kconn *kc)
{
	if (--kc->blocked == 0 && kc->conn != NULL && !kc->in_input)
		kc->resume(kc);
}
void
kv_unblock_later(struct kconn *kc)
{
	if (--kc->blocked == 0 && kc->conn != NULL)
		deferred[ndeferred++] = kc;
}
static void
run_deferred(void)
{
	unsigned i;

	for (i = 0; i < ndeferred; i++)
		if (deferred[i]->blocked == 0 && deferred[i]->conn != NULL)
			deferred[i]->resume(deferred[i]);
	ndeferred = 0;
}
void
cr_conn_close(struct cr_conn *c)
{
	(void)c;
}
uint64_t
kv_hash(const void *key, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ ((const unsigned char *)key)[i]) * 1099511628211ull;
	return h;
}
bool
kv_stringmatch(const char *pat, size_t plen, const char *s, size_t slen, bool nocase)
{
	(void)nocase; /* "prefix*" only */
	return plen > 0 && pat[plen - 1] == '*' && slen >= plen - 1 &&
	       memcmp(pat, s, plen - 1) == 0;
}
const char kv_err_oom[] = "OOM";
void
cmd_ping(struct kv_ctx *x)
{
	(void)x;
}
void
cmd_quit(struct kv_ctx *x)
{
	(void)x;
}
void
cmd_reset(struct kv_ctx *x)
{
	(void)x;
}
struct kreq *
kreq_new(struct kv_shard *sh, struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc,
	 const struct kv_arg *argv)
{
	(void)sh, (void)kc, (void)cmd, (void)argc, (void)argv;
	return NULL; /* a RESP3 publisher's own message: not met here */
}
void
kv_reply_help(struct kv_ctx *x, const char *const *l)
{
	(void)x, (void)l;
}
size_t
kv_array_begin(struct rbuf *o)
{
	(void)o;
	return 0;
}
void
kv_array_end(struct rbuf *o, size_t at, long long n)
{
	(void)o, (void)at, (void)n;
}
void
rd_init(struct rd *r, const struct rbuf *b)
{
	(void)r, (void)b;
}
long long
rd_array(struct rd *r)
{
	(void)r;
	return 0;
}
long long
rd_int(struct rd *r)
{
	(void)r;
	return 0;
}
bool
rd_bulk(struct rd *r, const char **p, size_t *n)
{
	(void)r, (void)p, (void)n;
	return false;
}

/* ---- the world ---- */

/* A PUBLISH of publisher lcore @p from, number @p seq, as run on lcore @p on. */
static void
publish_on(unsigned on, unsigned from, uint64_t seq, const char *ch)
{
	char msg[32];
	struct kv_arg argv[3];
	struct rbuf o;
	struct kv_ctx x = {.sh = &shards[on], .argc = 3, .argv = argv, .out = &o};
	unsigned was = cur;

	snprintf(msg, sizeof(msg), "%u:%llu", from, (unsigned long long)seq);
	argv[0] = (struct kv_arg){"publish", 7};
	argv[1] = (struct kv_arg){ch, strlen(ch)};
	argv[2] = (struct kv_arg){msg, strlen(msg)};
	rb_init(&o, NULL, 0);
	cur = on;
	kv_ps_tag(from, seq);
	in_publish = true;
	cmd_publish(&x);
	in_publish = false;
	cur = was;
	rb_fini(&o);
}

/* Per publisher lcore, the messages published (numbered 1..) and how far each serving
 * lcore has delivered them. */
static uint64_t published[NL];
static uint64_t delivered[NL][NL]; /* [on][from] */

static void
publish(unsigned from)
{
	unsigned was = cur;

	cur = from;
	published[from] = kv_ps_next_seq();
	cur = was;
}

/* Lcore @p on delivers @p n more of @p from's messages (as many as are published). */
static void
deliver_some(unsigned on, unsigned from, unsigned n)
{
	while (n-- > 0 && delivered[on][from] < published[from])
		publish_on(on, from, ++delivered[on][from], "ch");
}

static void
world_start(void)
{
	unsigned i;

	memset(&kv, 0, sizeof(kv));
	memset(shards, 0, sizeof(shards));
	memset(stopped, 0, sizeof(stopped));
	memset(mbox_full, 0, sizeof(mbox_full));
	memset(mb_head, 0, sizeof(mb_head));
	memset(mb_tail, 0, sizeof(mb_tail));
	memset(published, 0, sizeof(published));
	memset(delivered, 0, sizeof(delivered));
	memset(ps_seq, 0, sizeof(ps_seq));
	leases_held = lease_double_releases = 0;
	now_ns = 0;
	resumed = resume_in_publish = ndeferred = 0;
	for (i = 0; i < NL; i++) {
		cur = i;
		shards[i].lcore = i;
		kv.shards[i] = &shards[i];
		CU_ASSERT_FATAL(kv_ps_init(&shards[i]) == 0);
	}
	memset(kcs, 0, sizeof(kcs));
	for (i = 0; i < 8; i++)
		rb_init(&out[i], NULL, 0);
	nkc = 0;
	cur = 0;
}

static void
world_stop(void)
{
	unsigned i;

	for (i = 0; i < nkc; i++) {
		cur = kcs[i].sh->lcore;
		kv_ps_gone(&kcs[i]);
		if (kcs[i].conn != NULL)
			kv_ps_client(kcs[i].sh, -1); /* kc_gone() */
	}
	for (i = 0; i < NL; i++) {
		cur = i;
		kv_ps_fini(&shards[i]);
	}
	CU_ASSERT_EQUAL(leases_held, 0);
	CU_ASSERT_EQUAL(lease_double_releases, 0);
	for (i = 0; i < 8; i++)
		rb_fini(&out[i]);
}

/* A client connects to lcore @p on (kconn_new()). */
static void
connect_on(struct kconn *kc, unsigned on)
{
	kc->sh = &shards[on];
	kc->conn = (struct cr_conn *)kc; /* any non-NULL handle */
	kc->resume = resume;
	cur = on;
	kv_ps_client(kc->sh, 1);
}

/* A client of lcore @p on subscribed to "ch" (its first subscribe reply dropped). */
static struct kconn *
client_on(unsigned on)
{
	struct kconn *kc = &kcs[nkc++];

	connect_on(kc, on);
	CU_ASSERT_FATAL(kv_ps_add(kc, "ch", 2, false) == 0);
	return kc;
}

/* The move of @p kc from its lcore to @p to, as lib/net makes it (on_move_out, then
 * on_move_in there). */
static void
move_out(struct kconn *kc)
{
	cur = kc->sh->lcore;
	CU_ASSERT_FATAL(kv_ps_move_out(kc) == 0);
	kc->move_from = cur;
	kv_ps_client(kc->sh, -1);
}
static void
move_in(struct kconn *kc, unsigned to)
{
	cur = to;
	kc->sh = &shards[to];
	kv_ps_client(kc->sh, 1);
	kv_ps_move_in(kc);
}

/*
 * What @p kc received, checked: per publisher, numbers first..last with none missing or
 * repeated, in order. @return how many; *first[from] the first number (0: none).
 */
static unsigned
check_stream(struct kconn *kc, uint64_t first[NL], uint64_t last[NL])
{
	const struct rbuf *b = &out[kc - kcs];
	const char *p = b->p, *end = b->p + b->len;
	uint64_t next[NL] = {0};
	unsigned n = 0, i;

	for (i = 0; i < NL; i++)
		first[i] = last[i] = 0;
	while (p < end) {
		/* *3 $7 message $2 ch $N from:seq */
		const char *m = strstr(p, "message\r\n$2\r\nch\r\n$");
		unsigned from;
		unsigned long long seq;

		CU_ASSERT_FATAL(m != NULL);
		m = strchr(m + 18, '\n') + 1;
		CU_ASSERT_FATAL(sscanf(m, "%u:%llu", &from, &seq) == 2);
		if (next[from] == 0)
			first[from] = seq;
		else
			CU_ASSERT_EQUAL(seq, next[from]); /* no gap, no repeat, in order */
		next[from] = seq + 1;
		last[from] = seq;
		p = strchr(m, '\n') + 1;
		n++;
	}
	return n;
}

/* ---- the cases ---- */

/* The old lcore is behind the new one: it forwards what the new one had delivered before
 * the client came, and the new one holds what comes after until then. */
static void
test_old_behind(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];
	unsigned i;

	world_start();
	kc = client_on(1);
	for (i = 0; i < 10; i++)
		publish(2);
	deliver_some(1, 2, 3); /* old lcore: 1..3 */
	deliver_some(0, 2, 6); /* new lcore: 1..6 */
	move_out(kc);
	move_in(kc, 0);
	CU_ASSERT(kc->psm != NULL && kc->blocked == 1);
	deliver_some(0, 2, 2);		 /* 7, 8: held */
	CU_ASSERT_EQUAL(run_mbox(1), 1); /* the cut (2:6): the old lcore is at 3 */
	CU_ASSERT(shards[1].ps->moves != NULL);
	deliver_some(1, 2, 2); /* 4, 5: forwarded */
	CU_ASSERT_EQUAL(run_mbox(0), 0);
	deliver_some(1, 2, 3); /* 6 forwarded, 7, 8 past the cut: dropped; done */
	CU_ASSERT(shards[1].ps->moves == NULL);
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	deliver_some(0, 2, 2); /* 9, 10 */
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 10);
	CU_ASSERT(first[2] == 1 && last[2] == 10);
	/* nothing of it is left on the old lcore */
	CU_ASSERT_EQUAL(shards[1].ps->nchan, 0);
	world_stop();
}

/* The same moves for a RESP3 client (HELLO 3): what it gets directly, what the old lcore
 * forwards and what the new one held are all push frames (">"), none an array. */
static void
test_resp3(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];
	const struct rbuf *b;
	unsigned i, push = 0;
	const char *p;

	world_start();
	kc = client_on(1);
	kc->resp = 3;
	for (i = 0; i < 10; i++)
		publish(2);
	deliver_some(1, 2, 3); /* directly: 1..3 */
	deliver_some(0, 2, 6);
	move_out(kc);
	move_in(kc, 0);
	deliver_some(0, 2, 2);		 /* held: 7, 8 */
	CU_ASSERT_EQUAL(run_mbox(1), 1); /* the cut */
	deliver_some(1, 2, 5);		 /* forwarded: 4..6 */
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT(kc->psm == NULL);
	deliver_some(0, 2, 2); /* 9, 10 */
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 10);
	b = &out[kc - kcs];
	for (p = b->p; p != NULL && p < b->p + b->len; p = memchr(p, '\n', b->len - (size_t)(p - b->p))) {
		if (*p == '\n')
			p++;
		if (p + 3 <= b->p + b->len && memcmp(p, ">3\r", 3) == 0)
			push++;
		CU_ASSERT(p + 3 > b->p + b->len || memcmp(p, "*3\r", 3) != 0);
	}
	CU_ASSERT_EQUAL(push, 10);
	world_stop();
}

/* The old lcore is ahead: what it forwarded past the cut is dropped when the cut comes,
 * the new lcore delivers those itself. */
static void
test_old_ahead(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];
	unsigned i;

	world_start();
	kc = client_on(1);
	for (i = 0; i < 10; i++)
		publish(2);
	deliver_some(1, 2, 5);
	deliver_some(0, 2, 2);
	move_out(kc);
	deliver_some(1, 2, 3);		 /* 6..8 kept before the cut is known */
	move_in(kc, 0);			 /* cut 2:2 */
	deliver_some(0, 2, 8);		 /* 3..10 held */
	CU_ASSERT_EQUAL(run_mbox(1), 1); /* trims 6..8; done at once */
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 10);
	CU_ASSERT(first[2] == 1 && last[2] == 10);
	world_stop();
}

/* Publishers on every lcore, the new lcore's own and the old one's included. */
static void
test_three_publishers(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];
	unsigned i, f;

	world_start();
	kc = client_on(1);
	for (i = 0; i < 6; i++)
		for (f = 0; f < NL; f++)
			publish(f);
	for (f = 0; f < NL; f++) {
		deliver_some(1, f, 1 + f);
		deliver_some(0, f, 3 - f);
	}
	move_out(kc);
	move_in(kc, 0);
	for (f = 0; f < NL; f++)
		deliver_some(0, f, 6);
	run_mbox(1);
	for (f = 0; f < NL; f++)
		deliver_some(1, f, 6);
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 18);
	for (f = 0; f < NL; f++)
		CU_ASSERT(first[f] == 1 && last[f] == 6);
	world_stop();
}

/* The send was refused: on_move_in runs back on the old lcore, which takes its stubs
 * back as the client's subscriptions. */
static void
test_refused(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];

	world_start();
	kc = client_on(1);
	publish(2);
	deliver_some(1, 2, 1);
	move_out(kc);
	move_in(kc, 1);
	CU_ASSERT(kc->psm == NULL && kc->ps != NULL && kc->blocked == 0);
	CU_ASSERT(shards[1].ps->moves == NULL);
	publish(2);
	deliver_some(1, 2, 1);
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 2);
	world_stop();
}

/* The client goes while it waits: the done message finds no one, and frees. */
static void
test_gone_meanwhile(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	publish(2);
	move_out(kc);
	move_in(kc, 0);
	deliver_some(0, 2, 1);
	cur = 0;
	kv_ps_gone(kc);
	kc->conn = NULL;
	CU_ASSERT(shards[0].ps->arrivals != NULL);
	run_mbox(1);
	deliver_some(1, 2, 1);
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT(shards[0].ps->arrivals == NULL && shards[1].ps->moves == NULL);
	nkc = 0;
	world_stop();
}

/* The old lcore stops before the cut reaches it: the new one completes with its hold. */
static void
test_old_stopped(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];

	world_start();
	kc = client_on(1);
	publish(2);
	deliver_some(1, 2, 1);
	move_out(kc);
	cur = 1;
	kv_ps_fini(&shards[1]);
	stopped[1] = true;
	move_in(kc, 0); /* the cut cannot be sent: nothing comes from the old lcore */
	CU_ASSERT(kc->psm != NULL && kc->psm->done_in);
	publish(2);
	deliver_some(0, 2, 2); /* 1 was delivered by the old lcore: dropped; 2 held */
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 2);
	CU_ASSERT(first[2] == 1 && last[2] == 2);
	cur = 1;
	CU_ASSERT_FATAL(kv_ps_init(&shards[1]) == 0);
	world_stop();
}

/* A full mailbox: the cut is sent again from the timer. */
static void
test_mailbox_full(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	move_out(kc);
	mbox_full[1] = true;
	move_in(kc, 0);
	CU_ASSERT(kc->psm != NULL && cr_timer_armed(&kc->psm->timer));
	mbox_full[1] = false;
	fire(&kc->psm->timer, 0);
	CU_ASSERT_EQUAL(run_mbox(1), 1);
	CU_ASSERT_EQUAL(run_mbox(0), 1);
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	world_stop();
}

/* The socket reached an lcore that could not take it: the stubs go. */
static void
test_dropped(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	move_out(kc);
	cur = 0;
	kv_ps_move_drop(kc);
	CU_ASSERT(shards[1].ps->moves != NULL);
	run_mbox(1);
	CU_ASSERT(shards[1].ps->moves == NULL && shards[1].ps->nchan == 0);
	run_mbox(0); /* the done message finds no arrival */
	nkc = 0;
	world_stop();
}

/* The lease: held from the start, let go once closing with nothing held. */
static void
test_lease(void)
{
	struct kconn *kc;

	world_start();
	CU_ASSERT_EQUAL(leases_held, NL);
	kc = client_on(1);
	cur = 1;
	kv_ps_closing(&shards[1]);
	CU_ASSERT_EQUAL(leases_held, NL); /* a subscriber */
	move_out(kc);
	move_in(kc, 0);
	CU_ASSERT_EQUAL(leases_held, NL); /* its stubs */
	run_mbox(1);
	CU_ASSERT_EQUAL(leases_held, NL - 1);
	run_mbox(0);
	world_stop();
}

/* Seeded random interleavings: three publishers, a client moving back and forth between
 * lcores 0 and 1 many times; it gets every message since it subscribed, once, in order. */
static void
test_stress(void)
{
	unsigned seed;

	for (seed = 1; seed <= 200; seed++) {
		struct kconn *kc;
		uint64_t first[NL], last[NL];
		unsigned step, f, moves = 0, total = 0, n;

		srand(seed);
		world_start();
		kc = client_on(1);
		for (step = 0; step < 400; step++) {
			unsigned r = (unsigned)rand() % 100;

			f = (unsigned)rand() % NL;
			if (r < 30) {
				publish(f);
			} else if (r < 60) {
				deliver_some(0, f, 1 + (unsigned)rand() % 3);
			} else if (r < 90) {
				deliver_some(1, f, 1 + (unsigned)rand() % 3);
			} else if (r < 95) {
				run_mbox((unsigned)rand() % 2);
			} else if (kc->psm == NULL && kc->ps_out == NULL) {
				unsigned to = kc->sh->lcore ^ 1;

				move_out(kc);
				move_in(kc, to);
				moves++;
			}
		}
		/* Everything published is delivered everywhere, every message run. */
		do {
			for (f = 0; f < NL; f++) {
				deliver_some(0, f, 1000);
				deliver_some(1, f, 1000);
			}
		} while (run_mbox(0) + run_mbox(1) != 0);
		CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
		n = check_stream(kc, first, last);
		for (f = 0; f < NL; f++) {
			CU_ASSERT(first[f] == 0 || last[f] == published[f]);
			if (first[f] != 0)
				total += (unsigned)(last[f] - first[f] + 1);
		}
		CU_ASSERT_EQUAL(n, total); /* exact: with check_stream's no gap, no repeat */
		CU_ASSERT(shards[0].ps->moves == NULL && shards[1].ps->moves == NULL);
		CU_ASSERT(moves > 0);
		world_stop();
	}
}

/* A client of a closing lcore subscribes (it was there before the closing began) and
 * then moves: its stubs keep the lcore's lease. (Before: the lease went when the closing
 * began with no subscriber, and the stubs held none: the lcore could stop before the
 * messages up to the cut came, and they were lost.) */
static void
test_lease_subscribe_after_closing(void)
{
	struct kconn *kc;

	world_start();
	kc = &kcs[nkc++];
	connect_on(kc, 1);
	kv_ps_closing(&shards[1]);
	CU_ASSERT_EQUAL(leases_held, NL); /* a client is there: it may subscribe */
	cur = 1;
	CU_ASSERT_FATAL(kv_ps_add(kc, "ch", 2, false) == 0); /* SUBSCRIBE, after */
	move_out(kc);
	move_in(kc, 0);
	CU_ASSERT(shards[1].ps->moves != NULL);
	CU_ASSERT_EQUAL(leases_held, NL); /* its stubs */
	run_mbox(1);
	CU_ASSERT(shards[1].ps->moves == NULL);
	CU_ASSERT_EQUAL(leases_held, NL - 1); /* nothing left there */
	run_mbox(0);
	CU_ASSERT(kc->psm == NULL);
	world_stop();
}

/* The done message meets a full mailbox: the stubs, and the lease, stay until it is
 * accepted. (Before: the lease went first, and only a timer was left, which does not keep
 * a retiring lcore: the forwarded messages could be lost.) */
static void
test_done_full_mailbox(void)
{
	struct kconn *kc;
	uint64_t first[NL], last[NL];

	world_start();
	kc = client_on(1);
	publish(2);
	deliver_some(1, 2, 1);
	cur = 1;
	kv_ps_closing(&shards[1]);
	move_out(kc);
	move_in(kc, 0);
	mbox_full[0] = true;
	run_mbox(1); /* the cut: the stubs finish, the done message is refused */
	CU_ASSERT_EQUAL(leases_held, NL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(shards[1].ps->moves);
	CU_ASSERT(cr_timer_armed(&shards[1].ps->moves->timer));
	fire(&shards[1].ps->moves->timer, 1); /* still full: again */
	CU_ASSERT_EQUAL(leases_held, NL);
	mbox_full[0] = false;
	fire(&shards[1].ps->moves->timer, 1);
	CU_ASSERT(shards[1].ps->moves == NULL);
	CU_ASSERT_EQUAL(leases_held, NL - 1);
	deliver_some(0, 2, 1);
	run_mbox(0);
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	CU_ASSERT_EQUAL(check_stream(kc, first, last), 1);
	world_stop();
}

/* A mailbox that stays full: the done message is given up at its deadline, and the
 * stubs with it (a retire waits a bounded time). */
static void
test_done_gives_up(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	cur = 1;
	kv_ps_closing(&shards[1]);
	move_out(kc);
	move_in(kc, 0);
	mbox_full[0] = true;
	run_mbox(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(shards[1].ps->moves);
	now_ns += PS_GIVE_UP_NS;
	fire(&shards[1].ps->moves->timer, 1);
	CU_ASSERT(shards[1].ps->moves == NULL);
	CU_ASSERT_EQUAL(leases_held, NL - 1);
	mbox_full[0] = false;
	world_stop();
}

/* The move was dropped where it arrived and the old lcore's mailbox was full: the word
 * that lets its stubs go is sent again until accepted. (Before: it was freed, and the
 * stubs held the retiring lcore's lease for good.) */
static void
test_bye_full_mailbox(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	cur = 1;
	kv_ps_closing(&shards[1]);
	move_out(kc);
	mbox_full[1] = true;
	cur = 0;
	kc->sh = &shards[0]; /* kv_conn_move_drop() */
	kv_ps_move_drop(kc);
	mbox_full[1] = false;
	CU_ASSERT_EQUAL(run_mbox(1), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(shards[0].ps->byes);
	fire(&shards[0].ps->byes->timer, 0);
	CU_ASSERT(shards[0].ps->byes == NULL);
	CU_ASSERT_EQUAL(run_mbox(1), 1);
	CU_ASSERT(shards[1].ps->moves == NULL);
	CU_ASSERT_EQUAL(leases_held, NL - 1);
	run_mbox(0); /* the done message finds no arrival */
	nkc = 0;
	world_stop();
}

/* No word ever comes from where the client went (the word could not even be made): the
 * old lcore gives its stubs up in PS_STUBS_GIVE_UP_NS, and its lease with them. */
static void
test_stubs_give_up(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	cur = 1;
	kv_ps_closing(&shards[1]);
	move_out(kc);
	CU_ASSERT_PTR_NOT_NULL_FATAL(shards[1].ps->moves);
	CU_ASSERT_EQUAL(leases_held, NL);
	now_ns += PS_STUBS_GIVE_UP_NS;
	fire(&shards[1].ps->moves->timer, 1);
	CU_ASSERT(shards[1].ps->moves == NULL && shards[1].ps->nchan == 0);
	CU_ASSERT_EQUAL(leases_held, NL - 1);
	free(kc->ps_out);
	kc->ps_out = NULL;
	nkc = 0;
	world_stop();
}

/* The cut meets a mailbox that stays full: sent again until PS_GIVE_UP_NS after the
 * arrival, then the client goes on (logged). (Before: sent again for ever.) */
static void
test_cut_gives_up(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	move_out(kc);
	mbox_full[1] = true;
	move_in(kc, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kc->psm);
	fire(&kc->psm->timer, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kc->psm); /* still full: again */
	CU_ASSERT(kc->psm->cut_msg != NULL && cr_timer_armed(&kc->psm->timer));
	now_ns += PS_GIVE_UP_NS;
	fire(&kc->psm->timer, 0);
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	mbox_full[1] = false;
	now_ns += PS_STUBS_GIVE_UP_NS;
	fire(&shards[1].ps->moves->timer, 1); /* and the old lcore's stubs in theirs */
	CU_ASSERT(shards[1].ps->moves == NULL);
	world_stop();
}

/* The new lcore stops while its cut waits to be sent again: it is sent once more, and the
 * old lcore's stubs finish. (Before: it was freed, and the stubs stayed.) */
static void
test_fini_sends_cut(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	move_out(kc);
	mbox_full[1] = true;
	move_in(kc, 0);
	mbox_full[1] = false;
	cur = 0;
	kv_ps_gone(kc);
	kv_ps_client(kc->sh, -1);
	kc->conn = NULL;
	kv_ps_fini(&shards[0]);
	stopped[0] = true;
	CU_ASSERT_EQUAL(run_mbox(1), 1);
	CU_ASSERT(shards[1].ps->moves == NULL);
	stopped[0] = false;
	cur = 0;
	CU_ASSERT_FATAL(kv_ps_init(&shards[0]) == 0);
	nkc = 0;
	world_stop();
}

/* The moved client's parsing resumes from the loop, not inside the PUBLISH part that let
 * it go on: that part runs in another client's input pass, whose replies wait in the
 * lcore's batch and would be sent to this client. (Before: resumed at once, in it.) */
static void
test_resume_deferred(void)
{
	struct kconn *kc;

	world_start();
	kc = client_on(1);
	publish(2);
	deliver_some(1, 2, 1); /* the old lcore is ahead: the new one must catch up */
	move_out(kc);
	move_in(kc, 0);
	run_mbox(1);
	CU_ASSERT_EQUAL(run_mbox(0), 1); /* the done message: still behind */
	CU_ASSERT_PTR_NOT_NULL(kc->psm);
	deliver_some(0, 2, 1); /* catches up inside a PUBLISH part */
	CU_ASSERT(kc->psm == NULL && kc->blocked == 0);
	CU_ASSERT_EQUAL(resume_in_publish, 0);
	run_deferred();
	CU_ASSERT_EQUAL(resumed, 1);
	world_stop();
}

static const struct ut_case cases[] = {
    UT_CASE(test_old_behind),
    UT_CASE(test_old_ahead),
    UT_CASE(test_three_publishers),
    UT_CASE(test_refused),
    UT_CASE(test_gone_meanwhile),
    UT_CASE(test_old_stopped),
    UT_CASE(test_mailbox_full),
    UT_CASE(test_dropped),
    UT_CASE(test_lease),
    UT_CASE(test_stress),
    UT_CASE(test_resp3),
    UT_CASE(test_lease_subscribe_after_closing),
    UT_CASE(test_done_full_mailbox),
    UT_CASE(test_done_gives_up),
    UT_CASE(test_bye_full_mailbox),
    UT_CASE(test_stubs_give_up),
    UT_CASE(test_cut_gives_up),
    UT_CASE(test_fini_sends_cut),
    UT_CASE(test_resume_deferred),
};

UT_MAIN("kv_psmove", cases, NULL, NULL)
