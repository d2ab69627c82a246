/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_io_relay (socket <-> socket through two pooled pipes) on the driver named by
 * $CR_UT_DRIVER, over loopback TCP: both directions at once checked by sha256; half-close
 * (the server writes only after it saw the client's EOF through the relay); a reset on one
 * side ends the relay with -ECONNRESET; stop cancels it; a pool without two free pipes
 * says -EAGAIN and takes none.
 */
#include <openssl/evp.h>

#include "cr_io.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"

/* A far end: sends len bytes (seeded by len) and shuts its write side, and reads to EOF;
 * both at once, or (read_first) reading to EOF before it writes. */
struct far {
	int fd;
	bool read_first;
	uint64_t len, sent, got;
	unsigned char md_sent[32], md_got[32];
	pthread_t tw, tr;
};

static void *
far_write(void *arg)
{
	struct far *f = arg;
	uint8_t *chunk = malloc(65536);
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	uint64_t s = f->len | 1;

	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	while (chunk != NULL && f->sent < f->len) {
		size_t n = 1 + (size_t)(ut_rand(&s) % 65536);

		if (n > f->len - f->sent)
			n = (size_t)(f->len - f->sent);
		ut_fill(chunk, f->sent, n);
		EVP_DigestUpdate(h, chunk, n);
		if (!ut_write_all(f->fd, chunk, n))
			break;
		f->sent += n;
	}
	EVP_DigestFinal_ex(h, f->md_sent, NULL);
	EVP_MD_CTX_free(h);
	free(chunk);
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

static void *
far_read(void *arg)
{
	struct far *f = arg;
	uint8_t *buf = malloc(65536);
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	ssize_t n;

	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	while (buf != NULL && (n = recv(f->fd, buf, 65536, 0)) > 0) {
		EVP_DigestUpdate(h, buf, (size_t)n);
		f->got += (uint64_t)n;
	}
	EVP_DigestFinal_ex(h, f->md_got, NULL);
	EVP_MD_CTX_free(h);
	free(buf);
	if (f->read_first)
		far_write(f);
	return NULL;
}

static void
far_start(struct far *f, int fd, uint64_t len, bool read_first)
{
	f->fd = fd;
	f->len = len;
	f->read_first = read_first;
	if (!read_first)
		CU_ASSERT_FATAL(pthread_create(&f->tw, NULL, far_write, f) == 0);
	CU_ASSERT_FATAL(pthread_create(&f->tr, NULL, far_read, f) == 0);
}

static void
far_join(struct far *f)
{
	if (!f->read_first)
		pthread_join(f->tw, NULL);
	pthread_join(f->tr, NULL);
}

/* ---- the scenario: a (client side) <-> relay <-> b (server side) ---- */

struct rl {
	struct cr_io_relay r;
	int a[2], b[2]; /* a[0]: the client's, a[1]: the relay's; b[0]: the relay's, b[1] */
	unsigned phase, dones, turns, pipes_free;
	bool stop, reset;
	int32_t err;
	uint64_t bytes[2];
};

static void
relay_done(void *ctx, struct cr_io_relay *r)
{
	struct rl *s = ctx;

	s->dones++;
	s->err = r->err;
	s->bytes[0] = r->dir[0].bytes;
	s->bytes[1] = r->dir[1].bytes;
	CU_ASSERT_EQUAL(cr_io_pipe_free(), s->pipes_free);
}

static int
rl_step(void *arg)
{
	struct rl *s = arg;
	struct linger lg = {1, 0};

	s->turns++;
	switch (s->phase) {
	case 0:
		s->pipes_free = cr_io_pipe_free();
		CU_ASSERT_FATAL(cr_io_relay_start(&s->r, s->a[1], s->b[0], relay_done, s) == 0);
		CU_ASSERT_EQUAL(cr_io_pipe_free(), s->pipes_free - 2);
		s->turns = 0;
		s->phase = 1;
		break;
	case 1:
		if (s->stop && s->turns == 20) {
			CU_ASSERT_EQUAL(s->dones, 0);
			cr_io_relay_stop(&s->r);
			cr_io_relay_stop(&s->r); /* once is enough; twice is harmless */
		}
		if (s->reset && s->turns == 20) {
			setsockopt(s->a[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(s->a[0]);
			s->a[0] = -1;
		}
		if (s->dones == 0)
			break;
		s->turns = 0;
		s->phase = 2;
		break;
	case 2: /* a second done would show by now */
		if (s->turns < 20)
			break;
		CU_ASSERT_EQUAL(s->dones, 1);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
rl_open(struct rl *s)
{
	CU_ASSERT_FATAL(ut_tcp_pair(s->a) == 0 && ut_tcp_pair(s->b) == 0);
}

static void
rl_close(struct rl *s)
{
	for (int i = 0; i < 2; i++) {
		if (s->a[i] >= 0)
			close(s->a[i]);
		close(s->b[i]);
	}
}

static void
relay_both_ways(uint64_t up, uint64_t down, bool half_close)
{
	struct rl s = {0};
	struct far c = {0}, sv = {0};

	rl_open(&s);
	far_start(&c, s.a[0], up, false);
	far_start(&sv, s.b[1], down, half_close);
	ut_run(rl_step, &s);
	if (s.dones == 0) {
		shutdown(s.a[1], SHUT_RDWR);
		shutdown(s.b[0], SHUT_RDWR);
	}
	far_join(&c);
	far_join(&sv);
	CU_ASSERT_EQUAL(s.err, 0);
	CU_ASSERT_EQUAL(s.bytes[0], up);
	CU_ASSERT_EQUAL(s.bytes[1], down);
	CU_ASSERT_EQUAL(sv.got, up);
	CU_ASSERT_EQUAL(c.got, down);
	CU_ASSERT(memcmp(c.md_sent, sv.md_got, 32) == 0);
	CU_ASSERT(memcmp(sv.md_sent, c.md_got, 32) == 0);
	rl_close(&s);
}

static void
test_both_ways_at_once(void)
{
	relay_both_ways(5u << 20, (3u << 20) + 17, false);
	relay_both_ways(1, 0, false);
}

static void
test_half_close(void)
{
	/* The server sends only after the client's EOF reached it through the relay. */
	relay_both_ways((1u << 20) + 3, 2u << 20, true);
}

static void
test_reset_ends_relay(void)
{
	struct rl s = {.reset = true};

	rl_open(&s);
	ut_run(rl_step, &s);
	CU_ASSERT_EQUAL(s.dones, 1);
	CU_ASSERT_EQUAL(s.err, -ECONNRESET);
	/* The relay's owner closes its sockets; the server side then sees the end. */
	rl_close(&s);
}

static void
test_stop(void)
{
	struct rl s = {.stop = true};

	rl_open(&s);
	ut_run(rl_step, &s);
	CU_ASSERT_EQUAL(s.dones, 1);
	CU_ASSERT_EQUAL(s.err, -ECANCELED);
	rl_close(&s);
}

static int
pool_step(void *arg)
{
	struct cr_io_relay r;
	struct cr_io_pipe *ps;
	unsigned n = cr_io_pipe_free(), i;
	int *sv = arg;

	ps = calloc(n, sizeof(*ps));
	for (i = 0; i + 1 < n; i++)
		CU_ASSERT_EQUAL(cr_io_pipe_get(&ps[i]), 0);
	CU_ASSERT_EQUAL(cr_io_relay_start(&r, sv[0], sv[1], NULL, NULL), -EAGAIN);
	CU_ASSERT_EQUAL(cr_io_pipe_free(), 1);
	for (i = 0; i + 1 < n; i++)
		cr_io_pipe_put(&ps[i]);
	CU_ASSERT_EQUAL(cr_io_pipe_free(), n);
	/* A bad first socket: no splice starts, nothing is taken, no callback comes. */
	CU_ASSERT_EQUAL(cr_io_relay_start(&r, -1, sv[1], NULL, NULL), -EBADF);
	CU_ASSERT_EQUAL(cr_io_pipe_free(), n);
	CU_ASSERT_EQUAL(cr_io_inflight(), 0);
	free(ps);
	ut_finish();
	return 1;
}

static void
test_pool_short(void)
{
	int sv[2];

	CU_ASSERT_FATAL(ut_tcp_pair(sv) == 0);
	ut_run(pool_step, sv);
	close(sv[0]);
	close(sv[1]);
}

static const struct ut_case cases[] = {
	UT_CASE(test_both_ways_at_once),
	UT_CASE(test_half_close),
	UT_CASE(test_reset_ends_relay),
	UT_CASE(test_stop),
	UT_CASE(test_pool_short),
};

/* The pool is opt-in: these tests ask for the build's default one. */
static int
setup(void)
{
	return cr_io_pipe_pool(0, 0) != 0 ? -1 : ut_rt_setup();
}

UT_MAIN("io_relay", cases, setup, NULL)
