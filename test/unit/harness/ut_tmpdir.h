/* SPDX-License-Identifier: BSD-3-Clause */
/* A private directory for a suite's files: made in its init, removed with them in its fini. */
#ifndef UT_TMPDIR_H
#define UT_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

static char ut_tmpdir[64];

/* /tmp/@p prefix.XXXXXX, mode 0700. @return 0, or 1 (a suite init fails). */
static inline int
ut_tmpdir_make(const char *prefix)
{
	snprintf(ut_tmpdir, sizeof(ut_tmpdir), "/tmp/%s.XXXXXX", prefix);
	return mkdtemp(ut_tmpdir) != NULL ? 0 : 1;
}

static inline int
ut_tmpdir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", ut_tmpdir);
	return system(cmd) == 0 ? 0 : 1;
}

#endif /* UT_TMPDIR_H */
