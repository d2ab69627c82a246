/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Clocks, hypervisor detection and error strings.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "cr_eal.h"
#include "eal_internal.h"

uint64_t
cr_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
bool
cr_eal_is_vm(void)
{
	unsigned eax, ebx, ecx, edx;

	/* Leaf 1, ECX bit 31 is reserved for hypervisors to announce themselves. */
	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return false;
	return (ecx >> 31) & 1;
}
#else
bool
cr_eal_is_vm(void)
{
	/* No portable equivalent of the CPUID bit; assume bare metal. */
	return false;
}
#endif

const char *
cr_strerror(int err)
{
	/* Per thread so that two lcores formatting errors at once do not share a buffer. */
	static _Thread_local char buf[128];

	if (err == INT_MIN)
		err = INT_MAX;
	if (err < 0)
		err = -err;
	/* _GNU_SOURCE gives the GNU strerror_r, which may return a static string. */
	return strerror_r(err, buf, sizeof(buf));
}

void
cr__errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}
