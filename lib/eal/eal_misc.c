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

/* Days since 1970-01-01 to a civil date (proleptic Gregorian): shift the year to start in
 * March so the leap day is the last day of a year, then count 400-year eras of 146097
 * days, years within the era, and months of 153 days per five. */
static void
civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t z = days + 719468; /* days from 0000-03-01 to 1970-01-01 */
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);			      /* [0, 146096] */
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);		      /* [0, 365] */
	unsigned mp = (5 * doy + 2) / 153;				      /* March = 0 */

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void
cr_time_utc(int64_t sec, struct cr_utc *out)
{
	int64_t days = sec / 86400, rem = sec % 86400;

	if (rem < 0) {
		rem += 86400;
		days--;
	}
	civil_from_days(days, &out->year, &out->month, &out->day);
	out->hour = (unsigned)(rem / 3600);
	out->min = (unsigned)(rem / 60 % 60);
	out->sec = (unsigned)(rem % 60);
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
