/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --session-log: one line per session when it ends, in the spirit of HAProxy's tcplog
 * (doc/guides/proxy.md, "Session log"). The line is formatted on the session's lcore and
 * handed to lib/eal's log file of the app's own (cr_log_file_put()): copied into the
 * lcore's log buffer and written by the log thread, so an lcore never blocks on it; a
 * full buffer drops the line and counts it.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

#include "cr_eal.h"
#include "cr_log.h"
#include "proxy.h"

int px_session_log_id; /* 0: off */

static const char *const end_names[] = {
    [PX_END_NONE] = "unknown",
    [PX_END_CLIENT_CLOSED] = "client_closed",
    [PX_END_SERVER_CLOSED] = "server_closed",
    [PX_END_CLIENT_TIMEOUT] = "client_timeout",
    [PX_END_SERVER_TIMEOUT] = "server_timeout",
    [PX_END_CLIENT_RESET] = "client_reset",
    [PX_END_SERVER_RESET] = "server_reset",
    [PX_END_CONNECT_FAILED] = "connect_failed",
    [PX_END_NO_BACKEND] = "no_backend",
    [PX_END_RETIRE] = "retire",
    [PX_END_SHUTDOWN] = "shutdown",
    [PX_END_NOBUFS] = "nobufs_reset",
};
_Static_assert(sizeof(end_names) / sizeof(end_names[0]) == PX_END_COUNT, "end_names");

const char *
px_end_name(enum px_end e)
{
	return (unsigned)e < PX_END_COUNT ? end_names[e] : "unknown";
}

int
px_session_log_open(const char *path)
{
	int id = cr_log_file_open(path);

	if (id < 0)
		return id;
	px_session_log_id = id;
	return 0;
}

void
px_session_log_reopen(void)
{
	if (px_session_log_id > 0)
		(void)cr_log_file_reopen(px_session_log_id);
}

void
px_session_log_close(void)
{
	if (px_session_log_id > 0)
		cr_log_file_close(px_session_log_id);
	px_session_log_id = 0;
}

void
px_slog_begin(struct px_slog *l, struct cr_conn *cli, uint64_t now_ns)
{
	struct timespec ts;
	socklen_t len = sizeof(l->front.u.ss);

	l->start_ns = now_ns;
	l->admit_ns = now_ns;
	l->connected_ns = 0;
	/* The wall clock (vDSO, no system call) and the frontend's address, only when the
	 * log is on: one getsockname(2) per session. */
	(void)clock_gettime(CLOCK_REALTIME, &ts);
	l->accept_sec = ts.tv_sec;
	l->accept_ms = (unsigned)(ts.tv_nsec / 1000000);
	if (getsockname(cr_conn_fd(cli), &l->front.u.sa, &len) == 0)
		l->front.len = len;
	else
		l->front.len = 0;
}

/* Milliseconds from @p a to @p b, or -1 when @p a is 0 (never happened). */
static long long
ms(uint64_t a, uint64_t b)
{
	return a == 0 ? -1 : (long long)((b - a) / 1000000);
}

void
px_slog_write(const struct px_slog *l, const struct cr_net_addr *peer, int slot, uint64_t now_ns)
{
	static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	char cli[CR_NET_ADDR_STRLEN], front[CR_NET_ADDR_STRLEN], line[512];
	struct cr_utc t;
	int n;

	cr_time_utc(l->accept_sec, &t);
	if (l->front.len == 0)
		snprintf(front, sizeof(front), "-");
	else
		cr_net_addr_format(&l->front, front, sizeof(front));
	cr_net_addr_format(peer, cli, sizeof(cli));
	/* client [accept time] frontend backend Tw/Tc/Tt c->s s->c cause */
	n = snprintf(
	    line, sizeof(line),
	    "%s [%02u/%s/%04lld:%02u:%02u:%02u.%03u] %s %s %lld/%lld/%lld %llu %llu %s\n", cli,
	    t.day, mon[t.month - 1], (long long)t.year, t.hour, t.min, t.sec, l->accept_ms, front,
	    slot >= 0 ? px_slots[slot].name : "-", ms(l->start_ns, l->admit_ns),
	    l->connected_ns == 0 ? -1 : ms(l->connect_ns, l->connected_ns), ms(l->start_ns, now_ns),
	    (unsigned long long)l->c2s, (unsigned long long)l->s2c, px_end_name(l->end));
	if (n > 0 && (size_t)n < sizeof(line))
		(void)cr_log_file_put(px_session_log_id, line, (size_t)n);
}
