/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS connections moved between lcores (cr_conn_move(), tls_move.c) on real sockets, once
 * per io driver: a seeded stress with exact counts. N clients, each one TLS session
 * (half of them TLS 1.2, half 1.3), send a seeded stream of lines, one record a line,
 * each acked ("k MOVES\n") by the server; the server moves the connection to the other
 * lcore after each ack has gone out, until it has moved M times. The client sends the
 * ciphertext of each record in two halves: the second half of a line's record goes with
 * the first half of the next one, before the ack is awaited, so while the server moves a
 * connection half a record is on its way: taken before the cancel (the layer holds part
 * of a record: not at a boundary, the move is abandoned and retried), or left in the
 * socket, to be finished by the same SSL on the new lcore.
 *
 * What it shows: the session goes on (the client's one SSL decrypts every ack and the
 * server's SSL every record, whatever lcore it is on: no new handshake, and the server's
 * handshake count is exactly N), no byte is lost, repeated or reordered (SHA-256 of the
 * plaintext both sides), every connection moves exactly M times, and lib/net's counters
 * agree. The second case runs the same with a kTLS hand-over attempted on each connection
 * (forced where the kernel has none, which refuses it): moves race its steps.
 */
#include <stddef.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "cr_tls.h"
#include "tls_internal.h"
#include "ut_certs.h"
#include "ut_net.h"

#define NCONN	  8
#define MOVES	  20
#define MIN_LINES 30
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
	unsigned lcore;	  /* c's */
	unsigned aborted; /* moves abandoned (bytes came first), retried */
	char version[16]; /* the session's, as on_open saw it: the same after every move */
};

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	struct cr_tls_ctx *ctx;
	pthread_t client;
	bool client_started;
	_Atomic bool client_done;
	_Atomic unsigned opened, closed, moved_in, ok_conns, failures, aborted, same_session;
	uint64_t out0, in0, aborts0, hs0;
	struct ut_every every;
	unsigned seed;
} S;

static SSL_CTX *cli_ctx;

static uint64_t
handshakes(void)
{
	struct cr_tls_stats s;
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		if (cr_tls_stats(i, &s) == 0)
			sum += s.handshakes;
	return sum;
}

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

/* As net_move_sock_ut: a whole line, its ack held back: move; abandoned: ack, retry. */
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
	if (rc == -EBUSY) { /* an earlier ack still going out, or the layer mid-exchange */
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
	CU_ASSERT_FATAL(cr_tls_conn(c) && cr_tls_version(c) != NULL);
	snprintf(s->version, sizeof(s->version), "%s", cr_tls_version(c));
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
					 (unsigned long long)s->bytes, (unsigned long long)s->lines,
					 s->moves);

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

	cr_timer_stop(&s->t);
	return s;
}

static void
s_move_in(struct cr_conn *c, void *state)
{
	struct srv *s = state;

	CU_ASSERT_PTR_EQUAL(cr_conn_data(c), s);
	/* The layer's state is attached before the app hears of the connection. */
	CU_ASSERT(cr_tls_conn(c) && cr_tls_version(c) != NULL &&
		  strcmp(cr_tls_version(c), s->version) == 0);
	if (cr_conn_lcore(c) != s->lcore) {
		s->moves++;
		atomic_fetch_add(&S.moved_in, 1);
	}
	srv_arm(s, c);
	flush_acks(s);
}

static void
s_close(struct cr_conn *c, int err)
{
	struct srv *s = cr_conn_data(c);

	CU_ASSERT_EQUAL(err, 0);
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

/* ---- the client: OpenSSL over memory BIOs, so it chooses where a record is cut ---- */

struct cli {
	int fd;
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	EVP_MD_CTX *md;
	uint64_t bytes, lines;
	unsigned rng;
	unsigned moves;	  /* as the last ack said */
	uint8_t rec[512]; /* the current line's record, ciphertext */
	size_t rec_len, rec_sent;
	char plain[512]; /* decrypted, not yet read as lines */
	size_t plain_len;
};

static bool
send_all(int fd, const void *p, size_t n)
{
	return n == 0 || send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

/* What OpenSSL wrote, onto the socket. */
static bool
flush_out(struct cli *k)
{
	char *p;
	long n = BIO_get_mem_data(k->wbio, &p);
	bool ok = n <= 0 || send_all(k->fd, p, (size_t)n);

	(void)BIO_reset(k->wbio);
	return ok;
}

/* Ciphertext from the socket into the read BIO. */
static bool
feed(struct cli *k)
{
	uint8_t buf[4096];
	ssize_t r = recv(k->fd, buf, sizeof(buf), 0);

	return r > 0 && BIO_write(k->rbio, buf, (int)r) == (int)r;
}

static bool
handshake(struct cli *k, bool tls12)
{
	int r, i;

	k->ssl = SSL_new(cli_ctx);
	k->rbio = BIO_new(BIO_s_mem());
	k->wbio = BIO_new(BIO_s_mem());
	if (k->ssl == NULL || k->rbio == NULL || k->wbio == NULL)
		return false;
	BIO_set_mem_eof_return(k->rbio, -1);
	SSL_set_bio(k->ssl, k->rbio, k->wbio);
	SSL_set_connect_state(k->ssl);
	SSL_set_tlsext_host_name(k->ssl, "localhost");
	SSL_set1_host(k->ssl, "localhost");
	if (tls12)
		SSL_set_max_proto_version(k->ssl, TLS1_2_VERSION);
	for (i = 0; i < 100; i++) {
		r = SSL_do_handshake(k->ssl);
		if (!flush_out(k))
			return false;
		if (r == 1)
			return true;
		if (SSL_get_error(k->ssl, r) != SSL_ERROR_WANT_READ || !feed(k))
			return false;
	}
	return false;
}

/* One line of plaintext from the session (a TLS 1.3 ticket is read along the way). */
static bool
read_line(struct cli *k, char *out, size_t cap)
{
	for (int i = 0; i < 1000; i++) {
		char *nl = memchr(k->plain, '\n', k->plain_len);
		size_t got;
		int r;

		if (nl != NULL) {
			size_t n = (size_t)(nl - k->plain) + 1;

			if (n >= cap)
				return false;
			memcpy(out, k->plain, n);
			out[n] = '\0';
			memmove(k->plain, k->plain + n, k->plain_len - n);
			k->plain_len -= n;
			return true;
		}
		r = SSL_read_ex(k->ssl, k->plain + k->plain_len,
				sizeof(k->plain) - k->plain_len - 1, &got);
		if (r == 1) {
			k->plain_len += got;
			continue;
		}
		if (SSL_get_error(k->ssl, r) != SSL_ERROR_WANT_READ || !flush_out(k) || !feed(k))
			return false;
	}
	return false;
}

/* The next line of @p k's stream as one record, none of it sent yet. */
static bool
next_record(struct cli *k, const char *fixed)
{
	char line[256];
	unsigned len, j;
	size_t w;
	char *p;
	long n;

	if (fixed != NULL) {
		len = (unsigned)strlen(fixed);
		memcpy(line, fixed, len);
	} else {
		len = 1 + rand_r(&k->rng) % 200;
		for (j = 0; j < len; j++)
			line[j] = (char)('a' + rand_r(&k->rng) % 26);
		line[len++] = '\n';
		EVP_DigestUpdate(k->md, line, len);
		k->bytes += len;
		k->lines++;
	}
	if (SSL_write_ex(k->ssl, line, len, &w) != 1 || w != len)
		return false;
	n = BIO_get_mem_data(k->wbio, &p);
	if (n <= 0 || (size_t)n > sizeof(k->rec))
		return false;
	memcpy(k->rec, p, (size_t)n);
	(void)BIO_reset(k->wbio);
	k->rec_len = (size_t)n;
	k->rec_sent = 0;
	return true;
}

/* Send the rest of the current record, then half of the next one's; await the ack. */
static bool
step(struct cli *k, bool last)
{
	char reply[64];

	if (!send_all(k->fd, k->rec + k->rec_sent, k->rec_len - k->rec_sent))
		return false;
	if (!last) {
		if (!next_record(k, NULL))
			return false;
		k->rec_sent = k->rec_len / 2; /* inside the record's body: never whole */
		if (!send_all(k->fd, k->rec, k->rec_sent))
			return false;
	}
	return read_line(k, reply, sizeof(reply)) && sscanf(reply, "k %u", &k->moves) == 1;
}

static bool
finish(struct cli *k, unsigned i)
{
	char reply[256], hex[65], want[65];
	unsigned long long b, l;
	unsigned char dig[32];
	unsigned m, dl, j;

	if (!step(k, true) || !next_record(k, "END\n") || !send_all(k->fd, k->rec, k->rec_len) ||
	    !read_line(k, reply, sizeof(reply)) ||
	    sscanf(reply, "%llu %llu %u %64s", &b, &l, &m, hex) != 4)
		return false;
	EVP_DigestFinal_ex(k->md, dig, &dl);
	for (j = 0; j < 32; j++)
		snprintf(want + 2 * j, 3, "%02x", dig[j]);
	if (b != k->bytes || l != k->lines || strcmp(hex, want) != 0 || m != MOVES) {
		fprintf(stderr,
			"conn %u: server %llu bytes %llu lines %u moves %s, client %llu %llu %s\n",
			i, b, l, m, hex, (unsigned long long)k->bytes, (unsigned long long)k->lines,
			want);
		return false;
	}
	/* close_notify both ways, through the SSL the session began with. */
	(void)SSL_shutdown(k->ssl);
	if (!flush_out(k))
		return false;
	for (j = 0; j < 100; j++) {
		uint8_t c;
		int r = SSL_read(k->ssl, &c, 1);

		if (r <= 0 && SSL_get_error(k->ssl, r) == SSL_ERROR_ZERO_RETURN)
			return true;
		if (r > 0 || !feed(k))
			return false;
	}
	return false;
}

static void *
client(void *arg)
{
	struct cli cl[NCONN];
	unsigned i, round, done = 0;

	(void)arg;
	memset(cl, 0, sizeof(cl));
	for (i = 0; i < NCONN; i++)
		cl[i].fd = -1;
	for (i = 0; i < NCONN; i++) {
		cl[i].fd = ut_connect(&S.addr, 0);
		cl[i].md = EVP_MD_CTX_new();
		cl[i].rng = S.seed * 7919u + i;
		if (cl[i].fd < 0 || cl[i].md == NULL || !handshake(&cl[i], i % 2 == 1))
			goto fail;
		EVP_DigestInit_ex(cl[i].md, EVP_sha256(), NULL);
		if (!next_record(&cl[i], NULL))
			goto fail;
	}
	for (round = 0; round < MAX_LINES && done < NCONN; round++) {
		for (i = 0; i < NCONN; i++) {
			struct cli *k = &cl[i];

			if (k->fd < 0)
				continue;
			if (k->lines >= MIN_LINES && k->moves == MOVES) {
				if (!finish(k, i))
					goto fail;
				if (!SSL_session_reused(k->ssl) && SSL_is_init_finished(k->ssl))
					atomic_fetch_add(&S.same_session, 1);
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
	ERR_print_errors_fp(stderr);
	atomic_fetch_add(&S.failures, 1);
out:
	for (i = 0; i < NCONN; i++) {
		if (cl[i].fd >= 0)
			close(cl[i].fd);
		SSL_free(cl[i].ssl);
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
	cr_tls_conn_opts(&o.conn, S.ctx);
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &srv_ops, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	S.out0 = UT_STAT(moved_out);
	S.in0 = UT_STAT(moved_in);
	S.aborts0 = UT_STAT(move_aborts);
	S.hs0 = handshakes();
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, client, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, check_done, NULL);
}

static void
run_stress(bool ktls)
{
	const char *seed = getenv("CR_UT_SEED");
	struct cr_tls_cert cert = {ut_cert, ut_key};
	struct cr_tls_config cfg = {.certs = &cert, .n_certs = 1};
	char err[256];

	if (ut_table.n < 2) {
		fprintf(stderr, "needs 2 lcores: skipped\n");
		exit(77);
	}
	memset(&S, 0, sizeof(S));
	S.seed = seed != NULL ? (unsigned)strtoul(seed, NULL, 0) : 1;
	cr__tls_ktls_try_anyway = ktls;
	S.ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(S.ctx);
	ut_net_run(start, NULL, 60000);
	if (S.client_started)
		pthread_join(S.client, NULL);
	cr__tls_ktls_try_anyway = false;
	fprintf(stderr,
		"seed %u%s: %u TLS sessions, %u moves each; %u moves abandoned (retried), "
		"lib/net counts %llu; handshakes %llu\n",
		S.seed, ktls ? " (kTLS tried)" : "", NCONN, MOVES, atomic_load(&S.aborted),
		(unsigned long long)(UT_STAT(move_aborts) - S.aborts0),
		(unsigned long long)(handshakes() - S.hs0));
	CU_ASSERT_EQUAL(atomic_load(&S.failures), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.ok_conns), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.same_session), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.opened), NCONN);
	CU_ASSERT_EQUAL(atomic_load(&S.closed), NCONN);
	CU_ASSERT_EQUAL(handshakes() - S.hs0, NCONN); /* one each: none after a move */
	CU_ASSERT_EQUAL(atomic_load(&S.moved_in), NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(moved_out) - S.out0, NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(moved_in) - S.in0, NCONN * MOVES);
	CU_ASSERT_EQUAL(UT_STAT(move_aborts) - S.aborts0, atomic_load(&S.aborted));
	CU_ASSERT_EQUAL(UT_STAT(move_drops), 0);
	cr_tls_ctx_free(S.ctx);
}

static void
test_move_stress(void)
{
	run_stress(false);
}

static void
test_move_stress_ktls_tried(void)
{
	run_stress(true);
}

static int
suite_init(void)
{
	if (ut_rt_setup() != 0 || ut_certs_make("tls_move_ut") != 0)
		return 1;
	cli_ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(cli_ctx, ut_ca, NULL);
	SSL_CTX_set_verify(cli_ctx, SSL_VERIFY_PEER, NULL);
	return 0;
}

static int
suite_fini(void)
{
	SSL_CTX_free(cli_ctx);
	return ut_tmpdir_remove();
}

static const struct ut_case cases[] = {
    {"seeded: 8 TLS sessions x 20 moves, records cut across moves, SHA-256, exact counts",
     test_move_stress},
    {"the same while a kTLS hand-over is tried (the kernel refuses it)",
     test_move_stress_ktls_tried},
};

UT_MAIN("tls_move", cases, suite_init, suite_fini)
