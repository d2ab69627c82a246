/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the telemetry suites that render Prometheus text: a line-by-line checker of
 * the text exposition format (0.0.4) and the naming rules we keep, and sample lookup.
 *
 * Checked: every line ends in a newline; "# HELP name" then "# TYPE name type" with the
 * same name, type counter, gauge or histogram, each family once; a counter's name ends in
 * _total and no other's does; samples follow their family's TYPE line and are named after
 * it (a histogram's _bucket, _sum, _count), label names and escapes are valid, values are
 * numbers (+Inf and -Inf too, not NaN); a histogram's buckets have ascending le bounds ending in
 * +Inf, counts that never fall, and +Inf equal to _count.
 */
#ifndef PROM_CHECK_H
#define PROM_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prom_check {
	unsigned metrics, samples;
	unsigned bad_line; /* 1-based; 0 = all good */
	char why[128];
};

static inline bool
prom_name_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
		      (i > 0 && c >= '0' && c <= '9')))
			return false;
	}
	return n > 0;
}

/* Labels from '{' to '}': name="value" pairs, value escapes \\ \" \n only. @return the
 * byte after '}', or NULL; the value of label "le", if any, into @p le. */
static inline const char *
prom_labels_ok(const char *p, char *le, size_t le_len)
{
	if (*p++ != '{')
		return NULL;
	while (*p != '}') {
		const char *name = p, *val;

		while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
		       (p > name && *p >= '0' && *p <= '9'))
			p++;
		if (p == name || *p++ != '=' || *p++ != '"')
			return NULL;
		val = p;
		while (*p != '"') {
			if (*p == '\0' || *p == '\n')
				return NULL;
			if (*p == '\\' && p[1] != '\\' && p[1] != '"' && p[1] != 'n')
				return NULL;
			p += *p == '\\' ? 2 : 1;
		}
		if (p - name > 3 && strncmp(name, "le=", 3) == 0 && le != NULL)
			snprintf(le, le_len, "%.*s", (int)(p - val), val);
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

static inline bool
prom_ends_with(const char *s, size_t n, const char *sfx)
{
	size_t k = strlen(sfx);

	return n >= k && strncmp(s + n - k, sfx, k) == 0;
}

#define PROM_BAD(...)                                        \
	do {                                                 \
		snprintf(c.why, sizeof(c.why), __VA_ARGS__); \
		goto bad;                                    \
	} while (0)

static inline struct prom_check
prom_check_text(const char *t)
{
	struct prom_check c = {0};
	char help[128] = "", type[128] = "", kind[16] = "", seen[8192] = " ";
	double last_le = -INFINITY, last_count = 0;
	bool inf_seen = false;
	unsigned line = 0;

	while (*t != '\0') {
		const char *eol = strchr(t, '\n');
		size_t n;

		line++;
		if (eol == NULL)
			PROM_BAD("no newline at the end");
		n = (size_t)(eol - t);
		if (strncmp(t, "# HELP ", 7) == 0) {
			if (sscanf(t + 7, "%127s", help) != 1)
				PROM_BAD("HELP without a name");
		} else if (strncmp(t, "# TYPE ", 7) == 0) {
			char tname[128], ttype[16], key[140];

			if (sscanf(t + 7, "%127s %15s", tname, ttype) != 2 ||
			    strcmp(tname, help) != 0)
				PROM_BAD("TYPE does not follow its HELP");
			if (strcmp(ttype, "counter") != 0 && strcmp(ttype, "gauge") != 0 &&
			    strcmp(ttype, "histogram") != 0)
				PROM_BAD("type %s", ttype);
			n = strlen(tname);
			if ((strcmp(ttype, "counter") == 0) != prom_ends_with(tname, n, "_total"))
				PROM_BAD("%s: counters, and only they, end in _total", tname);
			snprintf(key, sizeof(key), " %s ", tname);
			if (strstr(seen, key) != NULL)
				PROM_BAD("%s twice", tname);
			if (strlen(seen) + strlen(key) < sizeof(seen))
				strcat(seen, tname), strcat(seen, " ");
			snprintf(type, sizeof(type), "%s", tname);
			snprintf(kind, sizeof(kind), "%s", ttype);
			last_le = -INFINITY;
			last_count = 0;
			inf_seen = false;
			c.metrics++;
		} else {
			const char *brace = memchr(t, '{', n), *sp = memchr(t, ' ', n), *p;
			size_t name_len =
			    brace != NULL && brace < sp ? (size_t)(brace - t) : (size_t)(sp - t);
			char le[32] = "", *end;
			double v;

			if (sp == NULL || !prom_name_ok(t, name_len))
				PROM_BAD("bad sample name");
			if (strcmp(kind, "histogram") == 0) {
				if (name_len < strlen(type) || strncmp(t, type, strlen(type)) != 0)
					PROM_BAD("sample of another family");
				p = t + strlen(type);
				if (!(name_len == strlen(type) + 7 &&
				      strncmp(p, "_bucket", 7) == 0) &&
				    !(name_len == strlen(type) + 4 && strncmp(p, "_sum", 4) == 0) &&
				    !(name_len == strlen(type) + 6 && strncmp(p, "_count", 6) == 0))
					PROM_BAD("histogram sample %.*s", (int)name_len, t);
			} else if (name_len != strlen(type) || strncmp(t, type, name_len) != 0) {
				PROM_BAD("sample of another family");
			}
			p = t + name_len;
			if (*p == '{') {
				p = prom_labels_ok(p, le, sizeof(le));
				if (p == NULL)
					PROM_BAD("bad labels");
			}
			if (*p++ != ' ')
				PROM_BAD("no space before the value");
			v = strtod(p, &end);
			if (end != eol || isnan(v))
				PROM_BAD("bad value");
			if (strcmp(kind, "histogram") == 0 &&
			    strncmp(t + strlen(type), "_bucket", 7) == 0) {
				double b = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);

				if (le[0] == '\0' || b <= last_le || v < last_count)
					PROM_BAD("bucket le=%s out of order", le);
				last_le = b;
				last_count = v;
				inf_seen = isinf(b);
			} else if (strcmp(kind, "histogram") == 0 &&
				   strncmp(t + strlen(type), "_count", 6) == 0) {
				if (!inf_seen || v != last_count)
					PROM_BAD("_count %g is not the +Inf bucket %g", v,
						 last_count);
			}
			c.samples++;
		}
		t = eol + 1;
	}
	return c;
bad:
	c.bad_line = line;
	return c;
}

/* The value of the sample that starts with @p prefix (name and labels). */
static inline bool
prom_sample_value(const char *t, const char *prefix, double *v)
{
	char key[256];
	const char *p;

	snprintf(key, sizeof(key), "\n%s ", prefix);
	p = strstr(t, key);
	if (p == NULL)
		return false;
	*v = strtod(p + strlen(key), NULL);
	return true;
}

/* Check @p t and say where it is wrong. */
#define PROM_ASSERT_VALID(t)                                                         \
	do {                                                                         \
		struct prom_check pc_ = prom_check_text(t);                          \
		if (pc_.bad_line != 0)                                               \
			fprintf(stderr, "\n  line %u: %s\n", pc_.bad_line, pc_.why); \
		CU_ASSERT_EQUAL(pc_.bad_line, 0);                                    \
	} while (0)

#endif /* PROM_CHECK_H */
