/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * INFO errorstats and total_error_replies, as Redis 7.0 counts them: every error reply a
 * client is sent (a command's, a rejection's, each one inside an EXEC) counts once under
 * its code, the first word of its text ("errorstat_WRONGTYPE:count=N"). Each lcore
 * counts its own clients' in its shard (no lock, no atomic); INFO adds them up, CONFIG
 * RESETSTAT zeroes them. The codes are those cr-kv answers with; an error whose code is
 * not among them counts in total_error_replies only.
 */
#include <string.h>

#include "kv.h"

/* In the order INFO lists them: Redis's (its radix tree's: by name). */
static const char *const codes[KV_ERRSTAT_KINDS] = {
    "BUSY",	"BUSYKEY",    "ERR",	    "EXECABORT", "LOADING", "NOAUTH",
    "NOPERM",	"NOPROTO",    "NOREPLICAS", "NOSCRIPT",	 "NOTBUSY", "OOM",
    "READONLY", "UNKILLABLE", "WRONGPASS",  "WRONGTYPE"};

const char *
kv_errstat_name(unsigned i)
{
	return i < KV_ERRSTAT_KINDS ? codes[i] : NULL;
}

void
kv_errstat_note(struct kv_shard *sh, const char *p, size_t n)
{
	const char *sp;
	size_t len;
	unsigned i;

	if (n < 2 || p[0] != '-')
		return;
	p++;
	n--;
	sp = memchr(p, ' ', n);
	len = sp != NULL ? (size_t)(sp - p) : n;
	if (sp == NULL) {
		const char *cr = memchr(p, '\r', n);

		len = cr != NULL ? (size_t)(cr - p) : n;
	}
	sh->errstat[KV_ERRSTAT_KINDS]++; /* the total */
	for (i = 0; i < KV_ERRSTAT_KINDS && codes[i] != NULL; i++)
		if (strlen(codes[i]) == len && memcmp(codes[i], p, len) == 0) {
			sh->errstat[i]++;
			return;
		}
}
