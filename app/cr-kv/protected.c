/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protected mode, as Redis 7.0 has it (clientAcceptHandler()): while it is on (the
 * default; --protected-mode, CONFIG SET protected-mode) and no password is set for the
 * default user, a client whose peer is not a loopback address (127.* or ::1, compared as
 * Redis compares the text) is sent Redis's -DENIED text and closed, counted as a rejected
 * connection. The check is made as each connection opens, on its lcore, from the current
 * password (auth.c) and the flag: a CONFIG SET on any lcore holds for the clients that
 * connect after it.
 */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "kv.h"

_Atomic bool kv_protected_mode = true;

static const char denied[] =
    "-DENIED Redis is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from "
    "the loopback interface. If you want to connect from external computers to Redis you "
    "may adopt one of the following solutions: 1) Just disable protected mode sending the "
    "command 'CONFIG SET protected-mode no' from the loopback interface by connecting to "
    "Redis from the same host the server is running, however MAKE SURE Redis is not "
    "publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change "
    "permanent. 2) Alternatively you can just disable the protected mode by editing the "
    "Redis configuration file, and setting the protected mode option to 'no', and then "
    "restarting the server. 3) If you started the server manually just for testing, restart "
    "it with the '--protected-mode no' option. 4) Setup a an authentication password for "
    "the default user. NOTE: You only need to do one of the above things in order for the "
    "server to start accepting connections from the outside.\r\n";

/* Redis's connIsLocal(): the peer's address as text begins "127." or is "::1"; a peer
 * whose address cannot be had is not local. */
static bool
peer_local(const struct cr_conn *c)
{
	struct cr_net_addr a = {0};
	char ip[INET6_ADDRSTRLEN];

	if (cr_conn_peer(c, &a) != 0 || a.len == 0)
		return false;
	if (a.u.sa.sa_family == AF_UNIX)
		return true;
	if (a.u.sa.sa_family == AF_INET)
		return inet_ntop(AF_INET, &a.u.in4.sin_addr, ip, sizeof(ip)) != NULL &&
		       strncmp(ip, "127.", 4) == 0;
	if (a.u.sa.sa_family == AF_INET6)
		return inet_ntop(AF_INET6, &a.u.in6.sin6_addr, ip, sizeof(ip)) != NULL &&
		       strcmp(ip, "::1") == 0;
	return false;
}

bool
kv_protected_refuse(struct cr_conn *c)
{
	/* relaxed: a setting, read at each accept */
	if (!atomic_load_explicit(&kv_protected_mode, memory_order_relaxed) || kv_auth_required() ||
	    peer_local(c))
		return false;
	(void)cr_conn_send(c, denied, sizeof(denied) - 1);
	return true;
}
