/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Client connections: the query buffer, parsing, routing each command to the shard that
 * owns its keys, and replies written in request order (see kv.h for the model).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>
#include <time.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"

struct kv_global kv;

CR_LOG_COMPONENT(kv_log, "app.kv")

/* Requests a connection may have in flight before it stops reading. */
#define KC_MAX_QUEUED 1024u
/* A query buffer is shrunk back when it is idle and this big. */
#define QBUF_INITIAL 4096u
#define QBUF_SHRINK  (64u * 1024)

static void process_input(struct kconn *kc);
static void flush_fifo(struct kconn *kc);

int64_t
kv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
kv_used_memory(void)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; i < kv.nshards; i++)
		t += kv_store_used(kv.shards[kv.shard_lcore[i]]->store);
	return t;
}

/* ---- requests ---- */

struct kreq *
kreq_new(struct kv_shard *sh, struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc,
	 const struct kv_arg *argv)
{
	size_t size = sizeof(struct kreq) + argc * sizeof(struct kv_arg), i;
	struct kreq *kr;
	char *d;

	for (i = 0; i < argc; i++)
		size += argv[i].len + 1;
	if (size <= KREQ_SMALL && sh->free_reqs != NULL) {
		kr = sh->free_reqs;
		sh->free_reqs = kr->next;
		sh->nfree--;
		size = KREQ_SMALL;
	} else {
		size = size <= KREQ_SMALL ? KREQ_SMALL : size;
		kr = malloc(size);
		if (kr == NULL)
			return NULL;
	}
	memset(kr, 0, sizeof(*kr));
	kr->size = size;
	kr->kc = kc;
	kr->cmd = cmd;
	kr->parts = &kr->one;
	kr->one.kr = kr;
	rb_init(&kr->one.out, kr->one.inl, sizeof(kr->one.inl));
	rb_init(&kr->reply, NULL, 0);
	kr->argc = argc;
	kr->argv = (struct kv_arg *)kr->data;
	d = kr->data + argc * sizeof(struct kv_arg);
	for (i = 0; i < argc; i++) {
		memcpy(d, argv[i].p, argv[i].len);
		d[argv[i].len] = '\0';
		kr->argv[i].p = d;
		kr->argv[i].len = argv[i].len;
		d += argv[i].len + 1;
	}
	return kr;
}

static void
kreq_free(struct kv_shard *sh, struct kreq *kr)
{
	uint32_t i;

	rb_fini(&kr->one.out);
	rb_fini(&kr->reply);
	if (kr->parts != &kr->one) {
		for (i = 0; i < kr->nparts; i++)
			rb_fini(&kr->parts[i].out);
		free(kr->parts);
	}
	free(kr->argpool);
	free(kr->state);
	if (kr->size == KREQ_SMALL && sh->nfree < 4096) {
		kr->next = sh->free_reqs;
		sh->free_reqs = kr;
		sh->nfree++;
	} else {
		free(kr);
	}
}

int
kreq_set_parts(struct kreq *kr, uint32_t n)
{
	uint32_t i;

	if (kr->parts != &kr->one) {
		for (i = 0; i < kr->nparts; i++)
			rb_fini(&kr->parts[i].out);
		free(kr->parts);
	} else {
		rb_fini(&kr->one.out);
	}
	if (n <= 1) {
		kr->parts = &kr->one;
		memset(&kr->one, 0, sizeof(kr->one));
	} else {
		kr->parts = calloc(n, sizeof(*kr->parts));
		if (kr->parts == NULL) {
			kr->parts = &kr->one;
			n = 1;
			memset(&kr->one, 0, sizeof(kr->one));
			kr->nparts = 0;
			return -ENOMEM;
		}
	}
	for (i = 0; i < n; i++) {
		kr->parts[i].kr = kr;
		kr->parts[i].fn = kr->cmd != NULL ? kr->cmd->fn : NULL;
		rb_init(&kr->parts[i].out, kr->parts[i].inl, sizeof(kr->parts[i].inl));
	}
	kr->nparts = n;
	kr->sent = 0;
	kr->left = n;
	return 0;
}

void
kreq_part_args(struct kpart *p, uint32_t argc, struct kv_arg *argv)
{
	p->argc = argc;
	p->argv = argv;
}

static void
enqueue(struct kconn *kc, struct kreq *kr)
{
	kr->next = NULL;
	if (kc->tail != NULL)
		kc->tail->next = kr;
	else
		kc->head = kr;
	kc->tail = kr;
	kc->queued++;
}

static void
run_part(struct kpart *p, struct kv_shard *sh)
{
	struct kv_ctx x = {
	    .sh = sh,
	    .argc = p->argc,
	    .argv = p->argv,
	    .out = &p->out,
	    .now_ms = kv_now_ms(),
	};

	p->fn(&x);
}

/*
 * Remote parts travel in batches: a part for another shard is queued on this lcore's
 * out-queue for that shard, and the queue goes as one cr_call() (struct kbatch) at the
 * end of the input being parsed, or at the end of the turn for parts queued by
 * completions. One message then carries a pipeline's worth of parts, and the owner
 * prefetches all their keys before running them. The queue is FIFO per target, so one
 * client's parts still reach each shard in the order issued. A full mailbox (-EAGAIN)
 * leaves the queue as it is, to go with the next attempt (next turn).
 */
struct kbatch {
	struct cr_call call;
	struct kbatch *next_free;
	struct kpart *head;
	unsigned n;
};

#define BATCH_MAX 256u

/* On the shard's lcore: prefetch every part's first key, then run them in order. */
static void
batch_run(void *arg)
{
	struct kbatch *b = arg;
	struct kv_shard *sh = kv_here();
	struct kpart *p;

	for (p = b->head; p != NULL; p = p->next_out)
		if (p->argc >= 2)
			kv_prefetch_bucket(sh->store, kv_hash(p->argv[1].p, p->argv[1].len));
	for (p = b->head; p != NULL; p = p->next_out)
		run_part(p, sh);
}

static void kreq_complete(struct kreq *kr);
static void schedule_flush(struct kconn *kc);

static void
part_answered(struct kpart *p)
{
	struct kreq *kr = p->kr;

	if (--kr->left == 0 && kr->sent == kr->nparts)
		kreq_complete(kr); /* may free kr, and p with it */
}

static void
batch_put(struct kv_shard *sh, struct kbatch *b)
{
	b->next_free = sh->free_batches;
	sh->free_batches = b;
}

/* Back on the client's lcore: each part is answered, in order. */
static void
batch_done(void *arg)
{
	struct kbatch *b = arg;
	struct kv_shard *sh = kv_here();
	struct kpart *p = b->head, *next;

	batch_put(sh, b);
	for (; p != NULL; p = next) {
		next = p->next_out;
		part_answered(p);
	}
}

static void outq_task(void *arg);

static void
outq_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	outq_task(arg);
}

/* Send the out-queues at the end of this turn (or, if the defer queue is full, in a
 * tick). */
static void
outq_arm(struct kv_shard *sh)
{
	if (sh->outq_armed)
		return;
	sh->outq_armed = true;
	if (cr_defer(outq_task, sh) != 0)
		cr_timer_start(&sh->outq_timer, 1);
}

static void
outq_send(struct kv_shard *sh, unsigned t)
{
	struct kbatch *b = sh->free_batches;
	struct kpart *p, *next;
	int rc;

	if (b != NULL) {
		sh->free_batches = b->next_free;
	} else {
		b = malloc(sizeof(*b));
		if (b == NULL) {
			outq_arm(sh); /* try again later */
			return;
		}
	}
	b->head = sh->outq_head[t];
	b->n = sh->outq_n[t];
	rc = cr_call(kv.shard_lcore[t], &b->call, batch_run, b, batch_done, b);
	if (rc == -EAGAIN) {
		batch_put(sh, b);
		outq_arm(sh);
		return;
	}
	sh->outq_head[t] = NULL;
	sh->outq_tail[t] = &sh->outq_head[t];
	sh->outq_n[t] = 0;
	if (rc == 0) {
		cr_telemetry_add(kv.tel_remote, b->n);
		return;
	}
	/* The shard's lcore is gone (retired, or stopping): every part fails. */
	batch_put(sh, b);
	for (p = b->head; p != NULL; p = next) {
		next = p->next_out;
		rb_reset(&p->out);
		rb_errorf(&p->out, "ERR the shard of this key is unavailable (%s)",
			  cr_strerror(rc));
		part_answered(p);
	}
}

static void
outq_flush(struct kv_shard *sh)
{
	unsigned t;

	for (t = 0; t < kv.nshards; t++)
		if (sh->outq_head[t] != NULL)
			outq_send(sh, t);
}

static void
outq_task(void *arg)
{
	struct kv_shard *sh = arg;

	sh->outq_armed = false;
	cr_timer_stop(&sh->outq_timer);
	outq_flush(sh);
}

static void
outq_push(struct kv_shard *sh, struct kpart *p)
{
	unsigned t = p->shard;

	p->next_out = NULL;
	*sh->outq_tail[t] = p;
	sh->outq_tail[t] = &p->next_out;
	if (++sh->outq_n[t] >= BATCH_MAX)
		outq_send(sh, t);
}

void
kv_unblock(struct kconn *kc)
{
	if (--kc->blocked == 0 && kc->conn != NULL && !kc->in_input)
		process_input(kc);
}

void
kreq_launch(struct kreq *kr)
{
	struct kconn *kc = kr->kc;
	struct kv_shard *sh = kc->sh;

	while (kr->sent < kr->nparts) {
		struct kpart *p = &kr->parts[kr->sent++];

		if (p->shard == sh->index) {
			run_part(p, sh);
			kr->left--;
		} else {
			outq_push(sh, p);
		}
	}
	if (kr->left == 0)
		kreq_complete(kr); /* may free kr */
	else if (!kc->in_input)
		outq_arm(sh); /* process_input() sends what it queued itself */
}

static void
kreq_complete(struct kreq *kr)
{
	if (kr->cont != NULL) {
		kr->cont(kr);
		return;
	}
	if (kr->nparts == 1 && kr->cmd->merge == KV_MERGE_ONE) {
		kr->final = &kr->one.out;
	} else {
		kv_merge(kr, &kr->reply);
		kr->final = &kr->reply;
	}
	kreq_finish(kr);
}

void
kreq_finish(struct kreq *kr)
{
	struct kconn *kc = kr->kc;

	kr->done = true;
	if (kr->final == NULL)
		kr->final = &kr->reply;
	if (!kc->in_input)
		schedule_flush(kc);
}

/* ---- connections ---- */

static void
kconn_free(struct kconn *kc)
{
	resp_parser_fini(&kc->rp);
	free(kc->qbuf);
	free(kc->name);
	free(kc);
}

static void
maybe_free(struct kconn *kc)
{
	if (kc->conn == NULL && kc->head == NULL && !kc->in_input && !kc->flush_pending)
		kconn_free(kc);
}

static void
deferred_flush(void *arg)
{
	struct kconn *kc = arg;

	kc->flush_pending = false;
	flush_fifo(kc); /* may free kc */
}

/*
 * Replies completed by messages (other lcores answering) are sent once per turn per
 * connection, after the turn's messages have run: the deferred phase follows the mailbox
 * in a turn, so the answers of one burst leave in one send rather than one each.
 */
static void
schedule_flush(struct kconn *kc)
{
	if (kc->flush_pending)
		return;
	if (cr_defer(deferred_flush, kc) == 0)
		kc->flush_pending = true;
	else
		flush_fifo(kc);
}

/* The connection is gone (closed by the peer, by us, or destroyed). */
static void
conn_gone(struct kconn *kc)
{
	if (kc->conn == NULL)
		return;
	if (kc->close_hard)
		cr_timer_stop(&kc->kill_timer);
	cr_conn_set_data(kc->conn, NULL);
	kc->conn = NULL;
	if (kc->next != NULL)
		kc->next->pprev = kc->pprev;
	*kc->pprev = kc->next;
	/* relaxed: a count, read for admission and INFO */
	atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
}

static void
kc_abort(struct kconn *kc)
{
	struct cr_conn *c = kc->conn;

	conn_gone(kc);
	cr_conn_destroy(c);
	maybe_free(kc);
}

static bool
kc_send(struct kconn *kc, const char *p, size_t n)
{
	int rc;

	if (kc->conn == NULL || n == 0)
		return kc->conn != NULL;
	rc = cr_conn_send(kc->conn, p, n);
	if (rc == 0 || rc == -EPIPE)
		return true;
	/* -ENOBUFS: the lcore's output pool cannot hold this reply. */
	CR_LOG(kv_log, WARNING, "client %llu: reply of %zu bytes: %s; closing it",
	       (unsigned long long)kc->id, n, cr_strerror(rc));
	kc_abort(kc);
	return false;
}

static void
kill_fired(struct cr_timer *t, void *arg)
{
	struct kconn *kc = arg;

	(void)t;
	if (kc->conn != NULL)
		kc_abort(kc);
}

/*
 * After a protocol error: send the error, shut our side and stop reading, and reset the
 * connection shortly after, as redis closes such a client at once rather than reading
 * whatever else it sends (a NUL and then endless data must not keep it open).
 */
static void
close_hard(struct kconn *kc)
{
	if (cr_timer_armed(&kc->kill_timer))
		return;
	cr_conn_shutdown_write(kc->conn);
	if (!kc->read_stopped) {
		kc->read_stopped = true;
		cr_conn_read_stop(kc->conn);
	}
	cr_timer_init(&kc->kill_timer, kill_fired, kc);
	cr_timer_start(&kc->kill_timer, 100 * 1000 * 1000ull);
}

static void
flush_fifo(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;
	struct kreq *kr;

	while ((kr = kc->head) != NULL && kr->done) {
		if (kc->conn != NULL)
			kc_send(kc, kr->final->p, kr->final->len);
		kc->head = kr->next;
		if (kc->head == NULL)
			kc->tail = NULL;
		kc->queued--;
		kreq_free(sh, kr);
	}
	if (kc->conn == NULL) {
		maybe_free(kc);
		return;
	}
	if (kc->close_after && kc->head == NULL) {
		if (kc->close_hard)
			close_hard(kc);
		else
			cr_conn_close(kc->conn);
		return;
	}
	if (kc->read_stopped && kc->queued < KC_MAX_QUEUED / 4 && kc->blocked == 0) {
		kc->read_stopped = false;
		cr_conn_read_start(kc->conn);
	}
}

/* Where a reply made now on this lcore goes: the batch, or behind what is owed. */
static struct rbuf *
local_out(struct kconn *kc)
{
	struct kreq *t = kc->tail;

	if (t == NULL)
		return &kc->sh->batch;
	if (t->coalesce)
		return t->final;
	t = kreq_new(kc->sh, kc, NULL, 0, NULL);
	if (t == NULL)
		return NULL;
	t->coalesce = true;
	t->done = true;
	t->final = &t->one.out;
	enqueue(kc, t);
	return t->final;
}

static void
reply_local_error(struct kconn *kc, const char *s, size_t n)
{
	struct rbuf *o = local_out(kc);

	if (o != NULL)
		rb_errorlen(o, s, n);
}

static bool
is_http(const struct kv_arg *a)
{
	char c = (char)(a->p[0] | 0x20);

	if (c != 'h' && c != 'p')
		return false; /* the common case, without two strcasecmp() per command */
	return strcasecmp(a->p, "host:") == 0 || strcasecmp(a->p, "post") == 0;
}

static void
unknown_command(struct kconn *kc, const struct kv_arg *argv, uint32_t argc)
{
	char buf[512];
	size_t n, al = 0;
	uint32_t i;

	/* Redis: "'%.*s' " per argument while the list is under 128 bytes; %s stops at NUL. */
	char args[400];

	args[0] = '\0';
	for (i = 1; i < argc && al < 128; i++) {
		int w =
		    snprintf(args + al, sizeof(args) - al, "'%.*s' ", (int)(128 - al), argv[i].p);

		if (w > 0)
			al += (size_t)w < sizeof(args) - al ? (size_t)w : sizeof(args) - al - 1;
	}
	n = (size_t)snprintf(buf, sizeof(buf),
			     "ERR unknown command '%.128s', with args beginning with: %s",
			     argv[0].p, args);
	reply_local_error(kc, buf, n < sizeof(buf) ? n : sizeof(buf) - 1);
}

/* Which shard a KEY1 command goes to. */
unsigned
key_shard(const struct kv_arg *a)
{
	return kv.nshards == 1 ? 0 : kv_owner(kv_hash(a->p, a->len));
}

static void
run_here(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	x->out = local_out(kc);
	if (x->out == NULL) {
		kc_abort(kc);
		return;
	}
	cmd->fn(x);
}

/* One part per shard holding keys, each with argv[0] and its keys (and their values, for
 * MSET: @p step 2), in the order given. */
int
kreq_split_keys(struct kreq *kr, unsigned step)
{
	unsigned shard_of[CR_MAX_LCORES];
	uint32_t counts[CR_MAX_LCORES] = {0}, pos = 0, i, n = 0;
	struct kv_arg *pool;

	for (i = 1; i < kr->argc; i += step)
		counts[key_shard(&kr->argv[i])]++;
	for (i = 0; i < kv.nshards; i++)
		if (counts[i] != 0)
			shard_of[n++] = i;
	pool = malloc(sizeof(*pool) * (kr->argc + n));
	if (pool == NULL || kreq_set_parts(kr, n) != 0) {
		free(pool);
		return -ENOMEM;
	}
	free(kr->argpool);
	kr->argpool = pool;
	for (i = 0; i < n; i++) {
		struct kpart *p = &kr->parts[i];
		uint32_t k, j = 0;

		p->shard = shard_of[i];
		p->argv = pool + pos;
		p->argv[j++] = kr->argv[0];
		for (k = 1; k < kr->argc; k += step) {
			if (key_shard(&kr->argv[k]) != p->shard)
				continue;
			memcpy(&p->argv[j], &kr->argv[k], sizeof(*p->argv) * step);
			j += step;
		}
		p->argc = j;
		pos += j;
	}
	return 0;
}

/* A command whose keys live on more than one shard, or on another one. */
static void
dispatch_parts(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x, unsigned key1)
{
	struct kreq *kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	uint32_t i;

	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	enqueue(kc, kr);
	switch (cmd->route) {
	case KV_ROUTE_KEY1:
		kreq_set_parts(kr, 1);
		kr->one.shard = key1;
		kreq_part_args(&kr->one, kr->argc, kr->argv);
		break;
	case KV_ROUTE_ALL:
		if (kreq_set_parts(kr, kv.nshards) != 0)
			goto nomem;
		for (i = 0; i < kv.nshards; i++) {
			kr->parts[i].shard = i;
			kreq_part_args(&kr->parts[i], kr->argc, kr->argv);
		}
		break;
	case KV_ROUTE_KEYS:
		if (kreq_split_keys(kr, (unsigned)cmd->step) != 0)
			goto nomem;
		break;
	default:
		break;
	}
	kreq_launch(kr);
	return;
nomem:
	rb_error(&kr->reply, "OOM out of memory routing the command");
	kr->final = &kr->reply;
	kr->nparts = 0;
	kreq_finish(kr);
}

/* SCAN across shards: the shard in the cursor's low bits, from the shard cursor in its
 * high bits. A shard that finishes with fewer keys than COUNT hands on to the next shard
 * in the same call (so an empty keyspace answers cursor 0 at once, as redis does). */
struct scan_state {
	unsigned bits;
	long long count, n;
	bool blocked;
	char cursor[24];
};

static void
scan_cont(struct kreq *kr)
{
	struct scan_state *st = kr->state;
	struct rbuf *o = &kr->one.out;
	const char *p = o->p, *end = o->p + o->len, *body;
	unsigned shard = kr->one.shard;
	unsigned long long local;
	struct kconn *kc = kr->kc;
	bool was_blocked = st->blocked;
	char hdr[64];
	long long n;

	if (o->len == 0 || p[0] == '-') {
		rb_reset(&kr->reply);
		rb_raw(&kr->reply, o->p, o->len);
		goto done;
	}
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* "*2" */
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* "$len" */
	local = strtoull(p, NULL, 10);
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* the cursor */
	n = strtoll(p + 1, NULL, 10);
	body = memchr(p, '\n', (size_t)(end - p)) + 1; /* "*n" */
	rb_raw(&kr->reply, body, (size_t)(end - body));
	st->n += n;
	if (local == 0 && shard + 1 < kv.nshards && st->n < st->count) {
		kreq_set_parts(kr, 1);
		kr->one.shard = shard + 1;
		kr->argv[1].p = "0";
		kr->argv[1].len = 1;
		kreq_part_args(&kr->one, kr->argc, kr->argv);
		kr->cont = scan_cont;
		if (!st->blocked) {
			/* Later commands of this client wait: they must not overtake the scan. */
			st->blocked = true;
			kc->blocked++;
		}
		kreq_launch(kr);
		return;
	}
	{
		unsigned long long global = local != 0		     ? local << st->bits | shard
					    : shard + 1 < kv.nshards ? shard + 1
								     : 0;
		struct rbuf keys = kr->reply;
		int h;

		snprintf(st->cursor, sizeof(st->cursor), "%llu", global);
		h = snprintf(hdr, sizeof(hdr), "*2\r\n$%zu\r\n%s\r\n*%lld\r\n", strlen(st->cursor),
			     st->cursor, st->n);
		rb_init(&kr->reply, NULL, 0);
		rb_raw(&kr->reply, hdr, (size_t)h);
		rb_raw(&kr->reply, keys.p, keys.len);
		rb_fini(&keys);
	}
done:
	kr->cont = NULL;
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr */
	if (was_blocked)
		kv_unblock(kc);
}

static void
dispatch_scan(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	unsigned long long cursor;
	unsigned bits = 0, shard;
	struct kreq *kr;

	if (kv_parse_scan_cursor(&x->argv[1], &cursor) != 0) {
		reply_local_error(kc, "ERR invalid cursor", 18);
		return;
	}
	if (kv.nshards == 1) {
		run_here(kc, cmd, x);
		return;
	}
	while ((1u << bits) < kv.nshards)
		bits++;
	shard = (unsigned)(cursor & ((1u << bits) - 1));
	if (shard >= kv.nshards) {
		shard = 0;
		cursor = 0;
	}
	kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	if (kr != NULL)
		kr->state = calloc(1, sizeof(struct scan_state));
	if (kr == NULL || kr->state == NULL) {
		if (kr != NULL)
			kreq_free(kc->sh, kr);
		kc_abort(kc);
		return;
	}
	enqueue(kc, kr);
	{
		struct scan_state *st = kr->state;
		uint32_t i;

		st->bits = bits;
		st->count = 10;
		for (i = 2; i + 1 < x->argc; i++)
			if (strcasecmp(x->argv[i].p, "count") == 0)
				resp_string2ll(x->argv[i + 1].p, x->argv[i + 1].len, &st->count);
		kr->cont = scan_cont;
	}
	kreq_set_parts(kr, 1);
	kr->one.shard = shard;
	snprintf(kr->scratch, sizeof(kr->scratch), "%llu", cursor >> bits);
	kr->argv[1].p = kr->scratch;
	kr->argv[1].len = strlen(kr->scratch);
	kreq_part_args(&kr->one, kr->argc, kr->argv);
	kreq_launch(kr);
}

static bool
all_keys_here(const struct kv_cmd *cmd, const struct kv_ctx *x, unsigned here)
{
	uint32_t i;

	if (kv.nshards == 1)
		return true;
	if (cmd->route != KV_ROUTE_KEYS)
		return false;
	for (i = 1; i < x->argc; i += (uint32_t)cmd->step)
		if (key_shard(&x->argv[i]) != here)
			return false;
	return true;
}

static void
run_command(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;
	const struct kv_cmd *cmd;
	struct kv_ctx x;
	uint32_t i, argc = kc->rp.argc;
	char err[200];

	if (argc > sh->args_cap) {
		uint32_t cap = sh->args_cap;
		struct kv_arg *a;

		while (cap < argc)
			cap *= 2;
		a = realloc(sh->args, sizeof(*a) * cap);
		if (a == NULL) {
			kc_abort(kc);
			return;
		}
		sh->args = a;
		sh->args_cap = cap;
	}
	for (i = 0; i < argc; i++) {
		sh->args[i].p = kc->qbuf + kc->rp.argv[i].off;
		sh->args[i].len = kc->rp.argv[i].len;
	}
	memset(&x, 0, sizeof(x));
	x.sh = sh;
	x.argc = argc;
	x.argv = sh->args;
	x.now_ms = sh->now_ms; /* one clock read per batch of input */
	x.kc = kc;
	cr_telemetry_add(kv.tel_cmds, 1);
	if (is_http(&sh->args[0])) {
		/* HTTP sent to the RESP port (a cross-protocol attack): close, no reply. */
		CR_LOG(kv_log, WARNING, "client %llu sent '%s': HTTP on the RESP port; closing it",
		       (unsigned long long)kc->id, sh->args[0].p);
		kc_abort(kc);
		return;
	}
	cmd = kv_cmd_lookup(sh->args[0].p, sh->args[0].len);
	if (cmd != NULL && cmd->sub != NULL && argc >= 2) {
		const struct kv_cmd *sub = kv_cmd_sub_lookup(cmd, sh->args[1].p, sh->args[1].len);

		if (sub == NULL) {
			char up[32];
			size_t k;

			for (k = 0; cmd->name[k] != '\0' && k < sizeof(up) - 1; k++)
				up[k] = (char)(cmd->name[k] - 'a' + 'A');
			up[k] = '\0';
			i = (uint32_t)snprintf(err, sizeof(err),
					       "ERR unknown subcommand '%.128s'. Try %s HELP.",
					       sh->args[1].p, up);
			reply_local_error(kc, err, i < sizeof(err) ? i : sizeof(err) - 1);
			return;
		}
		cmd = sub;
	}
	if (cmd == NULL) {
		unknown_command(kc, sh->args, argc);
		return;
	}
	if ((cmd->arity > 0 && (uint32_t)cmd->arity != argc) ||
	    (cmd->arity < 0 && argc < (uint32_t)-cmd->arity)) {
		struct rbuf *o = local_out(kc);

		if (o != NULL)
			kv_reply_wrong_arity(o, cmd->name);
		return;
	}
	if ((cmd->flags & KV_DENYOOM) && kv.maxmemory != 0 && kv_used_memory() > kv.maxmemory) {
		reply_local_error(kc, "OOM command not allowed when used memory > 'maxmemory'.",
				  55);
		return;
	}
	if (cmd->precheck != NULL) {
		x.out = local_out(kc);
		if (x.out == NULL) {
			kc_abort(kc);
			return;
		}
		if (!cmd->precheck(&x))
			return;
	}
	switch (cmd->route) {
	case KV_ROUTE_LOCAL:
		run_here(kc, cmd, &x);
		return;
	case KV_ROUTE_KEY1: {
		unsigned s = key_shard(&sh->args[1]);

		if (s == sh->index)
			run_here(kc, cmd, &x);
		else
			dispatch_parts(kc, cmd, &x, s);
		return;
	}
	case KV_ROUTE_KEYS:
	case KV_ROUTE_ALL:
		if (cmd->merge != KV_MERGE_INFO && all_keys_here(cmd, &x, sh->index))
			run_here(kc, cmd, &x);
		else
			dispatch_parts(kc, cmd, &x, 0);
		return;
	case KV_ROUTE_SCAN:
		dispatch_scan(kc, cmd, &x);
		return;
	case KV_ROUTE_SPECIAL: {
		struct kreq *kr = kreq_new(sh, kc, cmd, argc, sh->args);

		if (kr == NULL) {
			kc_abort(kc);
			return;
		}
		enqueue(kc, kr);
		kv_special_dispatch(kr);
		return;
	}
	}
}

static void
protocol_error(struct kconn *kc, const char *err, size_t errlen)
{
	char buf[80];

	atomic_fetch_add_explicit(&kv.proto_errors, 1, memory_order_relaxed);
	cr_telemetry_add(kv.tel_proto, 1);
	if (err == NULL) {
		reply_local_error(kc, "OOM out of memory parsing the request", 37);
	} else {
		memcpy(buf, "ERR ", 4);
		if (errlen > sizeof(buf) - 4)
			errlen = sizeof(buf) - 4;
		memcpy(buf + 4, err, errlen);
		reply_local_error(kc, buf, errlen + 4);
	}
	kc->close_after = true;
	kc->close_hard = true;
}

/* Drop the consumed part of the query buffer. */
static void
compact(struct kconn *kc)
{
	size_t keep = resp_parser_keep(&kc->rp, kc->qpos);

	if (keep == 0)
		return;
	if (keep < kc->qlen)
		memmove(kc->qbuf, kc->qbuf + keep, kc->qlen - keep);
	kc->qlen -= keep;
	kc->qpos -= keep;
	resp_parser_shift(&kc->rp, keep);
	if (kc->qlen == 0 && kc->qcap > QBUF_SHRINK) {
		char *n = realloc(kc->qbuf, QBUF_INITIAL + 1);

		if (n != NULL) {
			kc->qbuf = n;
			kc->qcap = QBUF_INITIAL;
		}
	}
}

static void
send_batch(struct kconn *kc)
{
	struct rbuf *b = &kc->sh->batch;

	if (b->len > 0) {
		kc_send(kc, b->p, b->len);
		b->len = 0;
	}
	if (b->cap > 1024 * 1024) {
		/* A huge reply went out: give the memory back. */
		rb_fini(b);
		rb_init(b, NULL, 0);
	}
}

static void
stop_reading_if_needed(struct kconn *kc)
{
	if (kc->conn != NULL && !kc->read_stopped &&
	    (kc->queued >= KC_MAX_QUEUED || (kc->blocked != 0 && kc->qlen > QBUF_SHRINK))) {
		kc->read_stopped = true;
		cr_conn_read_stop(kc->conn);
	}
}

/* Read "<c><digits>\r\n" at *p: the number, or -1. */
static long long
scan_len(const char **p, const char *end, char c)
{
	const char *q = *p;
	long long n = 0;

	if (q >= end || *q != c)
		return -1;
	for (q++; q < end && *q >= '0' && *q <= '9'; q++)
		n = n * 10 + (*q - '0');
	if (q + 1 >= end || q[0] != '\r' || n > (1 << 20))
		return -1;
	*p = q + 2;
	return n;
}

#define PREFETCH_MAX 32

/*
 * Pipelined requests are memory-bound: each looks its key up in a table far bigger than
 * the caches. Before running a batch, walk the complete multibulk requests in the
 * buffer (without parsing them: a light scan of the lengths), and prefetch the bucket of
 * each local key, then the first entry of each, so that the cache misses of the batch
 * overlap instead of coming one after another.
 */
static void
prefetch_batch(struct kconn *kc)
{
	const char *p = kc->qbuf + kc->qpos, *end = kc->qbuf + kc->qlen;
	struct kv_store *st = kc->sh->store;
	uint64_t hs[PREFETCH_MAX];
	unsigned n = 0, i;

	if (kc->rp.reqtype != 0)
		return; /* in the middle of a request */
	while (n < PREFETCH_MAX && p < end) {
		long long argc = scan_len(&p, end, '*'), j, len;
		const char *key = NULL;
		size_t klen = 0;

		if (argc < 2)
			break;
		for (j = 0; j < argc; j++) {
			len = scan_len(&p, end, '$');
			if (len < 0 || end - p < len + 2)
				goto done;
			if (j == 1) {
				key = p;
				klen = (size_t)len;
			}
			p += len + 2;
		}
		hs[n] = kv_hash(key, klen);
		if (kv.nshards == 1 || kv_owner(hs[n]) == kc->sh->index)
			kv_prefetch_bucket(st, hs[n++]);
	}
done:
	if (n < 2)
		return;
	for (i = 0; i < n; i++)
		kv_prefetch_entry(st, hs[i]);
}

static void
process_input(struct kconn *kc)
{
	kc->in_input = true;
	kc->sh->now_ms = kv_now_ms();
	prefetch_batch(kc);
	while (kc->conn != NULL && kc->blocked == 0 && !kc->close_after) {
		const char *err;
		enum resp_result r;

		r = resp_parse(&kc->rp, kc->qbuf, kc->qlen, &kc->qpos, &err);
		if (r == RESP_NEED_MORE)
			break;
		if (r == RESP_ERROR) {
			protocol_error(kc, err, kc->rp.errlen);
			break;
		}
		run_command(kc);
	}
	if (kc->conn != NULL) {
		compact(kc);
		send_batch(kc);
		stop_reading_if_needed(kc);
	} else {
		kc->sh->batch.len = 0;
	}
	outq_flush(kc->sh); /* the parts this input queued for other shards, in one go */
	kc->in_input = false;
	flush_fifo(kc); /* may free kc */
}

static bool
qbuf_append(struct kconn *kc, const void *data, size_t len)
{
	if (kc->qlen + len > kc->qcap) {
		size_t cap = kc->qcap;
		char *n;

		while (cap < kc->qlen + len)
			cap = cap < (1u << 30) ? cap * 2 : cap + cap / 4;
		n = realloc(kc->qbuf, cap + 1);
		if (n == NULL)
			return false;
		kc->qbuf = n;
		kc->qcap = cap;
	}
	memcpy(kc->qbuf + kc->qlen, data, len);
	kc->qlen += len;
	return true;
}

static void
conn_data(struct cr_conn *c, const void *data, size_t len)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL)
		return;
	if (!qbuf_append(kc, data, len)) {
		kc_abort(kc);
		return;
	}
	if (kc->qlen > kv.qbuf_limit) {
		atomic_fetch_add_explicit(&kv.qbuf_closed, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_qbuf, 1);
		CR_LOG(kv_log, WARNING,
		       "closing client %llu that reached max query buffer length (%zu bytes)",
		       (unsigned long long)kc->id, kc->qlen);
		kc_abort(kc);
		return;
	}
	/* process_input() may destroy the connection and free kc: touch neither after. */
	if (kc->blocked == 0 && !kc->close_after)
		process_input(kc);
	else
		stop_reading_if_needed(kc);
}

static void
conn_open(struct cr_conn *c)
{
	static const char maxerr[] = "-ERR max number of clients reached\r\n";
	struct kv_shard *sh = kv_here();
	struct kconn *kc;
	uint64_t n;

	atomic_fetch_add_explicit(&kv.conns_total, 1, memory_order_relaxed);
	/* relaxed: admission counts; an exact bound needs no ordering with anything else */
	n = atomic_fetch_add_explicit(&kv.nclients, 1, memory_order_relaxed) + 1;
	if (n > kv.maxclients) {
		atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&kv.rejected, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_rejected, 1);
		(void)cr_conn_send(c, maxerr, sizeof(maxerr) - 1);
		cr_conn_close(c);
		return;
	}
	kc = calloc(1, sizeof(*kc));
	if (kc != NULL) {
		kc->qbuf = malloc(QBUF_INITIAL + 1);
		kc->qcap = QBUF_INITIAL;
	}
	if (kc == NULL || kc->qbuf == NULL) {
		atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
		free(kc);
		cr_conn_destroy(c);
		return;
	}
	kc->conn = c;
	kc->sh = sh;
	kc->id = atomic_fetch_add_explicit(&kv.next_client_id, 1, memory_order_relaxed) + 1;
	resp_parser_init(&kc->rp, kv.max_bulk);
	kc->next = sh->conns;
	if (sh->conns != NULL)
		sh->conns->pprev = &kc->next;
	sh->conns = kc;
	kc->pprev = &sh->conns;
	cr_conn_set_data(c, kc);
}

static void
conn_close(struct cr_conn *c, int err)
{
	struct kconn *kc = cr_conn_data(c);

	(void)err;
	if (kc == NULL)
		return;
	conn_gone(kc);
	maybe_free(kc);
}

static void
conn_eof(struct cr_conn *c)
{
	/* Redis closes a client whose peer shut its side, replies owed or not. */
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL) {
		cr_conn_close(c);
		return;
	}
	if (kc->head == NULL) {
		cr_conn_close(c);
		return;
	}
	/* Replies are still owed: send them, then close. */
	kc->close_after = true;
}

const struct cr_conn_ops kv_conn_ops = {
    .on_open = conn_open,
    .on_data = conn_data,
    .on_eof = conn_eof,
    .on_close = conn_close,
};

/* ---- shards ---- */

static void
expire_tick(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;
	unsigned n = kv_store_expire_cycle(sh->store, kv_now_ms(), &sh->rng, 16);

	sh->expired_active += n;
	if (n > 0)
		cr_telemetry_add(kv.tel_expired, n);
	cr_timer_start(t, 100 * 1000 * 1000ull); /* Redis's hz 10 */
}

int
kv_shard_start(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];
	unsigned t;

	for (t = 0; t < CR_MAX_LCORES; t++)
		sh->outq_tail[t] = &sh->outq_head[t];
	cr_timer_init(&sh->outq_timer, outq_timer, sh);
	cr_timer_init(&sh->expire_timer, expire_tick, sh);
	cr_timer_start(&sh->expire_timer, 100 * 1000 * 1000ull);
	return 0;
}

void
kv_shard_stop(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];
	struct kconn *kc;

	cr_timer_stop(&sh->expire_timer);
	cr_timer_stop(&sh->outq_timer);
	/* Connections lib/net closed without on_close (the lcore stopped): free their
	 * state. Every call was answered before this hook runs. */
	while ((kc = sh->conns) != NULL) {
		struct kreq *kr;

		conn_gone(kc);
		while ((kr = kc->head) != NULL) {
			kc->head = kr->next;
			kreq_free(sh, kr);
		}
		kconn_free(kc);
	}
	while (sh->free_batches != NULL) {
		struct kbatch *b = sh->free_batches;

		sh->free_batches = b->next_free;
		free(b);
	}
	while (sh->free_reqs != NULL) {
		struct kreq *kr = sh->free_reqs;

		sh->free_reqs = kr->next;
		free(kr);
	}
	sh->nfree = 0;
}
