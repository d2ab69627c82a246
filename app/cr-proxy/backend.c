/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backend table: slots that keep their address for the life of the process, the
 * choice of a backend (smooth weighted round robin, weighted least connections, weighted
 * rendezvous hashing of the client address), health (active TCP checks on the main lcore,
 * TLS handshakes for --backend-tls; passive marking on connect failures) and the /backends
 * telemetry command.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "proxy.h"

CR_LOG_COMPONENT(px_log, "app.proxy")

struct px_slot px_slots[PX_MAX_BACKENDS];
struct px_lcore_counts px_counts[CR_MAX_LCORES];
static _Atomic unsigned n_used; /* slots [0, n_used) are assigned */

bool px_marking;
unsigned px_fall = 3, px_rise = 2;
unsigned px_lcore_ids[CR_MAX_LCORES];
unsigned px_n_lcores;
enum px_balance px_balance_mode;

static uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t
hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n-- > 0)
		h = (h ^ *b++) * 0x100000001b3ull;
	return mix64(h);
}

/* Same address and port (IPv4 or IPv6). */
static bool
addr_eq(const struct cr_net_addr *a, const struct cr_net_addr *b)
{
	if (a->u.sa.sa_family != b->u.sa.sa_family)
		return false;
	if (a->u.sa.sa_family == AF_INET)
		return a->u.in4.sin_port == b->u.in4.sin_port &&
		       a->u.in4.sin_addr.s_addr == b->u.in4.sin_addr.s_addr;
	return a->u.in6.sin6_port == b->u.in6.sin6_port &&
	       memcmp(&a->u.in6.sin6_addr, &b->u.in6.sin6_addr, 16) == 0 &&
	       a->u.in6.sin6_scope_id == b->u.in6.sin6_scope_id;
}

static int
slot_find(const struct cr_net_addr *a, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (addr_eq(&px_slots[i].addr, a))
			return (int)i;
	return -1;
}

int
px_slot_find(const struct cr_net_addr *a)
{
	return slot_find(a, atomic_load_explicit(&n_used, memory_order_relaxed));
}

int
px_backends_apply(const struct px_backend_conf *b, unsigned n)
{
	unsigned used = atomic_load_explicit(&n_used, memory_order_relaxed);
	unsigned fresh = 0, i, j;
	bool keep[PX_MAX_BACKENDS] = {false};
	int idx[PX_MAX_BACKENDS];

	/* Count new addresses first, so a reload that cannot fit changes nothing. */
	for (i = 0; i < n; i++) {
		bool dup = false;

		for (j = 0; j < i; j++)
			dup = dup || addr_eq(&b[j].addr, &b[i].addr);
		if (!dup && slot_find(&b[i].addr, used) < 0)
			fresh++;
	}
	if (used + fresh > PX_MAX_BACKENDS)
		return -ENOSPC;
	for (i = 0; i < n; i++) {
		int s = slot_find(&b[i].addr, used);

		if (s < 0) {
			struct px_slot *p = &px_slots[used];
			int rc = px_backend_tls_make(&b[i], &p->tls);

			/* Slots published so far in this call stay out of the configuration. */
			if (rc != 0)
				return rc;
			p->addr = b[i].addr;
			cr_net_addr_format(&p->addr, p->name, sizeof(p->name));
			p->hash = hash_bytes(p->name, strlen(p->name));
			atomic_store_explicit(&p->up, true, memory_order_relaxed);
			s = (int)used++;
			/* release: the address and name above are visible to whoever sees
			 * n_used cover this slot (acquire in px_choose() and telemetry). */
			atomic_store_explicit(&n_used, used, memory_order_release);
		}
		idx[i] = s;
		keep[s] = true;
	}
	for (i = 0; i < n; i++) {
		atomic_store_explicit(&px_slots[idx[i]].weight, b[i].weight, memory_order_relaxed);
		atomic_store_explicit(&px_slots[idx[i]].in_config, true, memory_order_relaxed);
	}
	for (i = 0; i < used; i++)
		if (!keep[i])
			atomic_store_explicit(&px_slots[i].in_config, false, memory_order_relaxed);
	return 0;
}

/* Relaxed loads: a choice made on a value one update old is still a valid choice. */
static bool
eligible(unsigned i, uint64_t tried, unsigned *w)
{
	const struct px_slot *s = &px_slots[i];

	if (tried & (1ull << i))
		return false;
	if (!atomic_load_explicit(&s->in_config, memory_order_relaxed) ||
	    !atomic_load_explicit(&s->up, memory_order_relaxed))
		return false;
	*w = atomic_load_explicit(&s->weight, memory_order_relaxed);
	return *w != 0;
}

/* nginx's smooth weighted round robin: each pick adds every weight to its current value,
 * takes the largest and takes the total back from it. */
static int
choose_rr(struct px_chooser *ch, unsigned n, uint64_t tried)
{
	int64_t total = 0;
	int best = -1;
	unsigned i, w;

	for (i = 0; i < n; i++) {
		if (!eligible(i, tried, &w))
			continue;
		ch->cur[i] += w;
		total += w;
		if (best < 0 || ch->cur[i] > ch->cur[best])
			best = (int)i;
	}
	if (best >= 0)
		ch->cur[best] -= total;
	return best;
}

/* Server connections to slot @p i over every lcore: each lcore's own count, read relaxed,
 * so a count is at most a few connections stale (those another lcore is opening now). */
static uint64_t
active_sum(unsigned i)
{
	uint64_t a = 0;
	unsigned l;

	for (l = 0; l < px_n_lcores; l++)
		a += atomic_load_explicit(&px_counts[px_lcore_ids[l]].b[i].active,
					  memory_order_relaxed);
	return a;
}

/* Fewest connections per unit of weight; ties go round from a rotating start. */
static int
choose_leastconn(struct px_chooser *ch, unsigned n, uint64_t tried)
{
	uint64_t best_a = 0;
	unsigned best_w = 1, k, w;
	int best = -1;

	ch->rot++;
	for (k = 0; k < n; k++) {
		unsigned i = (ch->rot + k) % n;
		uint64_t a;

		if (!eligible(i, tried, &w))
			continue;
		a = active_sum(i);
		if (best < 0 || a * best_w < best_a * w) {
			best = (int)i;
			best_a = a;
			best_w = w;
		}
	}
	return best;
}

static uint64_t
client_hash(const struct cr_net_addr *c)
{
	if (c == NULL || c->len == 0)
		return 0;
	if (c->u.sa.sa_family == AF_INET)
		return hash_bytes(&c->u.in4.sin_addr, 4);
	return hash_bytes(&c->u.in6.sin6_addr, 16);
}

/* Weighted rendezvous hashing: the highest weight / -ln(u(client, backend)) wins, so a
 * client keeps its backend while that one is up, and only the clients of a backend that
 * goes down (or leaves) move. */
static int
choose_source(unsigned n, const struct cr_net_addr *client, uint64_t tried)
{
	uint64_t ch = client_hash(client);
	double best_score = 0;
	int best = -1;
	unsigned i, w;

	for (i = 0; i < n; i++) {
		double u, score;

		if (!eligible(i, tried, &w))
			continue;
		u = ((double)(mix64(ch ^ px_slots[i].hash) >> 11) + 0.5) * 0x1.0p-53;
		score = (double)w / -log(u);
		if (best < 0 || score > best_score) {
			best = (int)i;
			best_score = score;
		}
	}
	return best;
}

int
px_choose(struct px_chooser *ch, enum px_balance bal, const struct cr_net_addr *client,
	  uint64_t tried)
{
	/* acquire: pairs with the release in px_backends_apply(). */
	unsigned n = atomic_load_explicit(&n_used, memory_order_acquire);

	switch (bal) {
	case PX_LEASTCONN:
		return choose_leastconn(ch, n, tried);
	case PX_SOURCE:
		return choose_source(n, client, tried);
	default:
		return choose_rr(ch, n, tried);
	}
}

/* ---- health ---- */

static void
mark(struct px_slot *s, bool up, const char *why)
{
	bool was = !up;

	/* One caller wins the change, and logs it. */
	if (!atomic_compare_exchange_strong(&s->up, &was, up))
		return;
	atomic_fetch_add_explicit(&s->transitions, 1, memory_order_relaxed);
	CR_LOG(px_log, NOTICE, "backend %s is %s (%s)", s->name, up ? "up" : "down", why);
}

void
px_backend_failed(int slot)
{
	struct px_slot *s = &px_slots[slot];
	unsigned f;

	atomic_store_explicit(&s->oks, 0, memory_order_relaxed);
	f = atomic_fetch_add_explicit(&s->fails, 1, memory_order_relaxed) + 1;
	if (px_marking && f >= px_fall)
		mark(s, false, "connect failures");
}

void
px_backend_tls_failed(int slot, const char *why)
{
	CR_LOG(px_log, WARNING, "backend %s: TLS connect failed: %s", px_slots[slot].name, why);
}

void
px_backend_connected(int slot)
{
	atomic_store_explicit(&px_slots[slot].fails, 0, memory_order_relaxed);
}

static void
check_ok(unsigned i)
{
	struct px_slot *s = &px_slots[i];
	unsigned k;

	atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
	k = atomic_fetch_add_explicit(&s->oks, 1, memory_order_relaxed) + 1;
	if (k >= px_rise)
		mark(s, true, "checks passed");
}

static struct cr_poller *check_poller;
static uint64_t check_timeout_ns;
/*
 * A --backend-tls check in flight, bounded whole by --check-timeout: lib/io's deadline
 * covers its TCP connect, and the client context's handshake timer (--connect-timeout)
 * would start only once TCP is up. Main lcore only.
 */
static struct {
	struct cr_conn *c;
	struct cr_timer timer;
} tls_checks[PX_MAX_BACKENDS];

/* The check of slot @p i has ended (opened, closed, or cut): its deadline goes. */
static void
check_done(unsigned i)
{
	px_slots[i].check_inflight = false;
	tls_checks[i].c = NULL;
	cr_timer_stop(&tls_checks[i].timer);
}

/* Why a TLS check failed, once per fall: not again while it stays down. */
static void
check_tls_failed(unsigned i, const char *why)
{
	if (atomic_load_explicit(&px_slots[i].up, memory_order_relaxed))
		px_backend_tls_failed((int)i, why);
}

static void
check_expired(struct cr_timer *t, void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	struct cr_conn *c = tls_checks[i].c;

	(void)t;
	if (c == NULL)
		return;
	check_done(i);
	cr_conn_destroy(c);
	check_tls_failed(i, "timed out (TCP connect and TLS handshake, --check-timeout)");
	px_backend_failed((int)i);
}

static void
check_open(struct cr_conn *c)
{
	unsigned i = (unsigned)(uintptr_t)cr_conn_arg(c);

	check_done(i);
	check_ok(i);
	cr_conn_destroy(c);
}

static void
check_close(struct cr_conn *c, int err)
{
	unsigned i = (unsigned)(uintptr_t)cr_conn_arg(c);

	check_done(i);
	/* A check cut short by our own drain (0) or stop says nothing about the backend. */
	if (err == 0 || err == -ESHUTDOWN)
		return;
	if (cr_tls_conn(c)) {
		char why[256];

		if (cr_tls_failure(c, why, sizeof(why)) != NULL)
			check_tls_failed(i, why);
		else if (err == -ETIMEDOUT)
			check_tls_failed(i, "timed out (TCP connect or TLS handshake)");
		else if (err == -ECONNRESET || err == -EPIPE)
			check_tls_failed(i, "closed by the backend during the TLS handshake");
	}
	px_backend_failed((int)i);
}

static const struct cr_conn_ops check_ops = {
    .on_open = check_open,
    .on_close = check_close,
};

static void
check_tick(void *arg)
{
	unsigned n = atomic_load_explicit(&n_used, memory_order_acquire);
	unsigned i;

	(void)arg;
	for (i = 0; i < n; i++) {
		struct px_slot *s = &px_slots[i];
		struct cr_conn_opts o = {0};
		struct cr_conn *c;

		if (s->check_inflight || !atomic_load_explicit(&s->in_config, memory_order_relaxed))
			continue;
		/* A --backend-tls backend is checked with a whole handshake, as it is used. */
		cr_tls_conn_opts(&o, s->tls);
		c = cr_tcp_connect(&s->addr, check_timeout_ns, &o, &check_ops,
				   (void *)(uintptr_t)i);
		/* A connect that cannot even start is short of local resources (slots,
		 * descriptors) or stopping: nothing learnt about the backend; next tick. */
		if (c == NULL)
			continue;
		s->check_inflight = true;
		if (s->tls != NULL && check_timeout_ns != 0) {
			tls_checks[i].c = c;
			cr_timer_start(&tls_checks[i].timer, check_timeout_ns);
		}
	}
}

static int
check_poll(void *arg)
{
	check_tick(arg);
	return 0;
}

int
px_checks_start(uint64_t interval_ns, uint64_t timeout_ns)
{
	unsigned i;

	check_timeout_ns = timeout_ns;
	for (i = 0; i < PX_MAX_BACKENDS; i++)
		cr_timer_init(&tls_checks[i].timer, check_expired, (void *)(uintptr_t)i);
	px_marking = true;
	check_poller = cr_poller_register(check_poll, NULL, interval_ns);
	return check_poller != NULL ? 0 : -errno;
}

void
px_checks_stop(void)
{
	cr_poller_unregister(&check_poller);
}

/* ---- telemetry ---- */

static int
backends_cmd(const char *cmd, const char *params, struct cr_json *j)
{
	unsigned n = atomic_load_explicit(&n_used, memory_order_acquire);
	unsigned i;

	(void)cmd;
	(void)params;
	cr_json_object_begin(j, NULL);
	cr_json_string(j, "balance", px_balance_name(px_balance_mode));
	cr_json_u64(j, "sessions", px_sessions_live());
	cr_json_array_begin(j, "backends");
	for (i = 0; i < n; i++) {
		const struct px_slot *s = &px_slots[i];
		struct px_btotal t;

		px_backend_totals(i, &t);
		cr_json_object_begin(j, NULL);
		cr_json_string(j, "address", s->name);
		cr_json_string(j, "state",
			       atomic_load_explicit(&s->up, memory_order_relaxed) ? "up" : "down");
		cr_json_bool(j, "in_config",
			     atomic_load_explicit(&s->in_config, memory_order_relaxed));
		cr_json_bool(j, "tls", s->tls != NULL);
		cr_json_u64(j, "weight", atomic_load_explicit(&s->weight, memory_order_relaxed));
		cr_json_u64(j, "active", t.active);
		cr_json_u64(j, "connections", t.conns);
		cr_json_u64(j, "failures", t.fails);
		cr_json_u64(j, "bytes_in", t.bytes_in);
		cr_json_u64(j, "bytes_out", t.bytes_out);
		cr_json_u64(j, "transitions",
			    atomic_load_explicit(&s->transitions, memory_order_relaxed));
		cr_json_u64(j, "consecutive_failures",
			    atomic_load_explicit(&s->fails, memory_order_relaxed));
		cr_json_object_end(j);
	}
	cr_json_array_end(j);
	cr_json_object_end(j);
	return 0;
}

unsigned
px_backends_used(void)
{
	/* acquire: pairs with the release in px_backends_apply(); the slots are set up */
	return atomic_load_explicit(&n_used, memory_order_acquire);
}

void
px_backend_totals(unsigned slot, struct px_btotal *t)
{
	unsigned l;

	memset(t, 0, sizeof(*t));
	/* relaxed: pairs with the relaxed stores of PX_ADD(); counters order nothing */
	for (l = 0; l < px_n_lcores; l++) {
		const struct px_bcount *b = &px_counts[px_lcore_ids[l]].b[slot];

		t->active += atomic_load_explicit(&b->active, memory_order_relaxed);
		t->conns += atomic_load_explicit(&b->conns, memory_order_relaxed);
		t->fails += atomic_load_explicit(&b->fails, memory_order_relaxed);
		t->bytes_in += atomic_load_explicit(&b->bytes_in, memory_order_relaxed);
		t->bytes_out += atomic_load_explicit(&b->bytes_out, memory_order_relaxed);
	}
}

int
px_telemetry_register(void)
{
	int rc = px_metrics_register();

	if (rc != 0)
		return rc;
	return cr_telemetry_register("/backends", backends_cmd,
				     "cr-proxy backends: address, state, tls, weight, active, "
				     "connections, failures, bytes_in, bytes_out, transitions");
}
