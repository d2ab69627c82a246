/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The io driver a test binary runs on: the one $CR_UT_DRIVER names (uring, the default, or
 * epoll). A test of a driver this kernel refuses (io_uring missing or disabled by
 * kernel.io_uring_disabled, a seccomp filter) is skipped — exit 77, Meson's skip — rather
 * than failed or passed.
 */
#ifndef UT_DRIVER_H
#define UT_DRIVER_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_eal.h"
#include "cr_reactor_backend.h"

#define UT_SKIP 77

static inline bool
ut_driver_uring(void)
{
	const char *d = getenv("CR_UT_DRIVER");

	return d == NULL || strcmp(d, "epoll") != 0;
}

static inline enum cr_io_driver
ut_driver(void)
{
	return ut_driver_uring() ? CR_IO_DRIVER_URING : CR_IO_DRIVER_EPOLL;
}

/* Exit 77 unless the driver of $CR_UT_DRIVER can run here. */
static inline void
ut_require_driver(void)
{
	const char *name = ut_driver_uring() ? "uring" : "epoll";
	const struct cr_backend_ops *ops = cr_backend_find(name);
	char why[256] = "not linked in";

	if (ops != NULL && ops->probe(why, sizeof(why)) == 0)
		return;
	printf("SKIP: the %s driver cannot run here: %s\n", name, why);
	fflush(stdout);
	exit(UT_SKIP);
}

#endif /* UT_DRIVER_H */
