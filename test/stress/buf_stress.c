/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded stress of lent receive buffers with exact counts, on every lcore and the driver
 * of $CR_UT_DRIVER. A client thread sends a seeded stream on each of STREAMS connections;
 * the lcore that accepts one connects a relay connection to the client's collector, on
 * the same lcore, and moves the stream's receive buffers to it without copies: each
 * buffer is held, and at random sent at once, sent in two slices, or kept in a queue of
 * held buffers that a poller flushes later (so buffers stay held across callbacks and
 * connections reach their caps); a refused hold, and one chunk in ten, goes as a copy.
 * The relay stops reading its source while its own queue is above the high watermark.
 *
 * The collector checks every stream byte for byte against its seed, reports a checksum
 * (FNV-1a) of all of them, and every lcore must end with no buffer held. A buffer given
 * back while referenced (and reused by a receive, or poisoned by a debug build) would show
 * as a wrong byte.
 *
 * Usage: buf_stress [SEED [STREAMS [BYTES_PER_STREAM]]]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_timer.h"
#include "ut_driver.h"

#define MAX_STREAMS 256
#define FIFO_MAX 256	   /* pieces a source may have unsent */
#define FIFO_STOP 32	   /* it stops reading above this many */
#define COPY_SIZE 65536	   /* a copy slot: at least a receive buffer */
#define COPY_SLOTS 2048	   /* per lcore */
#define SLOTS 4096 /* cr_net_config.max_conns by default */

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static unsigned seed, streams;
static size_t stream_bytes;
static _Atomic int failures;

#define CHECK(c, ...)                                                                      \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "FAIL line %d: %s (seed %u) ", __LINE__, #c, seed);      \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			atomic_fetch_add(&failures, 1);                                    \
		}                                                                          \
	} while (0)

/* Byte @p i of stream @p s: seeded, position-dependent. */
static uint8_t
stream_byte(unsigned s, uint64_t i)
{
	uint64_t x = (i / 8 + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32 | s);

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (i % 8)));
}

/* ---- the relay, on the lcores ---- */

/* A piece of a source's stream not sent yet: a held buffer, or a copy in a slot. */
struct item {
	struct cr_buf *b;
	uint8_t *copy;
	uint32_t len;
};

struct relay {
	struct cr_conn *peer; /* source <-> its relay connection */
	bool is_sink;
	bool eof;			/* the source's EOF came: shut the relay once flushed */
	struct item fifo[FIFO_MAX];	/* in stream order */
	unsigned head, n;
};

/* Copies live in app memory, per lcore slots of a receive buffer's size. */
struct slots {
	uint8_t *mem;
	uint32_t *free;
	unsigned nfree;
};

static struct relay *relays; /* [lcore][slot] */
static struct slots slots[CR_MAX_LCORES];
static struct cr_net_addr collector;
static uint64_t rngs[CR_MAX_LCORES];
static _Atomic uint64_t n_whole, n_split, n_waited, n_copied, n_sendv, n_refused, n_nobufs;
static _Atomic uint64_t n_closed;

static struct relay *
rel(struct cr_conn *c)
{
	return &relays[(size_t)cr_conn_lcore(c) * SLOTS + cr_conn_index(c)];
}

static uint64_t
rnd(void)
{
	uint64_t *s = &rngs[cr_lcore_id()];

	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
slot_put(void *arg, int err)
{
	struct slots *sl = &slots[cr_lcore_id()];

	CHECK(err == 0, "sendv: %d", err);
	sl->free[sl->nfree++] = (uint32_t)(((uint8_t *)arg - sl->mem) / COPY_SIZE);
}

static uint8_t *
slot_get(void)
{
	struct slots *sl = &slots[cr_lcore_id()];

	if (sl->nfree == 0)
		return NULL;
	return sl->mem + (size_t)sl->free[--sl->nfree] * COPY_SIZE;
}

/* Send one item; false (nothing queued) when the pool says -ENOBUFS: retry later. */
static bool
send_item(struct cr_conn *sink, struct item *it)
{
	struct iovec iov = {it->copy, it->len};
	size_t k;
	int rc;

	if (it->copy != NULL && rnd() % 2 == 0) {
		rc = cr_conn_sendv(sink, &iov, 1, slot_put, it->copy);
		if (rc == 0)
			atomic_fetch_add_explicit(&n_sendv, 1, memory_order_relaxed);
	} else if (it->copy != NULL) {
		rc = cr_conn_send(sink, it->copy, it->len);
		if (rc == 0) {
			slot_put(it->copy, 0);
			atomic_fetch_add_explicit(&n_copied, 1, memory_order_relaxed);
		}
	} else if (it->len > 1 && rnd() % 4 == 0) {
		/* Two slices: the second may be refused after the first went: carry on from
		 * there, with what is left as the item. */
		k = 1 + rnd() % (it->len - 1);
		rc = cr_conn_send_buf(sink, it->b, it->b->len - it->len, k);
		if (rc == 0) {
			it->len -= (uint32_t)k;
			rc = cr_conn_send_buf(sink, it->b, it->b->len - it->len, it->len);
			atomic_fetch_add_explicit(&n_split, 1, memory_order_relaxed);
		}
	} else {
		rc = cr_conn_send_buf(sink, it->b, it->b->len - it->len, it->len);
		if (rc == 0)
			atomic_fetch_add_explicit(&n_whole, 1, memory_order_relaxed);
	}
	if (rc == -ENOBUFS) {
		atomic_fetch_add_explicit(&n_nobufs, 1, memory_order_relaxed);
		return false;
	}
	CHECK(rc == 0, "send: %d", rc);
	cr_buf_unref(it->b); /* NULL for a copy */
	return true;
}

/* Send up to @p k items of source @p r; once all are out after its EOF, shut the relay. */
static void
flush(struct relay *r, unsigned k)
{
	while (k-- > 0 && r->n > 0 && send_item(r->peer, &r->fifo[r->head])) {
		r->head = (r->head + 1) % FIFO_MAX;
		r->n--;
	}
	if (r->eof && r->n == 0 && r->peer != NULL) {
		CHECK(cr_conn_shutdown_write(r->peer) == 0, "shutdown relay");
		r->eof = false;
	}
}

static void
src_data(struct cr_conn *c, const void *d, size_t n)
{
	struct relay *r = rel(c);
	struct item *it = &r->fifo[(r->head + r->n) % FIFO_MAX];

	CHECK(r->n < FIFO_MAX, "fifo full");
	errno = 0;
	it->b = rnd() % 8 == 0 ? NULL : cr_conn_hold(c);
	it->copy = NULL;
	it->len = (uint32_t)n;
	if (it->b == NULL) {
		if (errno == ENOBUFS)
			atomic_fetch_add_explicit(&n_refused, 1, memory_order_relaxed);
		it->copy = slot_get();
		CHECK(it->copy != NULL, "no copy slot");
		memcpy(it->copy, d, n);
	}
	r->n++;
	/* Some wait for the poller (held across callbacks), the rest go now. */
	if (rnd() % 3 != 0)
		flush(r, r->n);
	else
		atomic_fetch_add_explicit(&n_waited, 1, memory_order_relaxed);
	if (!cr_conn_writable(r->peer) || r->n > FIFO_STOP)
		cr_conn_read_stop(c);
}

static void
src_eof(struct cr_conn *c)
{
	struct relay *r = rel(c);

	r->eof = true;
	flush(r, r->n);
}

static void
src_close(struct cr_conn *c, int err)
{
	struct relay *r = rel(c);

	CHECK(err == 0, "source closed: %d", err);
	CHECK(r->n == 0, "source closed with %u pieces unsent", r->n);
	if (r->peer != NULL)
		rel(r->peer)->peer = NULL;
	memset(r, 0, sizeof(*r));
}

static void
sink_drain(struct cr_conn *c)
{
	struct relay *r = rel(c);

	if (r->peer == NULL)
		return;
	flush(rel(r->peer), FIFO_MAX);
	if (rel(r->peer)->n <= FIFO_STOP)
		cr_conn_read_start(r->peer);
}

static void
sink_close(struct cr_conn *c, int err)
{
	struct relay *r = rel(c);

	CHECK(err == 0, "relay closed: %d", err);
	if (r->peer != NULL) {
		rel(r->peer)->peer = NULL;
		cr_conn_close(r->peer);
	}
	memset(r, 0, sizeof(*r));
	atomic_fetch_add(&n_closed, 1);
}

static const struct cr_conn_ops sink_ops = {NULL, NULL, NULL, sink_drain, sink_close};

static void
src_open(struct cr_conn *c)
{
	struct cr_conn *sink = cr_tcp_connect(&collector, 0, NULL, &sink_ops, NULL);
	struct relay *r = rel(c);

	CHECK(sink != NULL, "connect: %d", errno);
	if (sink == NULL) {
		cr_conn_destroy(c);
		return;
	}
	memset(r, 0, sizeof(*r));
	r->peer = sink;
	memset(rel(sink), 0, sizeof(struct relay));
	rel(sink)->peer = c;
	rel(sink)->is_sink = true;
}

static const struct cr_conn_ops src_ops = {src_open, src_data, src_eof, NULL, src_close};

/* Every millisecond: send part of every source's pieces, so some wait a while. */
static int
flusher(void *arg)
{
	struct relay *base = &relays[(size_t)cr_lcore_id() * SLOTS];
	unsigned i;

	(void)arg;
	for (i = 0; i < SLOTS; i++) {
		struct relay *r = &base[i];

		if (r->is_sink || r->peer == NULL || (r->n == 0 && !r->eof))
			continue;
		flush(r, r->n != 0 ? 1 + (unsigned)(rnd() % r->n) : 0);
	}
	return 0;
}

static void
on_lcore_start(unsigned lcore, void *arg)
{
	struct slots *sl = &slots[lcore];
	unsigned i;

	(void)arg;
	rngs[lcore] = ((uint64_t)seed << 16 | lcore) * 0x2545f4914f6cdd1dull | 1;
	sl->mem = calloc(COPY_SLOTS, COPY_SIZE);
	sl->free = calloc(COPY_SLOTS, sizeof(*sl->free));
	CHECK(sl->mem != NULL && sl->free != NULL, "slots");
	for (i = 0; i < COPY_SLOTS; i++)
		sl->free[i] = i;
	sl->nfree = COPY_SLOTS;
	CHECK(cr_poller_register(flusher, NULL, 1000 * 1000) != NULL, "poller");
}

static void
on_lcore_stop(unsigned lcore, void *arg)
{
	(void)arg;
	CHECK(slots[lcore].nfree == COPY_SLOTS, "lcore %u: %u copy slots not back", lcore,
	      COPY_SLOTS - slots[lcore].nfree);
	free(slots[lcore].mem);
	free(slots[lcore].free);
}

/* ---- the client: sources and the collector, on one thread with poll(2) ---- */

static struct cr_listener *listener;
static struct cr_net_addr server;
static _Atomic bool client_done;
static _Atomic bool server_ready; /* server is set */
#define FNV_BASIS 0xcbf29ce484222325ull
static uint64_t checksum; /* the sum of every stream's FNV-1a: the same for a seed */
static uint64_t bytes_checked;

struct sink_side {
	int fd;
	int stream; /* -1 until its first 4 bytes (the stream id) came */
	uint8_t id[4];
	uint64_t got;
	uint64_t fnv; /* of its bytes, in order */
	bool eof;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
connect_to(const struct cr_net_addr *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, &a->u.sa, a->len) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* A stream's bytes on the wire: its id (4 bytes), then stream_bytes of its sequence. */
static size_t
stream_fill(unsigned s, uint64_t off, uint8_t *out, size_t n)
{
	size_t i;

	for (i = 0; i < n && off + i < 4 + stream_bytes; i++)
		out[i] = off + i < 4 ? (uint8_t)(s >> (8 * (off + i))) : stream_byte(s, off + i - 4);
	return i;
}

static void
sink_read(struct sink_side *k)
{
	uint8_t buf[65536];
	ssize_t r;
	size_t i;

	while ((r = recv(k->fd, buf, sizeof(buf), 0)) > 0) {
		for (i = 0; i < (size_t)r; i++, k->got++) {
			if (k->got < 4) {
				k->id[k->got] = buf[i];
				if (k->got == 3)
					k->stream = k->id[0] | k->id[1] << 8 | k->id[2] << 16 |
						    k->id[3] << 24;
				continue;
			}
			if (k->stream < 0 || (unsigned)k->stream >= streams ||
			    buf[i] != stream_byte((unsigned)k->stream, k->got - 4)) {
				CHECK(0, "stream %d: wrong byte at %" PRIu64, k->stream, k->got - 4);
				k->eof = true;
				return;
			}
			k->fnv = (k->fnv ^ buf[i]) * 0x100000001b3ull;
			bytes_checked++;
		}
	}
	if (r == 0)
		k->eof = true;
	else if (errno != EAGAIN && errno != EWOULDBLOCK)
		k->eof = true;
}

static void *
client_main(void *arg)
{
	static int src[MAX_STREAMS];
	static uint64_t sent[MAX_STREAMS];
	static struct sink_side sinks[MAX_STREAMS];
	static struct pollfd pfd[2 * MAX_STREAMS + 1];
	int lfd = (int)(intptr_t)arg;
	unsigned i, nsinks = 0, open_src, eofs = 0;
	uint64_t deadline = mono_ns() + 120ull * 1000 * 1000 * 1000;
	uint8_t buf[16384];

	while (!atomic_load(&server_ready) && mono_ns() < deadline)
		usleep(1000);
	for (i = 0; i < streams; i++) {
		src[i] = connect_to(&server);
		CHECK(src[i] >= 0, "connect source %u", i);
	}
	open_src = streams;
	while (eofs < streams && mono_ns() < deadline) {
		unsigned n = 0;

		pfd[n++] = (struct pollfd){.fd = nsinks < streams ? lfd : -1, .events = POLLIN};
		for (i = 0; i < streams; i++)
			pfd[n++] = (struct pollfd){.fd = src[i], .events = POLLOUT};
		for (i = 0; i < nsinks; i++)
			pfd[n++] = (struct pollfd){.fd = sinks[i].eof ? -1 : sinks[i].fd,
						   .events = POLLIN};
		if (poll(pfd, n, 100) < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd >= 0)
				sinks[nsinks++] = (struct sink_side){fd, -1, {0}, 0, FNV_BASIS, false};
		}
		for (i = 0; i < streams; i++) {
			size_t len;
			ssize_t w;

			if (src[i] < 0 || !(pfd[1 + i].revents & POLLOUT))
				continue;
			len = stream_fill(i, sent[i], buf, sizeof(buf));
			w = len > 0 ? send(src[i], buf, len, MSG_NOSIGNAL) : 0;
			if (w > 0)
				sent[i] += (uint64_t)w;
			if (sent[i] == 4 + stream_bytes) {
				shutdown(src[i], SHUT_WR);
				pfd[1 + i].fd = -1;
				close(src[i]);
				src[i] = -1;
				open_src--;
			}
		}
		for (i = 0; i < nsinks; i++) {
			if (sinks[i].eof || !(pfd[1 + streams + i].revents & (POLLIN | POLLHUP)))
				continue;
			sink_read(&sinks[i]);
			if (sinks[i].eof) {
				checksum += sinks[i].fnv;
				CHECK(sinks[i].got == 4 + stream_bytes, "stream %d: %" PRIu64 " bytes",
				      sinks[i].stream, sinks[i].got);
				eofs++;
			}
		}
	}
	CHECK(eofs == streams && nsinks == streams && open_src == 0, "%u of %u streams done",
	      eofs, streams);
	for (i = 0; i < nsinks; i++)
		close(sinks[i].fd);
	for (i = 0; i < streams; i++)
		if (src[i] >= 0)
			close(src[i]);
	atomic_store(&client_done, true);
	return NULL;
}

/* On the main lcore: stop once the client is done and every relay has closed. */
static int
stopper(void *arg)
{
	unsigned i;
	uint64_t held = 0;

	(void)arg;
	if (!atomic_load(&client_done) || atomic_load(&n_closed) < streams)
		return 0;
	for (i = 0; i < table.n; i++) {
		struct cr_net_stats st;

		if (cr_net_stats(table.lcores[i].lcore_id, &st) == 0)
			held += st.bufs_held;
	}
	if (held != 0)
		return 0; /* a relay's last buffers go with its close: look again */
	cr_reactor_stop();
	return 0;
}

static struct cr_timer start_timer;

static void
start(struct cr_timer *t, void *arg)
{
	struct cr_tcp_listen_opts o;

	(void)t;
	(void)arg;
	memset(&o, 0, sizeof(o));
	cr_net_addr_parse("127.0.0.1:0", &o.addr);
	CHECK(cr_tcp_listen(&o, &src_ops, NULL, &listener) == 0, "listen");
	cr_listener_addr(listener, &server);
	atomic_store(&server_ready, true); /* release: the client reads server after it */
	CHECK(cr_poller_register(stopper, NULL, 5 * 1000 * 1000) != NULL, "poller");
}

static void
watchdog(int sig)
{
	(void)sig;
	fprintf(stderr, "FAIL: watchdog (seed %u)\n", seed);
	_exit(1);
}

int
main(int argc, char **argv)
{
	const struct cr_reactor_hooks hooks = {.on_lcore_start = on_lcore_start,
					       .on_lcore_stop = on_lcore_stop};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sin);
	pthread_t client;
	char err[256];
	int lfd;

	seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1;
	streams = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 64;
	stream_bytes = argc > 3 ? (size_t)strtoull(argv[3], NULL, 0) : 256 * 1024;
	if (streams == 0 || streams > MAX_STREAMS) {
		fprintf(stderr, "STREAMS %u: 1 to %u\n", streams, MAX_STREAMS);
		return 2;
	}
	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	if (cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	relays = calloc((size_t)CR_MAX_LCORES * SLOTS, sizeof(*relays));
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (relays == NULL || lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    listen(lfd, MAX_STREAMS) != 0 || getsockname(lfd, (struct sockaddr *)&sin, &sl) != 0)
		return 1;
	memcpy(&collector.u.in4, &sin, sizeof(sin));
	collector.len = sizeof(sin);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, watchdog);
	alarm(240);
	if (cr_reactor_init(&cfg, &table, &hooks) != 0)
		return 1;
	cr_timer_init(&start_timer, start, NULL);
	cr_timer_start(&start_timer, 0);
	pthread_create(&client, NULL, client_main, (void *)(intptr_t)lfd);
	cr_reactor_run();
	pthread_join(client, NULL);
	cr_reactor_fini();
	alarm(0);
	close(lfd);
	printf("seed %u: %u streams of %zu bytes, %" PRIu64 " checked, checksum %016" PRIx64
	       "; held buffers sent whole %" PRIu64 ", in two slices %" PRIu64
	       "; copies sent %" PRIu64 ", by sendv %" PRIu64 "; pieces that waited %" PRIu64
	       "; holds refused %" PRIu64 ", sends refused (-ENOBUFS, retried) %" PRIu64 "\n",
	       seed, streams, stream_bytes, bytes_checked, checksum, atomic_load(&n_whole),
	       atomic_load(&n_split), atomic_load(&n_copied), atomic_load(&n_sendv),
	       atomic_load(&n_waited), atomic_load(&n_refused), atomic_load(&n_nobufs));
	CHECK(bytes_checked == (uint64_t)streams * stream_bytes, "bytes checked");
	CHECK(atomic_load(&n_waited) > 0 && atomic_load(&n_split) > 0 &&
		      atomic_load(&n_sendv) > 0,
	      "paths not exercised");
	printf("%d failure(s)\n", atomic_load(&failures));
	free(relays);
	return atomic_load(&failures) != 0 ? 1 : 0;
}
