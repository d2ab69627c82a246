/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS connections (tls_conn.c) over real sockets on the real runtime, once per io driver:
 * an echo through the app's own callbacks and cr_conn_send() with close_notify both ways,
 * a ticket issued on one lcore resumed on another, a handshake that never comes (closed
 * after the handshake timeout, no app callback), garbage instead of a ClientHello (closed,
 * the server goes on serving), backpressure (the output queue, ciphertext, stays near
 * the high watermark while a client that reads slowly gets every byte), and a kTLS
 * hand-over tried where the kernel has none: it refuses, and 256 KiB still echo intact.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "cr_tls.h"
#include "tls_internal.h"
#include "ut_certs.h"
#include "ut_net.h"

#define BIG (4u << 20)

struct sc {
	struct cr_listener *l;
	struct cr_net_addr addr;
	struct cr_tls_ctx *ctx;
	pthread_t client;
	bool client_started;
	_Atomic int opens, closes, eofs, drains;
	_Atomic size_t max_queued;
	_Atomic bool client_done;
	void *(*client_fn)(void *);
	const struct cr_conn_ops *ops;
	struct cr_conn_opts copts;
	/* client results */
	int ok, clean_end, resumed_elsewhere, attempts, refused, served_after;
	size_t got;
};

static struct sc S;
static uint8_t payload[BIG];
static SSL_CTX *cli_ctx;

static uint64_t
tls_sum(size_t off)
{
	struct cr_tls_stats s;
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		if (cr_tls_stats(i, &s) == 0)
			sum += *(uint64_t *)((char *)&s + off);
	return sum;
}

#define TLS_STAT(f) tls_sum(offsetof(struct cr_tls_stats, f))

/* ---- server side ---- */

static void
on_open(struct cr_conn *c)
{
	(void)c;
	atomic_fetch_add(&S.opens, 1);
}

static void
on_data_echo(struct cr_conn *c, const void *d, size_t n)
{
	size_t q;

	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
	q = cr_conn_queued(c);
	if (q > atomic_load(&S.max_queued))
		atomic_store(&S.max_queued, q);
}

/* Answers "lcore resumed" to anything. */
static void
on_data_where(struct cr_conn *c, const void *d, size_t n)
{
	char line[32];
	int len = snprintf(line, sizeof(line), "%u %d\n", cr_conn_lcore(c), cr_tls_resumed(c));

	(void)d;
	(void)n;
	CU_ASSERT_EQUAL(cr_conn_send(c, line, (size_t)len), 0);
}

static void
on_drain(struct cr_conn *c)
{
	(void)c;
	atomic_fetch_add(&S.drains, 1);
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	(void)err;
	atomic_fetch_add(&S.closes, 1);
}

static bool (*sc_cond)(void);

static bool
sc_check(void *arg)
{
	(void)arg;
	if (!atomic_load(&S.client_done) || !sc_cond())
		return false;
	cr_reactor_stop();
	return true;
}

static struct ut_every every;

static void
sc_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	o.conn = S.copts;
	cr_tls_conn_opts(&o.conn, S.ctx);
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, S.ops, &S, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, S.client_fn, NULL), 0);
	S.client_started = true;
	ut_every(&every, 2, sc_check, NULL);
}

static struct cr_tls_ctx *
make_ctx(uint32_t handshake_ms)
{
	struct cr_tls_cert cert = {ut_cert, ut_key};
	struct cr_tls_config cfg = {.certs = &cert, .n_certs = 1,
				    .handshake_timeout_ms = handshake_ms};
	char err[256];
	struct cr_tls_ctx *ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));

	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

/* As sc_run(), with the accepted connections' options @p copts (watermarks). */
static void
sc_run_opts(const struct cr_conn_ops *ops, void *(*client)(void *), bool (*cond)(void),
	    uint32_t handshake_ms, const struct cr_conn_opts *copts)
{
	memset(&S, 0, sizeof(S));
	if (copts != NULL)
		S.copts = *copts;
	S.ctx = make_ctx(handshake_ms);
	S.ops = ops;
	S.client_fn = client;
	sc_cond = cond;
	ut_net_run(sc_start, NULL, 30000);
	if (S.client_started)
		pthread_join(S.client, NULL);
	cr_tls_ctx_free(S.ctx);
}

static void
sc_run(const struct cr_conn_ops *ops, void *(*client)(void *), bool (*cond)(void),
       uint32_t handshake_ms)
{
	sc_run_opts(ops, client, cond, handshake_ms, NULL);
}

static bool
all_closed(void)
{
	return atomic_load(&S.closes) == atomic_load(&S.opens) && UT_STAT(conns) == 0;
}

/* ---- client side: OpenSSL on blocking sockets ---- */

static SSL *
tls_connect(int fd, SSL_SESSION *sess)
{
	SSL *ssl = SSL_new(cli_ctx);

	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	if (sess != NULL)
		SSL_set_session(ssl, sess);
	if (SSL_connect(ssl) != 1) {
		ERR_clear_error();
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

static bool
ssl_read_n(SSL *ssl, uint8_t *buf, size_t n)
{
	size_t got = 0, k;

	while (got < n && SSL_read_ex(ssl, buf + got, n - got, &k) == 1)
		got += k;
	return got == n;
}

/* Our close_notify, then the server's: a clean end both ways. */
static bool
clean_end(SSL *ssl)
{
	uint8_t b;

	(void)SSL_shutdown(ssl);
	return SSL_read(ssl, &b, 1) == 0 && SSL_get_error(ssl, 0) == SSL_ERROR_ZERO_RETURN;
}

#define ECHO_CONNS 8
#define ECHO_BYTES 100000

static void *
client_echo(void *arg)
{
	static uint8_t back[ECHO_BYTES];
	int i, ok = 0, clean = 0;

	(void)arg;
	for (i = 0; i < ECHO_CONNS; i++) {
		int fd = ut_connect(&S.addr, 0);
		SSL *ssl = fd >= 0 ? tls_connect(fd, NULL) : NULL;

		if (ssl != NULL) {
			size_t w;

			memset(back, 0, sizeof(back));
			if (SSL_write_ex(ssl, payload + i, ECHO_BYTES, &w) == 1 &&
			    ssl_read_n(ssl, back, ECHO_BYTES) &&
			    memcmp(back, payload + i, ECHO_BYTES) == 0)
				ok++;
			clean += clean_end(ssl);
			SSL_free(ssl);
		}
		if (fd >= 0)
			close(fd);
	}
	S.ok = ok;
	S.clean_end = clean;
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_echo(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, on_drain, on_close};
	uint64_t hs = TLS_STAT(handshakes), cn = TLS_STAT(closes_notified);

	sc_run(&ops, client_echo, all_closed, 0);
	CU_ASSERT_EQUAL(S.ok, ECHO_CONNS);
	CU_ASSERT_EQUAL(S.clean_end, ECHO_CONNS);
	CU_ASSERT_EQUAL(atomic_load(&S.opens), ECHO_CONNS);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), ECHO_CONNS);
	CU_ASSERT_EQUAL(TLS_STAT(handshakes) - hs, ECHO_CONNS);
	CU_ASSERT_EQUAL(TLS_STAT(closes_notified) - cn, ECHO_CONNS);
}

/* ---- resumption across lcores ---- */

static bool
ask_where(SSL *ssl, unsigned *lcore, int *resumed)
{
	char line[32] = "";
	size_t k;

	if (SSL_write(ssl, "?", 1) != 1 || SSL_read_ex(ssl, line, sizeof(line) - 1, &k) != 1)
		return false;
	line[k] = '\0';
	return sscanf(line, "%u %d", lcore, resumed) == 2;
}

static void *
client_resume(void *arg)
{
	SSL_SESSION *sess = NULL;
	unsigned first = 0, lc;
	int resumed, i;

	(void)arg;
	for (i = 0; i < 64 && !S.resumed_elsewhere; i++) {
		int fd = ut_connect(&S.addr, 0);
		SSL *ssl = fd >= 0 ? tls_connect(fd, sess) : NULL;

		if (ssl != NULL && ask_where(ssl, &lc, &resumed)) {
			S.attempts++;
			if (sess == NULL) {
				first = lc;
				(void)clean_end(ssl);
				sess = SSL_get1_session(ssl); /* TLS 1.3: after the tickets came */
			} else {
				S.refused += !resumed;
				if (resumed && lc != first)
					S.resumed_elsewhere = 1;
				(void)clean_end(ssl);
			}
		}
		if (ssl != NULL)
			SSL_free(ssl);
		if (fd >= 0)
			close(fd);
	}
	SSL_SESSION_free(sess);
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_resume_other_lcore(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_where, NULL, NULL, on_close};

	if (ut_table.n < 2) {
		fprintf(stderr, "one lcore: nothing to resume across\n");
		return;
	}
	sc_run(&ops, client_resume, all_closed, 0);
	CU_ASSERT(S.attempts >= 2);
	CU_ASSERT_EQUAL(S.refused, 0);
	CU_ASSERT_EQUAL(S.resumed_elsewhere, 1);
}

/* A client that uses each ticket once, as RFC 8446 (C.4) asks and browsers, wrk and
 * s_client do: it keeps only what a new ticket brings (the new-session callback) and
 * offers it to the next connection. Each must resume, so the server gives a new ticket on
 * every resumption (before, none came: every other connection was a full handshake). */
static SSL_SESSION *chain_sess;

static int
chain_new_session(SSL *ssl, SSL_SESSION *sess)
{
	(void)ssl;
	SSL_SESSION_free(chain_sess);
	chain_sess = sess; /* ours: returning 1 keeps OpenSSL's reference for us */
	return 1;
}

static void *
client_resume_chain(void *arg)
{
	long mode = SSL_CTX_get_session_cache_mode(cli_ctx);
	unsigned lc;
	int resumed, i;

	(void)arg;
	SSL_CTX_set_session_cache_mode(cli_ctx, SSL_SESS_CACHE_CLIENT |
						SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(cli_ctx, chain_new_session);
	for (i = 0; i < 8; i++) {
		SSL_SESSION *offer = chain_sess;
		int fd = ut_connect(&S.addr, 0);
		SSL *ssl;

		chain_sess = NULL; /* used once */
		ssl = fd >= 0 ? tls_connect(fd, offer) : NULL;
		SSL_SESSION_free(offer);
		if (ssl != NULL && ask_where(ssl, &lc, &resumed)) {
			S.attempts++;
			S.refused += i > 0 && !resumed;
			(void)clean_end(ssl); /* TLS 1.3: the tickets came before the server's end */
		}
		if (ssl != NULL)
			SSL_free(ssl);
		if (fd >= 0)
			close(fd);
	}
	SSL_CTX_sess_set_new_cb(cli_ctx, NULL);
	SSL_CTX_set_session_cache_mode(cli_ctx, mode);
	SSL_SESSION_free(chain_sess);
	chain_sess = NULL;
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_resume_chain(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_where, NULL, NULL, on_close};

	sc_run(&ops, client_resume_chain, all_closed, 0);
	CU_ASSERT_EQUAL(S.attempts, 8);
	CU_ASSERT_EQUAL(S.refused, 0);
}

/* ---- a handshake that never comes, garbage ---- */

static void *
client_stall(void *arg)
{
	int fd = ut_connect(&S.addr, 0);
	uint8_t b[64];
	uint64_t t0 = ut_ms();
	ssize_t n;

	(void)arg;
	/* Nothing sent: the server closes after its handshake timeout (200 ms here), well
	 * before this socket's own 5 s receive timeout (EAGAIN). */
	n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	S.ok = fd >= 0 && (n == 0 || (n < 0 && errno == ECONNRESET)) && ut_ms() - t0 >= 150;
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
timed_out(void)
{
	return UT_STAT(conns) == 0;
}

static void
test_handshake_timeout(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};
	uint64_t to = TLS_STAT(timeouts);

	sc_run(&ops, client_stall, timed_out, 200);
	CU_ASSERT_EQUAL(S.ok, 1);
	CU_ASSERT_EQUAL(TLS_STAT(timeouts) - to, 1);
	CU_ASSERT_EQUAL(atomic_load(&S.opens), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 0); /* the app never saw it */
}

static void *
client_garbage(void *arg)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
	uint8_t b[256];
	int fd = ut_connect(&S.addr, 0);
	ssize_t n;

	(void)arg;
	if (fd >= 0 && ut_write_all(fd, get, sizeof(get) - 1)) {
		/* Perhaps an alert; then the end, long before the handshake timeout. */
		while ((n = read(fd, b, sizeof(b))) > 0)
			;
		S.refused = 1;
	}
	if (fd >= 0)
		close(fd);
	/* The server goes on serving. */
	fd = ut_connect(&S.addr, 0);
	if (fd >= 0) {
		SSL *ssl = tls_connect(fd, NULL);
		uint8_t back[5];

		S.served_after = ssl != NULL && SSL_write(ssl, "hello", 5) == 5 &&
				 ssl_read_n(ssl, back, 5) && memcmp(back, "hello", 5) == 0;
		if (ssl != NULL) {
			(void)clean_end(ssl);
			SSL_free(ssl);
		}
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_garbage_closed(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};
	uint64_t f = TLS_STAT(failures), to = TLS_STAT(timeouts);

	/* A 20 s handshake timeout: the garbage must be refused at once, not timed out. */
	sc_run(&ops, client_garbage, all_closed, 20000);
	CU_ASSERT_EQUAL(S.refused, 1);
	CU_ASSERT_EQUAL(S.served_after, 1);
	CU_ASSERT_EQUAL(TLS_STAT(failures) - f, 1);
	CU_ASSERT_EQUAL(TLS_STAT(timeouts) - to, 0);
	CU_ASSERT_EQUAL(atomic_load(&S.opens), 1);
}

/* ---- backpressure ---- */

static void *
client_slow_reader(void *arg)
{
	static uint8_t back[BIG];
	int fd = ut_connect(&S.addr, 32 * 1024);
	SSL *ssl = fd >= 0 ? tls_connect(fd, NULL) : NULL;
	size_t sent = 0, got = 0, k;
	uint64_t t0 = ut_ms();

	(void)arg;
	if (ssl != NULL) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
					  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		while (got < BIG && ut_ms() - t0 < 20000) {
			struct pollfd p = {fd, POLLIN | (sent < BIG ? POLLOUT : 0), 0};

			if (sent < BIG && SSL_write_ex(ssl, payload + sent, BIG - sent, &k) == 1)
				sent += k;
			/* Read nothing for the first half second: the server's queue fills. */
			if (ut_ms() - t0 > 500)
				while (SSL_read_ex(ssl, back + got, BIG - got, &k) == 1)
					got += k;
			ERR_clear_error();
			(void)poll(&p, 1, 20);
		}
		S.got = got;
		S.ok = got == BIG && memcmp(back, payload, BIG) == 0;
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		(void)clean_end(ssl);
		SSL_free(ssl);
	}
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_backpressure(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, on_drain, on_close};

	sc_run(&ops, client_slow_reader, all_closed, 0);
	CU_ASSERT_EQUAL(S.got, BIG);
	CU_ASSERT_EQUAL(S.ok, 1);
	/* It filled past the high watermark and drained (on_drain reached the app)... */
	CU_ASSERT(atomic_load(&S.max_queued) > CR_NET_HIGH_WATERMARK);
	CU_ASSERT(atomic_load(&S.drains) > 0);
	/* ...but reading stopped: at most what one more receive brought in, not the 4 MiB. */
	CU_ASSERT(atomic_load(&S.max_queued) < CR_NET_HIGH_WATERMARK + 512 * 1024);
}

/* ---- destroyed during the handshake, in the turn its deadline passes ---- */

static struct {
	int lfd;
	struct cr_tls_ctx *ctx;
	struct cr_conn *c;
	struct cr_timer kill, stop;
	_Atomic int closes;
} D;

static void
d_on_close(struct cr_conn *c, int err)
{
	(void)c;
	(void)err;
	atomic_fetch_add(&D.closes, 1);
}

static void
d_stop(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	cr_reactor_stop();
}

/* The ClientHello went unanswered; destroy, and let the handshake deadline pass first. */
static void
d_kill(struct cr_timer *t, void *arg)
{
	uint64_t t0 = ut_ms();

	(void)t;
	(void)arg;
	cr_conn_destroy(D.c);
	while (ut_ms() - t0 < 150)
		;
	cr_timer_start(&D.stop, 300000000ull);
}

static void
d_start(void *arg)
{
	static const struct cr_conn_ops ops = {.on_close = d_on_close};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	struct cr_conn_opts o = {0};
	struct cr_net_addr to;
	char txt[64];

	(void)arg;
	/* A listener that never accepts: the kernel completes the connect, nobody answers. */
	D.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(D.lfd >= 0 && bind(D.lfd, (struct sockaddr *)&sa, sl) == 0 &&
			listen(D.lfd, 4) == 0 &&
			getsockname(D.lfd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(txt, sizeof(txt), "127.0.0.1:%u", ntohs(sa.sin_port));
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse(txt, &to), 0);
	cr_tls_conn_opts(&o, D.ctx);
	D.c = cr_tcp_connect(&to, 0, &o, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(D.c);
	cr_timer_init(&D.kill, d_kill, NULL);
	cr_timer_init(&D.stop, d_stop, NULL);
	cr_timer_start(&D.kill, 50000000ull);
}

static void
test_destroy_at_handshake_deadline(void)
{
	struct cr_tls_config cfg = {.client = true, .handshake_timeout_ms = 100};
	char err[256];

	memset(&D, 0, sizeof(D));
	D.ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(D.ctx);
	ut_net_run(d_start, NULL, 30000);
	/* The app destroyed it: no on_close, from the timeout or anything else. */
	CU_ASSERT_EQUAL(atomic_load(&D.closes), 0);
	CU_ASSERT_EQUAL(UT_STAT(conns), 0);
	close(D.lfd);
	cr_tls_ctx_free(D.ctx);
}

/* ---- a layer send near the pool's reserve: all or nothing ---- */

#define FILL (4u * 16384u)
#define BIG_SEND (40u * 1024u)

static int reserve_rc, reserve_small_rc;
static size_t reserve_queued_before, reserve_queued_after;

/*
 * 8 chunks of 16 KiB, 2 of them the reserve. The filler (4 records) takes 5 chunks and
 * leaves the connection at its high watermark; 3 are free, reserve + 1. The 40 KiB send
 * (3 records) passes the watermark with its first record: it is queued whole (0), or
 * refused whole (-ENOBUFS, nothing queued, the session still usable), never half.
 */
static void
on_open_reserve(struct cr_conn *c)
{
	on_open(c);
	CU_ASSERT_EQUAL(cr_conn_send(c, payload, FILL), 0);
	reserve_queued_before = cr_conn_queued(c);
	reserve_rc = cr_conn_send(c, payload + FILL, BIG_SEND);
	reserve_queued_after = cr_conn_queued(c);
	reserve_small_rc = reserve_rc == 0 ? 0 : cr_conn_send(c, payload + FILL, 100);
	cr_conn_close(c);
}

static void *
client_read_all(void *arg)
{
	static uint8_t back[FILL + BIG_SEND + 1];
	int fd = ut_connect(&S.addr, 0);
	SSL *ssl = fd >= 0 ? tls_connect(fd, NULL) : NULL;
	size_t got = 0, k;

	(void)arg;
	if (ssl != NULL) {
		while (got < sizeof(back) && SSL_read_ex(ssl, back + got, sizeof(back) - got, &k) == 1)
			got += k;
		/* The server's close_notify ended the reads: a clean end, not a cut. */
		S.clean_end = SSL_get_error(ssl, 0) == SSL_ERROR_ZERO_RETURN;
		S.ok = memcmp(back, payload, got) == 0;
		S.got = got;
		SSL_free(ssl);
	}
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_send_at_reserve(void)
{
	static const struct cr_conn_ops ops = {on_open_reserve, NULL, NULL, NULL, on_close};
	struct cr_conn_opts copts = {0};
	struct cr_net_config nc, def;

	cr_net_config_defaults(&def);
	nc = def;
	nc.chunks = 8;
	nc.chunk_size = 16384;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&nc), 0);
	/* The filler's ciphertext (and any ticket) is at most this: at the watermark. */
	copts.high_watermark = FILL + 4096;
	sc_run_opts(&ops, client_read_all, all_closed, 0, &copts);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT(reserve_queued_before <= FILL + 4096);
	CU_ASSERT(reserve_rc == 0 || reserve_rc == -ENOBUFS);
	if (reserve_rc == 0) {
		CU_ASSERT(reserve_queued_after >= reserve_queued_before + BIG_SEND);
		CU_ASSERT_EQUAL(S.got, FILL + BIG_SEND);
	} else {
		CU_ASSERT_EQUAL(reserve_queued_after, reserve_queued_before);
		CU_ASSERT_EQUAL(reserve_small_rc, 0);
		CU_ASSERT_EQUAL(S.got, FILL + 100);
	}
	CU_ASSERT_EQUAL(S.ok, 1);
	CU_ASSERT_EQUAL(S.clean_end, 1);
	CU_ASSERT_EQUAL(atomic_load(&S.opens), 1);
}

/* ---- a kTLS hand-over the kernel refuses: user space goes on, nothing lost ---- */

#define KT_MSG 4096u
#define KT_TOTAL (256u * 1024u)

static uint64_t kt_base; /* kernel + fallbacks before the case */

static uint64_t
kt_count(void)
{
	return TLS_STAT(kernel) + TLS_STAT(kernel_fallbacks);
}

static void *
client_ktls_refused(void *arg)
{
	static uint8_t back[KT_TOTAL];
	int fd = ut_connect(&S.addr, 0);
	SSL *ssl = fd >= 0 ? tls_connect(fd, NULL) : NULL;
	size_t off = 0, w;
	uint8_t b[4];
	int i;

	(void)arg;
	if (ssl != NULL && SSL_write_ex(ssl, "ping", 4, &w) == 1 && ssl_read_n(ssl, b, 4)) {
		/* The wire is quiet now: reads stop, the last receive comes, the kernel refuses
		 * (this one has no kTLS; one that has takes it), reads start again. */
		for (i = 0; i < 2000 && kt_count() == kt_base; i++)
			ut_sleep_ms(1);
		S.attempts = (int)(kt_count() - kt_base);
		for (off = 0; off < KT_TOTAL; off += KT_MSG)
			if (SSL_write_ex(ssl, payload + off, KT_MSG, &w) != 1 ||
			    !ssl_read_n(ssl, back + off, KT_MSG))
				break;
		S.ok = off == KT_TOTAL && memcmp(back, payload, KT_TOTAL) == 0;
		S.clean_end = clean_end(ssl);
	}
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_ktls_refused_keeps_serving(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};

	kt_base = kt_count();
	cr__tls_ktls_try_anyway = true;
	sc_run(&ops, client_ktls_refused, all_closed, 0);
	cr__tls_ktls_try_anyway = false;
	/* One attempt, made while the connection was young, before any of the bulk. */
	CU_ASSERT_EQUAL(S.attempts, 1);
	CU_ASSERT_EQUAL(kt_count() - kt_base, 1);
	CU_ASSERT_EQUAL(S.ok, 1);
	/* In user space close_notify goes both ways; in the kernel ours may be a FIN alone. */
	if (TLS_STAT(kernel) == 0)
		CU_ASSERT_EQUAL(S.clean_end, 1);
}

/* The app stopped reading in on_open and starts again 300 ms later: the hand-over's own
 * stop and start (refused here, as above) must leave the app's stop alone. */
static struct cr_timer kt_resume;
static struct cr_conn *kt_conn;

static void
kt_resume_fn(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	cr_conn_read_start(kt_conn);
}

static void
on_open_stop_reads(struct cr_conn *c)
{
	on_open(c);
	kt_conn = c;
	cr_conn_read_stop(c);
	cr_timer_init(&kt_resume, kt_resume_fn, NULL);
	cr_timer_start(&kt_resume, 300 * 1000000ull);
}

static void
kt_close(struct cr_conn *c, int err)
{
	cr_timer_stop(&kt_resume);
	on_close(c, err);
}

static void *
client_ping_timed(void *arg)
{
	int fd = ut_connect(&S.addr, 0);
	SSL *ssl = fd >= 0 ? tls_connect(fd, NULL) : NULL;
	uint64_t t0;
	size_t w;
	uint8_t b[4];

	(void)arg;
	/* Not with the Finished (it would be delivered with it, stop or not): once the
	 * attempt is over, 50 ms in, well before the app reads again at 300 ms. */
	ut_sleep_ms(50);
	t0 = ut_ms();
	if (ssl != NULL && SSL_write_ex(ssl, "ping", 4, &w) == 1 && ssl_read_n(ssl, b, 4)) {
		S.got = (size_t)(ut_ms() - t0); /* ms until the echo */
		S.ok = memcmp(b, "ping", 4) == 0;
		(void)clean_end(ssl);
	}
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_ktls_attempt_keeps_app_read_stop(void)
{
	static const struct cr_conn_ops ops = {on_open_stop_reads, on_data_echo, NULL, NULL,
					       kt_close};

	kt_base = kt_count();
	cr__tls_ktls_try_anyway = true;
	sc_run(&ops, client_ping_timed, all_closed, 0);
	cr__tls_ktls_try_anyway = false;
	CU_ASSERT_EQUAL(S.ok, 1);
	CU_ASSERT(kt_count() - kt_base == 1);
	/* Not before the app read again, about 250 ms after the ping. */
	CU_ASSERT(S.got >= 150);
}

static int
suite_init(void)
{
	if (ut_rt_setup() != 0 || ut_certs_make("tls_conn_ut") != 0)
		return 1;
	ut_fill_seeded(payload, sizeof(payload), 11);
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

/* ---- a sendv the pool cannot take whole: nothing of it is queued ---- */

static int sendv_rc, sendv_sent_calls, sendv_tail_rc;
static size_t sendv_queued_before, sendv_queued_after;

static void
sendv_sent(void *arg, int err)
{
	(void)arg;
	(void)err;
	sendv_sent_calls++;
}

/* 8 chunks of 16 KiB: the first piece fits, the second (8 chunks' worth) cannot. */
static void
on_open_sendv(struct cr_conn *c)
{
	struct iovec iov[2] = {{payload, 100}, {payload + 100, 8u * 16384u}};

	on_open(c);
	sendv_queued_before = cr_conn_queued(c);
	sendv_rc = cr_conn_sendv(c, iov, 2, sendv_sent, NULL);
	sendv_queued_after = cr_conn_queued(c);
	/* The stream goes on as if the refused sendv had never been made. */
	sendv_tail_rc = cr_conn_send(c, payload, 100);
	cr_conn_close(c);
}

static void
test_sendv_all_or_nothing(void)
{
	static const struct cr_conn_ops ops = {on_open_sendv, NULL, NULL, NULL, on_close};
	struct cr_net_config nc, def;

	cr_net_config_defaults(&def);
	nc = def;
	nc.chunks = 8;
	nc.chunk_size = 16384;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&nc), 0);
	sendv_sent_calls = 0;
	sc_run_opts(&ops, client_read_all, all_closed, 0, NULL);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT_EQUAL(sendv_rc, -ENOBUFS);
	CU_ASSERT_EQUAL(sendv_queued_after, sendv_queued_before);
	CU_ASSERT_EQUAL(sendv_sent_calls, 0); /* refused: the memory was never the queue's */
	CU_ASSERT_EQUAL(sendv_tail_rc, 0);
	CU_ASSERT_EQUAL(S.got, 100); /* the tail alone: no piece of the refused sendv */
	CU_ASSERT_EQUAL(S.ok, 1);
	CU_ASSERT_EQUAL(S.clean_end, 1);
}

static const struct ut_case cases[] = {
	UT_CASE(test_echo),
	UT_CASE(test_resume_other_lcore),
	UT_CASE(test_resume_chain),
	UT_CASE(test_handshake_timeout),
	UT_CASE(test_garbage_closed),
	UT_CASE(test_backpressure),
	UT_CASE(test_send_at_reserve),
	UT_CASE(test_sendv_all_or_nothing),
	UT_CASE(test_destroy_at_handshake_deadline),
	UT_CASE(test_ktls_refused_keeps_serving),
	UT_CASE(test_ktls_attempt_keeps_app_read_stop),
};

UT_MAIN("tls_conn", cases, suite_init, suite_fini)
