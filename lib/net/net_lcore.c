/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/net's per-lcore state: the connection slab and the output chunk pool, sized when
 * the lcore starts (no allocation afterwards), the counters, and what the lcore closes
 * when it stops. Memory that ops in flight still name outlives the stop: it is freed by
 * the last release callback, which lib/io runs while it waits for the final completions.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cr_reactor_module.h"
#include "cr_telemetry.h"
#include "net_internal.h"

struct cr_log_component cr__net_log = {"lib.net", CR_LOG_NOTICE, NULL};

__attribute__((constructor)) static void
net_log_register(void)
{
	cr_log_register(&cr__net_log);
}

struct net_lcore cr__net_lcores[CR_MAX_LCORES];

#define DEFAULT_MAX_CONNS 4096
#define DEFAULT_CHUNKS 1024
#define DEFAULT_CHUNK_SIZE 16384
#define DEFAULT_DRAIN_GRACE_MS 50
#define DEFAULT_FIRST_REQUEST_MS 1000
#define MAX_COUNT (1u << 24)
#define MAX_GRACE_MS 60000

static struct cr_net_config net_cfg = {DEFAULT_MAX_CONNS, DEFAULT_CHUNKS, DEFAULT_CHUNK_SIZE,
				       DEFAULT_DRAIN_GRACE_MS, DEFAULT_FIRST_REQUEST_MS, false,
				       false};
uint64_t cr__net_drain_grace_ns = DEFAULT_DRAIN_GRACE_MS * 1000000ull;
uint64_t cr__net_first_request_ns = DEFAULT_FIRST_REQUEST_MS * 1000000ull;
bool cr__net_share_addresses;

void
cr_net_config_defaults(struct cr_net_config *cfg)
{
	cfg->max_conns = DEFAULT_MAX_CONNS;
	cfg->chunks = DEFAULT_CHUNKS;
	cfg->chunk_size = DEFAULT_CHUNK_SIZE;
	cfg->drain_grace_ms = DEFAULT_DRAIN_GRACE_MS;
	cfg->first_request_ms = DEFAULT_FIRST_REQUEST_MS;
	cfg->share_addresses = false;
	cfg->prefault = false;
}

int
cr_net_configure(const struct cr_net_config *cfg)
{
	if (cfg == NULL || cfg->max_conns == 0 || cfg->max_conns > MAX_COUNT ||
	    cfg->chunks == 0 || cfg->chunks > MAX_COUNT || cfg->chunk_size < 256 ||
	    cfg->chunk_size > (1u << 20) || cfg->drain_grace_ms > MAX_GRACE_MS ||
	    cfg->first_request_ms > MAX_GRACE_MS)
		return -EINVAL;
	/* Lcores size their memory when they start: changing it under them is refused. */
	if (cr_lcore_count() != 0)
		return -EBUSY;
	net_cfg = *cfg;
	cr__net_drain_grace_ns = cfg->drain_grace_ms * 1000000ull;
	cr__net_first_request_ns = cfg->first_request_ms * 1000000ull;
	cr__net_share_addresses = cfg->share_addresses;
	return 0;
}

struct net_lcore *
cr__net_cur(void)
{
	unsigned id = cr_lcore_id();

	if (id == CR_LCORE_NONE || !cr__net_lcores[id].up) {
		errno = EPERM;
		return NULL;
	}
	return &cr__net_lcores[id];
}

unsigned
cr_net_conn_slots(void)
{
	struct net_lcore *nl = cr__net_cur();

	return nl != NULL ? nl->max_conns : 0;
}

bool
cr__net_may_start(const struct net_lcore *nl)
{
	return nl->up && !nl->stopping && cr_lcore_state(nl->lcore) == CR_LCORE_RUNNING;
}

struct cr_conn *
cr__net_conn_get(struct net_lcore *nl)
{
	struct cr_conn *c = nl->free_conns;

	if (c == NULL)
		return NULL;
	nl->free_conns = c->next;
	nl->conns_used++;
	NET_STAT_ADD(nl, conns, 1);
	return c;
}

static void net_free_memory(struct net_lcore *nl);

void
cr__net_conn_put(struct net_lcore *nl, struct cr_conn *c)
{
	if (c->reclaimed)
		nl->reclaiming--;
	c->reclaimed = false;
	c->state = CONN_FREE;
	c->next = nl->free_conns;
	nl->free_conns = c;
	nl->conns_used--;
	NET_STAT_ADD(nl, conns, -1);
	if (nl->orphaned) {
		if (nl->conns_used == 0)
			net_free_memory(nl);
		return;
	}
	if (nl->accept_paused)
		cr__listen_slot_freed(nl);
}

struct net_chunk *
cr__net_chunk_get(struct net_lcore *nl)
{
	struct net_chunk *ch = nl->free_chunks;

	if (ch != NULL) {
		nl->free_chunks = ch->next;
	} else if (nl->carved < nl->chunks) {
		/* Its page is touched here, for the first time. */
		ch = (struct net_chunk *)(nl->chunk_mem + nl->chunk_stride * nl->carved++);
	} else {
		return NULL;
	}
	nl->chunks_free--;
	NET_STAT_ADD(nl, chunks_free, -1);
	ch->next = NULL;
	ch->off = 0;
	ch->len = 0;
	ch->ext = NULL;
	ch->buf = NULL;
	ch->sent = NULL;
	return ch;
}

void
cr__net_chunk_put(struct net_lcore *nl, struct net_chunk *ch)
{
	ch->next = nl->free_chunks;
	nl->free_chunks = ch;
	nl->chunks_free++;
	NET_STAT_ADD(nl, chunks_free, 1);
}

static void
net_free_memory(struct net_lcore *nl)
{
	cr_numa_free(nl->conns);
	cr_numa_free(nl->chunk_mem);
	cr__net_bufs_free(nl);
	nl->conns = NULL;
	nl->chunk_mem = NULL;
	nl->free_conns = NULL;
	nl->free_chunks = NULL;
	/* Nothing left to carve or take: cr__net_chunk_get() now returns NULL. */
	nl->chunks = 0;
	nl->carved = 0;
	nl->chunks_free = 0;
	nl->orphaned = false;
}

/* Write to every page of [mem, mem + len): the kernel gives each its frame now. */
static void
net_prefault(uint8_t *mem, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), off;

	for (off = 0; off < len; off += page)
		((volatile uint8_t *)mem)[off] = 0;
	((volatile uint8_t *)mem)[len - 1] = 0;
}

_Static_assert(sizeof(struct net_lcore) - offsetof(struct net_lcore, stats) <
		       sizeof(struct net_counters) + 64,
	       "the counters close struct net_lcore (then padding only): the memset before "
	       "them covers every other member");
_Static_assert(sizeof(struct net_counters) % sizeof(_Atomic uint64_t) == 0,
	       "struct net_counters is _Atomic uint64_t fields only");

/* Field by field, relaxed: the telemetry thread may be reading them (pairs with the relaxed
 * loads of read_*() and cr_net_stats()); a memset raced those loads. */
static void
counters_zero(struct net_counters *k)
{
	_Atomic uint64_t *f = (_Atomic uint64_t *)k;
	size_t i;

	for (i = 0; i < sizeof(*k) / sizeof(*f); i++)
		atomic_store_explicit(&f[i], 0, memory_order_relaxed);
}

static int
net_lcore_start(unsigned lcore)
{
	struct net_lcore *nl = &cr__net_lcores[lcore];
	uint32_t i;

	/* A previous incarnation's memory went with its last release (lib/io's stop). */
	assert(nl->conns == NULL && nl->chunk_mem == NULL);
	memset(nl, 0, offsetof(struct net_lcore, stats));
	counters_zero(&nl->stats);
	nl->lcore = lcore;
	nl->numa = cr_lcore_numa(lcore);
	nl->max_conns = net_cfg.max_conns;
	nl->chunk_cap = net_cfg.chunk_size;
	nl->chunk_reserve = net_cfg.chunks / 4;
	nl->chunk_stride = (sizeof(struct net_chunk) + net_cfg.chunk_size + 63) & ~(size_t)63;
	nl->conns = cr_numa_zalloc(sizeof(*nl->conns) * nl->max_conns, nl->numa);
	nl->chunk_mem = cr_numa_zalloc(nl->chunk_stride * net_cfg.chunks, nl->numa);
	if (nl->conns == NULL || nl->chunk_mem == NULL ||
	    cr__net_bufs_init(nl, CR_IO_BUF_SPARES) != 0) {
		net_free_memory(nl);
		return -ENOMEM;
	}
	for (i = nl->max_conns; i-- > 0;) {
		nl->conns[i].next = nl->free_conns;
		nl->free_conns = &nl->conns[i];
	}
	/* No chunk is touched yet: the memory is mapped, its pages come with first use (a page
	 * fault in cr_conn_send()), unless prefault asks for all of them now. */
	if (net_cfg.prefault)
		net_prefault(nl->chunk_mem, nl->chunk_stride * net_cfg.chunks);
	nl->chunks = net_cfg.chunks;
	nl->chunks_free = net_cfg.chunks;
	NET_STAT_ADD(nl, chunks_free, net_cfg.chunks);
	nl->up = true;
	/* A restart: listening again on every listener still open. */
	cr__listen_lcore_rejoin(nl);
	return 0;
}

/*
 * Close everything this lcore owns. lib/io may still be up (it then retires the
 * abandoned ops after us, and their release callbacks free what they held) or already
 * stopped (abandon fails and everything is released here and now): either order is safe.
 */
static void
net_lcore_stop(unsigned lcore)
{
	struct net_lcore *nl = &cr__net_lcores[lcore];

	if (!nl->up)
		return;
	nl->stopping = true;
	cr__listen_lcore_stop(nl);
	cr__udp_lcore_stop(nl);
	while (nl->live != NULL)
		cr__conn_end(nl->live, -ESHUTDOWN, true);
	nl->up = false;
	if (nl->conns_used == 0)
		net_free_memory(nl);
	else
		nl->orphaned = true;
}

/*
 * The lcore begins closing (the reactor's lcore_closing event, before the app's hook): no
 * new connections (listening sockets drain, UDP sockets stop, their handles staying valid
 * until closed or the lcore stops), and every connection is served to its next boundary,
 * then closed gracefully. A shutdown that overtakes a retire comes here again: from then
 * on no lcore stays to hand connections to, so what this one still takes it serves.
 */
static void
net_lcore_closing(unsigned lcore, bool shutdown)
{
	struct net_lcore *nl = &cr__net_lcores[lcore];
	struct cr_conn *c;

	if (!nl->up)
		return;
	if (shutdown)
		nl->quench = true;
	if (nl->draining && !shutdown)
		return;
	nl->draining = true;
	cr__listen_lcore_closing(nl);
	cr__udp_lcore_drain(nl);
	/* Ending arms each connection's timer: nothing ends inside this walk. */
	for (c = nl->live; c != NULL; c = c->next)
		cr__conn_begin_ending(c);
}

/*
 * A closing lcore stays while a listening socket is still draining (at most the grace and
 * its backlog) or a connection is still open or closing; once the shutdown is forced,
 * lcore_stop ends the rest.
 */
static bool
net_lcore_busy(unsigned lcore, bool forced)
{
	const struct net_lcore *nl = &cr__net_lcores[lcore];

	if (!nl->up || forced)
		return false;
	return nl->live != NULL || cr__listen_lcore_draining(nl);
}

static const struct cr_reactor_module net_module = {
	.name = "net",
	.lcore_start = net_lcore_start,
	.lcore_closing = net_lcore_closing,
	.lcore_stop = net_lcore_stop,
	.lcore_busy = net_lcore_busy,
};

/* Telemetry readers: a relaxed load of one lcore's counter, from the telemetry thread. */
#define READER(field)                                                                      \
	static int read_##field(unsigned lcore, uint64_t *out, void *arg)                  \
	{                                                                                  \
		(void)arg;                                                                 \
		if (lcore >= CR_MAX_LCORES)                                                \
			return -EINVAL;                                                    \
		*out = atomic_load_explicit(&cr__net_lcores[lcore].stats.field,            \
					    memory_order_relaxed);                         \
		return 0;                                                                  \
	}
READER(conns)
READER(accepted)
READER(accept_backoffs)
READER(bytes_in)
READER(bytes_out)
READER(handed_off)
READER(reclaimed)
READER(moved_out)
READER(moved_in)

/* In dependency order, whatever the link order (cr_reactor_module.h). */
__attribute__((constructor(CR_MODULE_PRIO_NET))) static void
net_module_register(void)
{
	cr_reactor_module_register(&net_module);
}

__attribute__((constructor)) static void
net_register(void)
{
	/* Prometheus names carry their unit: coreact_net_received_bytes_total, ... */
	cr_telemetry_reader_register_prom("net_connections", CR_TELEMETRY_GAUGE,
					  "TCP connection slots in use (closing ones included).",
					  &(struct cr_telemetry_prom){"net_connections"}, read_conns,
					  NULL);
	cr_telemetry_reader_register_prom(
	    "net_accepted", CR_TELEMETRY_COUNTER, "TCP connections accepted.",
	    &(struct cr_telemetry_prom){"net_accepted_connections"}, read_accepted, NULL);
	cr_telemetry_reader_register_prom(
	    "net_accept_backoffs", CR_TELEMETRY_COUNTER,
	    "Accepts paused for lack of descriptors (EMFILE, ENFILE).",
	    &(struct cr_telemetry_prom){"net_accept_backoffs"}, read_accept_backoffs, NULL);
	cr_telemetry_reader_register_prom("net_bytes_in", CR_TELEMETRY_COUNTER,
					  "TCP bytes received.",
					  &(struct cr_telemetry_prom){"net_received_bytes"},
					  read_bytes_in, NULL);
	cr_telemetry_reader_register_prom("net_bytes_out", CR_TELEMETRY_COUNTER, "TCP bytes sent.",
					  &(struct cr_telemetry_prom){"net_sent_bytes"},
					  read_bytes_out, NULL);
	cr_telemetry_reader_register_prom(
	    "net_handed_off", CR_TELEMETRY_COUNTER,
	    "Connections a draining listener passed to another lcore.",
	    &(struct cr_telemetry_prom){"net_handed_off_connections"}, read_handed_off, NULL);
	cr_telemetry_reader_register_prom(
	    "net_reclaimed", CR_TELEMETRY_COUNTER,
	    "Idle connections closed to make room for new ones (out of slots or descriptors).",
	    &(struct cr_telemetry_prom){"net_reclaimed_connections"}, read_reclaimed, NULL);
	cr_telemetry_reader_register_prom(
	    "net_moved_out", CR_TELEMETRY_COUNTER,
	    "Live connections moved from this lcore to another (cr_conn_move, retires).",
	    &(struct cr_telemetry_prom){"net_moved_out_connections"}, read_moved_out, NULL);
	cr_telemetry_reader_register_prom(
	    "net_moved_in", CR_TELEMETRY_COUNTER, "Live connections moved here from another lcore.",
	    &(struct cr_telemetry_prom){"net_moved_in_connections"}, read_moved_in, NULL);
}

#define LOAD(f) atomic_load_explicit(&nl->stats.f, memory_order_relaxed)

int
cr_net_stats(unsigned lcore, struct cr_net_stats *out)
{
	const struct net_lcore *nl;

	if (lcore >= CR_MAX_LCORES || out == NULL)
		return -EINVAL;
	nl = &cr__net_lcores[lcore];
	out->accepted = LOAD(accepted);
	out->refused = LOAD(refused);
	out->accept_backoffs = LOAD(accept_backoffs);
	out->connected = LOAD(connected);
	out->closed = LOAD(closed);
	out->conns = LOAD(conns);
	out->bytes_in = LOAD(bytes_in);
	out->bytes_out = LOAD(bytes_out);
	out->send_nobufs = LOAD(send_nobufs);
	out->short_sends = LOAD(short_sends);
	out->udp_in = LOAD(udp_in);
	out->udp_out = LOAD(udp_out);
	out->udp_drops = LOAD(udp_drops);
	out->chunks_free = LOAD(chunks_free);
	out->handed_off = LOAD(handed_off);
	out->reclaimed = LOAD(reclaimed);
	out->bufs_held = LOAD(bufs_held);
	out->hold_nobufs = LOAD(hold_nobufs);
	out->moved_out = LOAD(moved_out);
	out->moved_in = LOAD(moved_in);
	out->move_aborts = LOAD(move_aborts);
	out->move_drops = LOAD(move_drops);
	return 0;
}
