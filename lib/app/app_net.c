/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What TCP and UDP apps share on top of lib/net: the --listen option's setter. In its own
 * file so that apps without lib/net do not link it.
 */
#include <errno.h>

#include "cr_app.h"
#include "cr_net.h"

int
cr_app_set_addr(const char *val, void *ctx)
{
	return cr_net_addr_parse(val, ctx) != 0 ? -EINVAL : 0;
}
