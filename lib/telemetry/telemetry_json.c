/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The JSON writer. It never emits text that is not JSON: a misuse is recorded instead of
 * written, and cr_json_finish() reports it, so the server can answer with an error rather
 * than hand a client something its parser chokes on.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "telemetry_internal.h"

void
cr_json_init(struct cr_json *j, char *buf, size_t cap)
{
	memset(j, 0, sizeof(*j));
	j->buf = buf;
	j->cap = cap;
	if (cap == 0)
		j->overflow = true;
	else
		buf[0] = '\0';
}

/* Keep one byte for the NUL so the text is always a C string. */
static void
put(struct cr_json *j, const char *s, size_t n)
{
	if (j->overflow)
		return;
	if (n >= j->cap - j->len) {
		j->overflow = true;
		return;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

static void
putc_(struct cr_json *j, char c)
{
	put(j, &c, 1);
}

/* Length of the valid UTF-8 sequence at @p s (at most @p n bytes), or 0 if invalid. The
 * ranges are RFC 3629's: no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

static void
put_escaped(struct cr_json *j, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), i = 0;
	char esc[8];

	putc_(j, '"');
	while (i < n) {
		unsigned char c = s[i];
		size_t run = i;

		/* Copy plain ASCII in one go. */
		while (run < n && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' &&
		       s[run] != '\\')
			run++;
		if (run > i) {
			put(j, (const char *)s + i, run - i);
			i = run;
			continue;
		}
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(j, esc, 2);
			i++;
		} else if (c == '\n') {
			put(j, "\\n", 2);
			i++;
		} else if (c == '\t') {
			put(j, "\\t", 2);
			i++;
		} else if (c == '\r') {
			put(j, "\\r", 2);
			i++;
		} else if (c < 0x80) {
			/* Other control characters and DEL: a terminal could act on them. */
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(j, esc, 6);
			i++;
		} else {
			size_t len = utf8_len(s + i, n - i);

			if (len == 0) {
				put(j, "\\ufffd", 6);
				i++;
			} else {
				put(j, (const char *)s + i, len);
				i += len;
			}
		}
	}
	putc_(j, '"');
}

/* Check that a value may go here, and write the comma and key it needs. */
static bool
value_begin(struct cr_json *j, const char *key)
{
	unsigned d = j->depth;

	if (j->misuse)
		return false;
	if (d == 0) {
		if (key != NULL || j->top_done)
			goto misuse;
		j->top_done = true;
		return true;
	}
	if (j->key_pending) {
		if (key != NULL)
			goto misuse;
		j->key_pending = false;
		return true;
	}
	if (j->is_array[d] != (key == NULL))
		goto misuse;
	if (j->has_items[d])
		putc_(j, ',');
	j->has_items[d] = true;
	if (key != NULL) {
		put_escaped(j, key);
		putc_(j, ':');
	}
	return true;

misuse:
	j->misuse = true;
	return false;
}

void
cr__json_key(struct cr_json *j, const char *key)
{
	if (j->misuse)
		return;
	if (j->depth == 0 || j->is_array[j->depth] || j->key_pending || key == NULL) {
		j->misuse = true;
		return;
	}
	if (value_begin(j, key))
		j->key_pending = true;
}

static void
open_(struct cr_json *j, const char *key, bool array)
{
	if (j->depth == CR_JSON_MAX_DEPTH) {
		j->misuse = true;
		return;
	}
	if (!value_begin(j, key))
		return;
	j->depth++;
	j->is_array[j->depth] = array;
	j->has_items[j->depth] = false;
	putc_(j, array ? '[' : '{');
}

static void
close_(struct cr_json *j, bool array)
{
	if (j->misuse)
		return;
	if (j->depth == 0 || j->is_array[j->depth] != array || j->key_pending) {
		j->misuse = true;
		return;
	}
	j->depth--;
	putc_(j, array ? ']' : '}');
}

void
cr_json_object_begin(struct cr_json *j, const char *key)
{
	open_(j, key, false);
}

void
cr_json_object_end(struct cr_json *j)
{
	close_(j, false);
}

void
cr_json_array_begin(struct cr_json *j, const char *key)
{
	open_(j, key, true);
}

void
cr_json_array_end(struct cr_json *j)
{
	close_(j, true);
}

void
cr_json_string(struct cr_json *j, const char *key, const char *val)
{
	if (!value_begin(j, key))
		return;
	if (val == NULL)
		put(j, "null", 4);
	else
		put_escaped(j, val);
}

void
cr_json_stringf(struct cr_json *j, const char *key, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	cr_json_string(j, key, tmp);
}

static void
put_number(struct cr_json *j, const char *key, const char *text)
{
	if (value_begin(j, key))
		put(j, text, strlen(text));
}

void
cr_json_u64(struct cr_json *j, const char *key, uint64_t val)
{
	char tmp[24];

	snprintf(tmp, sizeof(tmp), "%" PRIu64, val);
	put_number(j, key, tmp);
}

void
cr_json_i64(struct cr_json *j, const char *key, int64_t val)
{
	char tmp[24];

	snprintf(tmp, sizeof(tmp), "%" PRId64, val);
	put_number(j, key, tmp);
}

void
cr_json_double(struct cr_json *j, const char *key, double val)
{
	char tmp[32];

	/* %.15g never gives "inf" or "nan" for finite values, and its forms ("1e+20",
	 * "-0.5") are all JSON numbers. */
	if (!isfinite(val))
		snprintf(tmp, sizeof(tmp), "null");
	else
		snprintf(tmp, sizeof(tmp), "%.15g", val);
	put_number(j, key, tmp);
}

void
cr_json_bool(struct cr_json *j, const char *key, bool val)
{
	put_number(j, key, val ? "true" : "false");
}

void
cr_json_null(struct cr_json *j, const char *key)
{
	put_number(j, key, "null");
}

int
cr_json_finish(const struct cr_json *j)
{
	if (j->overflow)
		return -ENOSPC;
	if (j->misuse || j->depth != 0 || !j->top_done)
		return -EINVAL;
	return 0;
}

const char *
cr_json_text(const struct cr_json *j)
{
	return j->cap != 0 ? j->buf : "";
}

size_t
cr_json_len(const struct cr_json *j)
{
	return j->len;
}

int
cr_json_errorf(struct cr_json *j, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->errmsg, sizeof(j->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

const char *
cr__json_errmsg(const struct cr_json *j)
{
	return j->errmsg;
}
