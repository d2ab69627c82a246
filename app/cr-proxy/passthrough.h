/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SNI passthrough (sni_route.c: settings and routes; passthrough.c: reading the
 * ClientHello of a session). Never installed.
 */
#ifndef PASSTHROUGH_H
#define PASSTHROUGH_H

#include <stdbool.h>
#include <stdint.h>

#include "cr_net.h"
#include "sni_parse.h"

#define PX_SNI_ROUTES_MAX 32
#define PX_SNI_GROUP_MAX  16
/* ClientHello buffers per lcore: passthrough sessions reading their hello or connecting
 * at once; a client beyond them is closed and counted (proxy_sni_refused). */
#define PX_SNI_BUFFERS 256u

struct px_backend_conf;

/* What the --sni-* options set. */
struct px_sni_conf {
	struct cr_net_addr listen; /* --sni-listen; len 0: none */
	bool on;
	double timeout; /* --sni-timeout, seconds */
	unsigned n_routes;
};
extern struct px_sni_conf px_sni;
#define PX_N_SNI_OPTIONS 4
extern const struct cr_opt px_sni_options[PX_N_SNI_OPTIONS];

/* After the options: -EINVAL after one line for routes without a listener, or the reverse. */
int px_sni_check(void);
/* The routes' backends (and --sni-default's), for the backend table. @return how many. */
unsigned px_sni_backends(struct px_backend_conf *out, unsigned cap);
/* After each px_backends_apply(): the groups' slot masks, @p plain the --backend list. */
void px_sni_groups_update(const struct px_backend_conf *plain, unsigned n);
/* The slots the plain and TLS-terminating listeners may choose (any lcore). */
uint64_t px_plain_group(void);
/* The slots of SNI @p name (NULL: none sent): its route's, else --sni-default's (then
 * *@p is_default; 0: refuse). Any lcore. */
uint64_t px_sni_group(const char *name, bool *is_default);

/* Counters (telemetry ids). */
extern int px_ctr_sni_routed, px_ctr_sni_default, px_ctr_sni_refused, px_ctr_sni_bad;

#endif /* PASSTHROUGH_H */
