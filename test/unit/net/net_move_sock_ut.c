/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_conn_move() on real sockets, once per io driver: a seeded stress with exact counts.
 * N client connections each send a seeded stream of lines, one at a time, each acked
 * ("k MOVES\n") by the server; the server moves every connection to the other lcore after each
 * ack has gone out, until it has moved M times, so the client's next line races the move
 * (it arrives while the old receive is cancelled, or before, or in the socket between
 * the two lcores). The server's state (a SHA-256 over every byte received, the byte and
 * line counts, the moves done) travels with each move; at "END\n" it answers them, and
 * the client compares with its own SHA-256 of what it sent: no byte lost, repeated or
 * reordered. Every connection moves exactly M times; lib/net's counters agree.
 */
#include <stddef.h>
#include <openssl/evp.h>

#include "ut_net.h"

#define NCONN 8
#define MOVES 25
#define MIN_LINES 40
#define MAX_LINES 2000 /* bound: a connection whose moves keep being abandoned fails */

struct srv {
	EVP_MD_CTX *md;
	uint64_t bytes, lines;
	unsigned moves;
	bool mid_line;	   /* a line partly received: not at a boundary */
	bool move_pending; /* acks held back until the move is done or abandoned */
	bool move_started; /* cr_conn_move() returned 0 */
	unsigned acks;	   /* held back */
	bool ended;
	struct cr_timer t; /* on the connection's lcore: re-initialised after each move */
	struct cr_conn *c;
	unsigned lcore; /* c's */
	unsigned aborted; /* moves abandoned (bytes came first), retried */
};

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	bool client_started;
	_Atomic bool client_done;
	_Atomic unsigned opened, closed, moved_in, ok_conns, failures, aborted;
	uint64_t out0, in0, aborts0;
	struct ut_every every;
	unsigned seed;
} S;

static void try_move(struct cr_timer *t, void *arg);

static unsigned
other_lcore(void)
{
	unsigned id;

	CR_LCORE_FOREACH(id)
	if (id != cr_lcore_id())
		return id;
	return CR_LCORE_NONE;
}

static void
srv_arm(struct srv *s, struct cr_conn *c)
{
	s->c = c;
	s->lcore = cr_conn_lcore(c);
	cr_timer_init(&s->t, try_move, s);
	cr_conn_set_data(c, s);
}

/* The acks held back while a move was wanted, with the moves done so far. */
static void
flush_acks(struct srv *s)
{
	char ack[16];

	s->move_pending = s->move_started = false;
	while (s->acks > 0) {
		int n = snprintf(ack, sizeof(ack), "k %u\n", s->moves);

		CU_ASSERT_EQUAL(cr_conn_send(s->c, ack, (size_t)n), 0);
		s->acks--;
	}
}

/*
 * A line is whole and its ack held back: move. A move under way is looked at again; one
 * no longer under way on this lcore was abandoned (a finished one stops this timer in
 * s_move_out): the acks go, and the next line tries again.
 */
static void
try_move(struct cr_timer *t, void *arg)
{
	struct srv *s = arg;
	int rc;

	(void)t;
	if (!s->move_pending)
		return;
	if (cr_conn_moving(s->c)) {
		cr_timer_start(&s->t, 200 * 1000);
		return;
	}
	if (s->move_started) {
		s->aborted++;
		flush_acks(s);
		return;
	}
	rc = cr_conn_move(s->c, other_lcore());
	if (rc == -EBUSY) { /* an earlier ack still going out */
		cr_timer_start(&s->t, 100 * 1000);
		return;
	}
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0) {
		flush_acks(s);
		return;
	}
	s->move_started = true;
	cr_timer_start(&s->t, 200 * 1000);
}

static void
s_open(struct cr_conn *c)
{
	struct srv *s = calloc(1, sizeof(*s));

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	s->md = EVP_MD_CTX_new();
	CU_ASSERT_FATAL(s->md != NULL && EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) == 1);
	srv_arm(s, c);
	atomic_fetch_add(&S.opened, 1);
}

static void
s_data(struct cr_conn *c, const void *data, size_t len)
{
	struct srv *s = cr_conn_data(c);
	const char *p = data;
	size_t i, start = 0;

	for (i = 0; i < len; i++) {
		if (p[i] != '\n')
			continue;
		if (!s->mid_line && i - start == 3 && memcmp(p + start, "END", 3) == 0) {
			unsigned char dig[32];
			unsigned dl;
			char out[160];
			int n = snprintf(out, sizeof(out), "%llu %llu %u ",
					 (unsigned long long)s->bytes,
					 (unsigned long long)s->lines, s->moves);

			EVP_DigestFinal_ex(s->md, dig, &dl);
			for (unsigned k = 0; k < 32; k++)
				n += snprintf(out + n, sizeof(out) - n, "%02x", dig[k]);
			out[n++] = '\n';
			s->ended = true;
			CU_ASSERT_EQUAL(cr_conn_send(c, out, (size_t)n), 0);
			return;
		}
		EVP_DigestUpdate(s->md, p + start, i + 1 - start);
		s->bytes += i + 1 - start;
		s->lines++;
		s->mid_line = false;
		start = i + 1;
		s->acks++;
		if (!s->move_pending && s->moves < MOVES) {
			s->move_pending = true;
			cr_timer_start(&s->t, 0);
		} else if (!s->move_pending) {
			flush_acks(s);
		}
	}
	if (start < len) {
		EVP_DigestUpdate(s->md, p + start, len - start);
		s->bytes += len - start;
		s->mid_line = true;
	}
}

static bool
s_boundary(struct cr_conn *c)
{
	struct srv *s = cr_conn_data(c);

	return s == NULL || (!s->mid_line && !s->ended);
}

static void *
s_move_out(struct cr_conn *c)
{
	struct srv *s = cr_conn_data(c);

	cr_timer_stop(&s->t); /* this lcore's wheel; the new one arms its own */
	return s;
}

static void
s_move_in(struct cr_conn *c, void *state)
{
	struct srv *s = state;

	CU_ASSERT_PTR_EQUAL(cr_conn_data(c), s);
	if (cr_conn_lcore(c) != s->lcore) { /* a real move, not one given back */
		s->moves++;
		atomic_fetch_add(&S.moved_in, 1);
	}
	srv_arm(s, c);
	flush_acks(s); /* the receive is armed after this: the next line is in the socket */
}

static void
s_close(struct cr_conn *c, int err)
{
	struct srv *s = cr_conn_data(c);

	(void)err;
	cr_timer_stop(&s->t);
	atomic_fetch_add(&S.aborted, s->aborted);
	EVP_MD_CTX_free(s->md);
	free(s);
	atomic_fetch_add(&S.closed, 1);
}

static void
s_drop(void *arg, void *state)
{
	(void)arg;
	(void)state;
	CU_FAIL("a moved connection was dropped");
}

static const struct cr_conn_ops srv_ops = {
    .on_open = s_open,
    .on_data = s_data,
    .on_close = s_close,
    .at_boundary = s_boundary,
    .on_move_out = s_move_out,
    .on_move_in = s_move_in,
    .on_move_drop = s_drop,
};

/*
 * One connection: each line is sent in two pieces, its second half together with the
 * first half of the next line, before its ack is awaited; so while the server moves the
 * connection (after the whole line), half a line is on its way: delivered before the
 * cancel (the server is mid-line, the move is abandoned and retried), or left in the
 * socket for the new lcore. At the end: the last line whole, END, the server's counts and
 * digest against ours.
 */
struct cli {
	int fd;
	EVP_MD_CTX *md;
	uint64_t bytes, lines;
	unsigned rng;
	unsigned moves; /* as the last ack said */
	char cur[256];
	size_t cur_len, cur_sent;
};

static bool
read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		ssize_t r = recv(fd, buf + n, 1, 0);

		if (r <= 0)
			return false;
		if (buf[n++] == '\n') {
			buf[n] = '\0';
			return true;
		}
	}
	return false;
}

static bool
send_all(int fd, const char *p, size_t n)
{
	return n == 0 || send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

/* The next line of @p k's stream, none of it sent yet; counted in the client's digest. */
static void
next_line(struct cli *k)
{
	unsigned len = 1 + rand_r(&k->rng) % 200, j;

	for (j = 0; j < len; j++)
		k->cur[j] = (char)('a' + rand_r(&k->rng) % 26);
	k->cur[len++] = '\n';
	k->cur_len = len;
	k->cur_sent = 0;
	EVP_DigestUpdate(k->md, k->cur, len);
	k->bytes += len;
	k->lines++;
}

/* Send the rest of the current line, then half of the next one; await the ack. */
static bool
step(struct cli *k, bool last)
{
	char reply[64];
	size_t half;

	if (!send_all(k->fd, k->cur + k->cur_sent, k->cur_len - k->cur_sent))
		return false;
	if (!last) {
		next_line(k);
		half = (k->cur_len - 1) / 2; /* never the newline */
		if (!send_all(k->fd, k->cur, half))
			return false;
		k->cur_sent = half;
	}
	return read_line(k->fd, reply, sizeof(reply)) && sscanf(reply, "k %u", &k->moves) == 1;
}

static bool
finish(struct cli *k, unsigned i)
{
	char reply[256], hex[65], want[65];
	unsigned long long b, l;
	unsigned char dig[32];
	unsigned m, dl, j;

	if (!step(k, true) || !send_all(k->fd, "END\n", 4) ||
	    !read_line(k->fd, reply, sizeof(reply)) ||
	    sscanf(reply, "%llu %llu %u %64s", &b, &l, &m, hex) != 4)
		return false;
	EVP_DigestFinal_ex(k->md, dig, &dl);
	for (j = 0; j < 32; j++)
		snprintf(want + 2 * j, 3, "%02x", dig[j]);
	if (b != k->bytes || l != k->lines || strcmp(hex, want) != 0 || m != MOVES) {
		fprintf(stderr, "conn %u: server %llu bytes %llu lines %u moves %s, client %llu %llu %s\n",
			i, b, l, m, hex, (unsigned long long)k->bytes,
			(unsigned long long)k->lines, want);
		return false;
	}
	return true;
}

static void *
client(void *arg)
{
	struct cli cl[NCONN];
	unsigned i, round, done = 0;

	(void)arg;
	for (i = 0; i < NCONN; i++) {
		cl[i] = (struct cli){.fd = ut_connect(&S.addr, 0), .md = EVP_MD_CTX_new(),
				     .rng = S.seed * 7919u + i};
		if (cl[i].fd < 0 || cl[i].md == NULL)
			goto fail;
		EVP_DigestInit_ex(cl[i].md, EVP_sha256(), NULL);
		next_line(&cl[i]);
	}
	for (round = 0; round < MAX_LINES && done < NCONN; round++) {
		for (i = 0; i < NCONN; i++) {
			struct cli *k = &cl[i];

			if (k->fd < 0)
				continue;
			if (k->lines >= MIN_LINES && k->moves == MOVES) {
				if (!finish(k, i))
					goto fail;
				close(k->fd);
				k->fd = -1;
				atomic_fetch_add(&S.ok_conns, 1);
				done++;
			} else if (!step(k, false)) {
				goto fail;
			}
		}
	}
	if (done != NCONN) {
		fprintf(stderr, "after %u rounds, %u of %u connections done; moves:", round, done,
			NCONN);
		for (i = 0; i < NCONN; i++)
			fprintf(stderr, " %u", cl[i].moves);
		fprintf(stderr, "\n");
		atomic_fetch_add(&S.failures, 1);
	}
	goto out;
fail:
	fprintf(stderr, "client: connection %u failed: %s\n", i, strerror(errno));
	atomic_fetch_add(&S.failures, 1);
out:
	for (i = 0; i < NCONN; i++) {
		if (cl[i].fd >= 0)
			close(cl[i].fd);
		EVP_MD_CTX_free(cl[i].md);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
check_done(void *arg)
{
	(void)arg;
	if (!atomic_load(&S.client_done) || atomic_load(&S.closed) < atomic_load(&S.opened))
		return false;
	cr_listener_close(S.l, NULL, NULL);
	cr_reactor_stop();
	return true;
}

static void
start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &srv_ops, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	S.out0 = UT_STAT(moved_out);
	S.in0 = UT_STAT(moved_in);
	S.aborts0 = UT_STAT(move_aborts);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, client, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, check_done, NULL);
}

static void
test_move_stress(void)
{
	const char *seed = getenv("CR_UT_SEED");

	if (ut_table.n < 2) {
		fprintf(stderr, "needs 2 lcores: skipped\n");
		exit(77);
	}
	S.seed = seed != NULL ? (unsigned)strtoul(seed, NULL, 0) : 1;
	ut_net_run(start, NULL, 60000);
	if (S.client_started)
		pthread_join(S.client, NULL);
	fprintf(stderr, "seed %u: %u connections, %u moves each; %u moves abandoned (retried), "
		"lib/net counts %llu\n", S.seed, NCONN, MOVES, atomic_load(&S.aborted),
		(unsigned long long)(UT_STAT(move_aborts) - S.aborts0));
	CU_ASSERT_EQUAL(atomic_load(&S.failures), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.ok_conns), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.opened), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.closed), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.moved_in), NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(moved_out) - S.out0, NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(moved_in) - S.in0, NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(move_aborts) - S.aborts0, atomic_load(&S.aborted));
	CU_ASSERT_EQUAL(UT_STAT(move_drops), 0);
}

static const struct ut_case cases[] = {
    {"seeded: 8 connections x 25 moves, SHA-256 of every stream, exact counts",
     test_move_stress},
};

UT_MAIN("net_move_sock", cases, ut_rt_setup, NULL)
