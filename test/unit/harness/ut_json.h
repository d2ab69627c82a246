/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replies of the telemetry endpoint: a strict JSON validator (RFC 8259, UTF-8 checked) and
 * number lookup in a reply.
 */
#ifndef UT_JSON_H
#define UT_JSON_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- strict JSON validation (RFC 8259, UTF-8 checked) ---- */

static inline const char *ut_json_value(const char *p, int depth);

static inline const char *
ut_json_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static inline const char *
ut_json_str(const char *p)
{
	const unsigned char *s = (const unsigned char *)p;

	if (*s++ != '"')
		return NULL;
	while (*s != '"') {
		if (*s < 0x20)
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!((s[i] >= '0' && s[i] <= '9') ||
					      (s[i] >= 'a' && s[i] <= 'f') ||
					      (s[i] >= 'A' && s[i] <= 'F')))
						return NULL;
				s += 5;
			} else if (*s != '"' && *s != '\\' && *s != '/' && *s != 'b' && *s != 'f' &&
				   *s != 'n' && *s != 'r' && *s != 't') {
				return NULL;
			} else {
				s++;
			}
		} else if (*s >= 0x80) {
			int n = *s >= 0xf0 && *s <= 0xf4 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc2 ? 2 : 0;

			if (n == 0 || *s > 0xf4)
				return NULL;
			if ((*s == 0xe0 && s[1] < 0xa0) || (*s == 0xed && s[1] > 0x9f) ||
			    (*s == 0xf0 && s[1] < 0x90) || (*s == 0xf4 && s[1] > 0x8f))
				return NULL;
			for (int i = 1; i < n; i++)
				if (s[i] < 0x80 || s[i] > 0xbf)
					return NULL;
			s += n;
		} else {
			s++;
		}
	}
	return (const char *)s + 1;
}

static inline const char *
ut_json_num(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

static inline const char *
ut_json_container(const char *p, int depth, char close)
{
	bool obj = close == '}';

	p = ut_json_ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (obj) {
			p = ut_json_str(p);
			if (p == NULL)
				return NULL;
			p = ut_json_ws(p);
			if (*p++ != ':')
				return NULL;
		}
		p = ut_json_value(p, depth + 1);
		if (p == NULL)
			return NULL;
		p = ut_json_ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static inline const char *
ut_json_value(const char *p, int depth)
{
	if (depth > 64)
		return NULL;
	p = ut_json_ws(p);
	switch (*p) {
	case '{':
		return ut_json_container(p, depth, '}');
	case '[':
		return ut_json_container(p, depth, ']');
	case '"':
		return ut_json_str(p);
	case 't':
		return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
	case 'f':
		return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
	case 'n':
		return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
	default:
		return ut_json_num(p);
	}
}

/* True when @p s is exactly one JSON value (surrounding whitespace allowed). */
static inline bool
ut_json_valid(const char *s)
{
	const char *end = ut_json_value(s, 0);

	return end != NULL && *ut_json_ws(end) == '\0';
}

/*
 * The unsigned number right after @p key (e.g. "\"turns\":") at or after the first
 * @p anchor (NULL: the start). @return true if found.
 */
static inline bool
ut_json_u64_after(const char *doc, const char *anchor, const char *key, unsigned long long *out)
{
	const char *p = anchor != NULL ? strstr(doc, anchor) : doc;
	char *end;

	if (p == NULL || (p = strstr(p, key)) == NULL)
		return false;
	p += strlen(key);
	*out = strtoull(p, &end, 10);
	return end != p;
}

/* ---- a unix-socket client ---- */

#endif /* UT_JSON_H */
