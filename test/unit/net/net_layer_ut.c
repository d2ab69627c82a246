/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connection layers (struct cr_conn_layer, net_conn.c) on the real runtime and driver: a
 * toy layer that XORs every byte both ways and says "BYE" before the write side shuts.
 * The app keeps its own table and cr_conn_send(): it sees the plain bytes, the client the
 * XORed ones; the layer's shut runs once before the shut, and its release exactly once
 * per connection, after on_close or after cr_conn_destroy().
 */
#include <stddef.h>

#include "ut_net.h"

#define KEY 0x5a
#define N 50000

struct sc {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	_Atomic int opens, closes, shuts, releases, released_before_close;
	_Atomic int app_opens;
	_Atomic bool client_done, destroy;
	int client_ok, client_bye;
};

static struct sc S;
static uint8_t payload[N];

/* ---- the layer ---- */

static void
xor(uint8_t *d, const void *s, size_t n)
{
	const uint8_t *p = s;

	for (size_t i = 0; i < n; i++)
		d[i] = p[i] ^ KEY;
}

static void
wire_open(struct cr_conn *c)
{
	atomic_fetch_add(&S.opens, 1);
	CU_ASSERT_PTR_EQUAL(cr_conn_layer_arg(c), &S);
	cr_conn_set_layer_data(c, &S);
	if (cr_conn_app_ops(c)->on_open != NULL)
		cr_conn_app_ops(c)->on_open(c);
}

static void
wire_data(struct cr_conn *c, const void *d, size_t n)
{
	uint8_t buf[65536];

	CU_ASSERT_FATAL(n <= sizeof(buf));
	xor(buf, d, n);
	if (cr_conn_is_open(c))
		cr_conn_app_ops(c)->on_data(c, buf, n);
}

static void
wire_close(struct cr_conn *c, int err)
{
	atomic_fetch_add(&S.closes, 1);
	cr_conn_app_ops(c)->on_close(c, err);
}

static const struct cr_conn_ops wire = {wire_open, wire_data, NULL, NULL, wire_close};

static int
layer_send(struct cr_conn *c, const void *d, size_t n)
{
	uint8_t buf[65536];

	if (n > sizeof(buf))
		return -ENOBUFS;
	xor(buf, d, n);
	return cr_conn_send_wire(c, buf, n);
}

static void
layer_shut(struct cr_conn *c)
{
	atomic_fetch_add(&S.shuts, 1);
	CU_ASSERT_EQUAL(cr_conn_send_wire(c, "BYE", 3), 0);
}

static void
layer_release(struct cr_conn *c)
{
	CU_ASSERT_PTR_EQUAL(cr_conn_layer_data(c), &S);
	if (atomic_load(&S.closes) == 0 && !atomic_load(&S.destroy))
		atomic_fetch_add(&S.released_before_close, 1);
	atomic_fetch_add(&S.releases, 1);
}

static const struct cr_conn_layer layer = {
	.wire = &wire, .send = layer_send, .shut = layer_shut, .release = layer_release};

/* ---- the app: an echo that never hears of the layer ---- */

static void
app_open(struct cr_conn *c)
{
	(void)c;
	atomic_fetch_add(&S.app_opens, 1);
}

static void
app_data(struct cr_conn *c, const void *d, size_t n)
{
	if (atomic_load(&S.destroy)) {
		cr_conn_destroy(c);
		return;
	}
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
	CU_ASSERT(cr_conn_send_room(c) > 0);
}

static void
app_close(struct cr_conn *c, int err)
{
	(void)c;
	CU_ASSERT_EQUAL(err, 0);
}

static const struct cr_conn_ops app = {app_open, app_data, NULL, NULL, app_close};

/* ---- the client: XORs itself ---- */

static void *
client(void *arg)
{
	static uint8_t enc[N], back[N + 3];
	int fd = ut_connect(&S.addr, 0);
	size_t got;

	(void)arg;
	xor(enc, payload, N);
	if (fd >= 0 && ut_write_all(fd, enc, N)) {
		shutdown(fd, SHUT_WR);
		got = ut_read_n(fd, back, sizeof(back));
		if (atomic_load(&S.destroy)) {
			S.client_ok = got < N; /* cut short by the destroy */
		} else {
			xor(back, back, N);
			S.client_ok = got == N + 3 && memcmp(back, payload, N) == 0;
			S.client_bye = memcmp(back + N, "BYE", 3) == 0;
		}
	}
	if (fd >= 0)
		close(fd);
	atomic_store(&S.client_done, true);
	return NULL;
}

static struct ut_every every;

static bool
done(void *arg)
{
	(void)arg;
	if (!atomic_load(&S.client_done) || atomic_load(&S.releases) != 1)
		return false;
	cr_reactor_stop();
	return true;
}

static void
start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	o.conn.layer = &layer;
	o.conn.layer_arg = &S;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &app, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, client, NULL), 0);
	ut_every(&every, 2, done, NULL);
}

static void
run(bool destroy)
{
	memset(&S, 0, sizeof(S));
	atomic_store(&S.destroy, destroy);
	ut_net_run(start, NULL, 20000);
	pthread_join(S.client, NULL);
}

static void
test_layer_echo(void)
{
	run(false);
	CU_ASSERT_EQUAL(S.client_ok, 1);
	CU_ASSERT_EQUAL(S.client_bye, 1); /* the layer's last words, before the shut */
	CU_ASSERT_EQUAL(atomic_load(&S.opens), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.app_opens), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.shuts), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.releases), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.released_before_close), 0);
}

/* The app destroys the connection inside on_data: no close, no shut, one release. */
static void
test_layer_destroy(void)
{
	run(true);
	CU_ASSERT_EQUAL(S.client_ok, 1);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.shuts), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.releases), 1);
}

static int
suite_init(void)
{
	for (size_t i = 0; i < N; i++)
		payload[i] = (uint8_t)(i % 251);
	return ut_rt_setup();
}

static const struct ut_case cases[] = {
	UT_CASE(test_layer_echo),
	UT_CASE(test_layer_destroy),
};

UT_MAIN("net_layer", cases, suite_init, NULL)
