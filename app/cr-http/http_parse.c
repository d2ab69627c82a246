/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request parser. Strict on purpose (RFC 9112 sections 2-7): anything a proxy in front
 * of us might frame differently — bare LF, obs-fold, whitespace before a colon, duplicate
 * or conflicting framing headers — is refused rather than guessed at, so that request
 * smuggling finds no disagreement to exploit.
 */
#include <string.h>
#include <time.h>

#include "http_parse.h"

enum { ST_LINE = 0, ST_FIELDS, ST_DONE };

/* Character classes, one bit each. */
#define C_TCHAR	 0x01 /* token (method, field name) */
#define C_TARGET 0x02 /* request-target: VCHAR */
#define C_VALUE	 0x04 /* field value: VCHAR, SP, HTAB, obs-text */
#define C_HEX	 0x08
#define C_QPCT	 0x10 /* '?' and '%' in a target */

static uint8_t cclass[256];

static void __attribute__((constructor)) cclass_init(void)
{
	static const char tspecial[] = "!#$%&'*+-.^_`|~";
	unsigned c;

	for (c = 0x21; c < 0x7f; c++)
		cclass[c] |= C_TARGET | C_VALUE;
	for (c = 0x80; c < 0x100; c++)
		cclass[c] |= C_VALUE;
	cclass[' '] |= C_VALUE;
	cclass['\t'] |= C_VALUE;
	for (c = '0'; c <= '9'; c++)
		cclass[c] |= C_TCHAR | C_HEX;
	for (c = 'a'; c <= 'z'; c++)
		cclass[c] |= C_TCHAR;
	for (c = 'A'; c <= 'Z'; c++)
		cclass[c] |= C_TCHAR;
	for (c = 'a'; c <= 'f'; c++)
		cclass[c] |= C_HEX;
	for (c = 'A'; c <= 'F'; c++)
		cclass[c] |= C_HEX;
	for (c = 0; tspecial[c] != '\0'; c++)
		cclass[(uint8_t)tspecial[c]] |= C_TCHAR;
	cclass['?'] |= C_QPCT;
	cclass['%'] |= C_QPCT;
}

static const char *const method_names[HTTP_METHOD_COUNT] = {
    [HTTP_GET] = "GET",	    [HTTP_HEAD] = "HEAD",	[HTTP_POST] = "POST",
    [HTTP_PUT] = "PUT",	    [HTTP_DELETE] = "DELETE",	[HTTP_OPTIONS] = "OPTIONS",
    [HTTP_PATCH] = "PATCH", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
};
_Static_assert(sizeof(method_names) / sizeof(method_names[0]) == HTTP_METHOD_COUNT,
	       "a name per method");

const char *
http_method_name(unsigned m)
{
	return m < HTTP_METHOD_COUNT ? method_names[m] : "?";
}

void
http_limits_default(struct http_limits *l)
{
	l->max_line = 8192;
	l->max_header_bytes = 16384;
	l->max_fields = 100;
	l->max_body = 1u << 20;
}

void
http_parser_init(struct http_parser *p)
{
	memset(p, 0, sizeof(*p));
}

bool
http_ieq(const char *s, size_t len, const char *lit)
{
	size_t i;

	for (i = 0; i < len; i++) {
		char a = s[i], b = lit[i];

		if (b == '\0')
			return false;
		if (a >= 'A' && a <= 'Z')
			a = (char)(a + 32);
		if (a != b)
			return false;
	}
	return lit[len] == '\0';
}

static int
method_of(const char *s, size_t len)
{
	unsigned m;

	/* Methods are case-sensitive. GET first: it is nearly every request. */
	if (len == 3 && s[0] == 'G' && s[1] == 'E' && s[2] == 'T')
		return HTTP_GET;
	for (m = 1; m < HTTP_METHOD_COUNT; m++)
		if (strlen(method_names[m]) == len && memcmp(method_names[m], s, len) == 0)
			return (int)m;
	return -1;
}

/* "HTTP/1.1" -> minor; -505 for another major version; -400 for anything else. */
static int
parse_version(const char *s, size_t len)
{
	size_t i = 5, d1;

	if (len < 6 || memcmp(s, "HTTP/", 5) != 0)
		return -400;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	d1 = i - 5;
	if (d1 == 0 || d1 > 3)
		return -400;
	if (i < len) {
		size_t j = i + 1;

		if (s[i] != '.' || j == len)
			return -400;
		while (j < len && s[j] >= '0' && s[j] <= '9')
			j++;
		if (j != len)
			return -400;
	}
	if (d1 != 1 || s[5] != '1')
		return -505;
	if (i == len || len != 8)
		return -400; /* "HTTP/1" or "HTTP/1.10": not DIGIT "." DIGIT */
	return s[7] >= '1' ? 1 : 0;
}

/* "http://authority/path...": the offset of the path; 0 if not that form. */
static size_t
absolute_path(const char *t, size_t len)
{
	size_t i;

	if (len > 7 && http_ieq(t, 7, "http://"))
		i = 7;
	else if (len > 8 && http_ieq(t, 8, "https://"))
		i = 8;
	else
		return 0;
	if (t[i] == '/')
		return 0; /* no authority */
	for (; i < len; i++) {
		if (t[i] == '/')
			return i;
		if (t[i] == '?' || t[i] == '#')
			return 0;
	}
	return 0; /* no path: refused rather than invented */
}

static int
parse_request_line(struct http_parser *p, const char *line, size_t len, uint32_t base)
{
	struct http_request *r = &p->req;
	size_t i = 0, m_end, t_start, t_end, q;
	bool bad_pct = false;
	int m, v;

	while (i < len && (cclass[(uint8_t)line[i]] & C_TCHAR))
		i++;
	if (i == 0 || i == len || line[i] != ' ')
		return -400;
	m_end = i++;
	t_start = i;
	q = 0;
	/* One pass over the target: its end, where the query starts, and its escapes. */
	while (i < len) {
		uint8_t c = cclass[(uint8_t)line[i]];

		if (!(c & C_TARGET))
			break;
		if (c & C_QPCT) {
			if (line[i] == '?') {
				if (q == 0)
					q = i; /* the path ends at the first '?' */
			} else if (i + 2 >= len || !(cclass[(uint8_t)line[i + 1]] & C_HEX) ||
				   !(cclass[(uint8_t)line[i + 2]] & C_HEX)) {
				bad_pct = true;
			}
		}
		i++;
	}
	t_end = i;
	if (t_end == t_start || i == len || line[i] != ' ')
		return -400; /* empty target, a control char or obs-text in it, no version */
	v = parse_version(line + i + 1, len - i - 1);
	if (v < 0)
		return v;
	/* The target: origin-form ("/path?query"); absolute-form ("http://host/path", whose
	 * path we use) with a path; "*" for OPTIONS. */
	r->target.off = base + (uint32_t)t_start;
	r->target.len = (uint32_t)(t_end - t_start);
	r->path = r->target;
	if (line[t_start] != '/') {
		size_t a = absolute_path(line + t_start, t_end - t_start);

		if (a > 0) {
			r->path.off += (uint32_t)a;
			r->path.len -= (uint32_t)a;
		} else if (!(t_end - t_start == 1 && line[t_start] == '*' && m_end == 7 &&
			     memcmp(line, "OPTIONS", 7) == 0)) {
			return -400;
		}
	}
	if (bad_pct)
		return -400; /* '%' not followed by two hex digits */
	/* An absolute-form authority has no '?': q, if any, is in the path. */
	r->path.len = (uint32_t)(base + (q != 0 ? q : t_end) - r->path.off);
	m = method_of(line, m_end);
	if (m < 0)
		return -501;
	if (m == HTTP_TRACE)
		return -405;
	r->method = (uint8_t)m;
	r->minor = (uint8_t)v;
	return 0;
}

/* Content-Length: 1*DIGIT; a repeat must carry the same value. */
static int
field_content_length(struct http_request *r, const char *v, size_t len)
{
	uint64_t n = 0;
	size_t i;

	if (len == 0)
		return -400;
	for (i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -400;
		if (n > (UINT64_MAX - 9) / 10)
			n = UINT64_MAX; /* saturate: too large either way, 413 later */
		else
			n = n * 10 + (uint64_t)(v[i] - '0');
	}
	if (r->has_length && r->content_length != n)
		return -400;
	r->has_length = true;
	r->content_length = n;
	return 0;
}

/* Connection: a comma-separated list of tokens; close and keep-alive matter. */
static void
field_connection(bool *close, bool *ka, const char *v, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (http_ieq(v + s, e - s, "close"))
			*close = true;
		else if (http_ieq(v + s, e - s, "keep-alive"))
			*ka = true;
	}
}

static int
parse_field(struct http_parser *p, const char *line, size_t len, uint32_t base)
{
	struct http_request *r = &p->req;
	size_t i = 0, vs, ve;
	const char *v;

	if (line[0] == ' ' || line[0] == '\t')
		return -400; /* obs-fold */
	while (i < len && (cclass[(uint8_t)line[i]] & C_TCHAR))
		i++;
	if (i == 0 || i == len || line[i] != ':')
		return -400; /* empty name, whitespace before the colon, no colon */
	vs = i + 1;
	while (vs < len && (line[vs] == ' ' || line[vs] == '\t'))
		vs++;
	ve = len;
	while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
		ve--;
	for (size_t k = vs; k < ve; k++)
		if (!(cclass[(uint8_t)line[k]] & C_VALUE))
			return -400;
	v = line + vs;
	switch (i) {
	case 4:
		if (http_ieq(line, 4, "host")) {
			p->host_count++;
			r->host.off = base + (uint32_t)vs;
			r->host.len = (uint32_t)(ve - vs);
		}
		break;
	case 5:
		if (http_ieq(line, 5, "range")) {
			r->range.off = base + (uint32_t)vs;
			r->range.len = (uint32_t)(ve - vs);
		}
		break;
	case 6:
		if (http_ieq(line, 6, "expect")) {
			if (http_ieq(v, ve - vs, "100-continue"))
				r->expect_continue = true;
			else
				p->bad_expect = true;
		}
		break;
	case 10:
		if (http_ieq(line, 10, "connection"))
			field_connection(&p->tok_close, &p->tok_ka, v, ve - vs);
		break;
	case 14:
		if (http_ieq(line, 14, "content-length"))
			return field_content_length(r, v, ve - vs);
		break;
	case 17:
		if (http_ieq(line, 17, "transfer-encoding")) {
			p->te_count++;
			if (!http_ieq(v, ve - vs, "chunked"))
				p->bad_te = true;
		} else if (http_ieq(line, 17, "if-modified-since")) {
			r->if_modified_since.off = base + (uint32_t)vs;
			r->if_modified_since.len = (uint32_t)(ve - vs);
		}
		break;
	default:
		break;
	}
	return 0;
}

/* The head is complete: the checks that need every field. */
static int
finish_head(struct http_parser *p, const struct http_limits *lim)
{
	struct http_request *r = &p->req;

	if (p->te_count > 0) {
		/* TE in 1.0, TE with Content-Length, anything but one "chunked": a peer could
		 * frame it differently, so it is refused, not guessed at. */
		if (r->minor == 0 || p->bad_te || p->te_count > 1 || r->has_length)
			return -400;
		r->chunked = true;
	}
	if (p->host_count > 1 || (r->minor == 1 && p->host_count == 0))
		return -400;
	if (p->bad_expect)
		return -417;
	if (r->has_length && r->content_length > lim->max_body)
		return -413;
	r->keep_alive = r->minor == 1 ? !p->tok_close : (p->tok_ka && !p->tok_close);
	return 0;
}

int
http_parse_head(struct http_parser *p, const char *buf, size_t len, const struct http_limits *lim)
{
	struct http_request *r = &p->req;
	int rc = 0;

	while (p->state != ST_DONE) {
		const char *s = buf + p->pos;
		size_t avail = len - p->pos, ll;
		const char *lf = memchr(s, '\n', avail);

		if (lf == NULL) {
			/* Incomplete line: still within the limits? */
			if (p->state == ST_LINE && p->pos + avail > (size_t)lim->max_line + 1)
				rc = -414;
			else if (p->state == ST_FIELDS &&
				 p->hdr_bytes + avail > (size_t)lim->max_header_bytes)
				rc = -431;
			break;
		}
		ll = (size_t)(lf - s);
		/* The limits first, as for an incomplete line, so that where the bytes were cut
		 * never changes the answer. */
		if (p->state == ST_LINE && p->pos + ll > (size_t)lim->max_line + 1) {
			rc = -414;
			break;
		}
		if (p->state == ST_FIELDS && p->hdr_bytes + ll > (size_t)lim->max_header_bytes) {
			rc = -431;
			break;
		}
		if (ll == 0 || s[ll - 1] != '\r') {
			rc = -400; /* bare LF */
			break;
		}
		ll--; /* without CR; a CR inside a line fails the character checks */
		if (p->state == ST_LINE) {
			/* Empty lines before it count towards the request line's limit. */
			p->pos += (uint32_t)ll + 2;
			if (ll == 0)
				continue; /* empty lines before a request are ignored (RFC 9112 2.2)
					   */
			rc = parse_request_line(p, s, ll, (uint32_t)(s - buf));
			if (rc != 0)
				break;
			p->state = ST_FIELDS;
			continue;
		}
		p->hdr_bytes += (uint32_t)ll + 2;
		if (p->hdr_bytes > lim->max_header_bytes) {
			rc = -431;
			break;
		}
		p->pos += (uint32_t)ll + 2;
		if (ll == 0) {
			rc = finish_head(p, lim);
			if (rc != 0)
				break;
			p->state = ST_DONE;
			r->head_len = p->pos;
			break;
		}
		if (++r->fields > lim->max_fields) {
			rc = -431;
			break;
		}
		rc = parse_field(p, s, ll, (uint32_t)(s - buf));
		if (rc != 0)
			break;
	}
	if (rc != 0)
		return rc;
	return p->state == ST_DONE ? (int)r->head_len : 0;
}

/* ---- body ---- */

enum {
	B_LENGTH = 0,
	B_SIZE,	     /* first hex digit of a chunk size */
	B_SIZE_MORE, /* more digits, ';' or CR */
	B_EXT,	     /* chunk extension up to CR */
	B_SIZE_LF,
	B_DATA,
	B_DATA_CR,
	B_DATA_LF,
	B_TRAILER_START,
	B_TRAILER,
	B_TRAILER_LF,
	B_END_LF,
};

/* Longest chunk-size line (digits and extensions) accepted. */
#define CHUNK_LINE_MAX 4096

bool
http_body_init(struct http_body *b, const struct http_request *r)
{
	memset(b, 0, sizeof(*b));
	if (r->chunked) {
		b->state = B_SIZE;
		return true;
	}
	b->state = B_LENGTH;
	b->left = r->has_length ? r->content_length : 0;
	return b->left > 0;
}

static int
hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
http_body_feed(struct http_body *b, const char *buf, size_t len, size_t *used,
	       const struct http_limits *lim)
{
	size_t i = 0;
	int rc = 0;

	while (i < len && rc == 0) {
		uint8_t c = (uint8_t)buf[i];
		size_t n;
		int h;

		switch (b->state) {
		case B_LENGTH:
		case B_DATA:
			n = len - i < b->left ? len - i : (size_t)b->left;
			b->left -= n;
			i += n;
			if (b->left == 0) {
				if (b->state == B_LENGTH)
					rc = 1;
				else
					b->state = B_DATA_CR;
			}
			continue;
		case B_SIZE:
		case B_SIZE_MORE:
			h = hexval(c);
			if (h >= 0) {
				if (++b->digits > 15)
					rc = -413;
				b->left = b->left << 4 | (unsigned)h;
				b->state = B_SIZE_MORE;
			} else if (b->state == B_SIZE) {
				rc = -400;
			} else if (c == ';') {
				b->state = B_EXT;
			} else if (c == '\r') {
				b->state = B_SIZE_LF;
			} else {
				rc = -400;
			}
			break;
		case B_EXT:
			if (c == '\r')
				b->state = B_SIZE_LF;
			else if (!(cclass[c] & C_VALUE))
				rc = -400;
			break;
		case B_SIZE_LF:
			if (c != '\n') {
				rc = -400;
				break;
			}
			b->total += b->left;
			if (b->total > lim->max_body) {
				rc = -413;
				break;
			}
			b->line = 0;
			b->digits = 0;
			b->state = b->left == 0 ? B_TRAILER_START : B_DATA;
			break;
		case B_DATA_CR:
			/* Anything but CRLF here: the chunk was longer than its size said. */
			rc = c == '\r' ? (b->state = B_DATA_LF, 0) : -400;
			break;
		case B_DATA_LF:
			rc = c == '\n' ? (b->state = B_SIZE, 0) : -400;
			break;
		case B_TRAILER_START:
			if (c == '\r')
				b->state = B_END_LF;
			else if (c == ' ' || c == '\t' || !(cclass[c] & C_TCHAR))
				rc = -400;
			else
				b->state = B_TRAILER;
			break;
		case B_TRAILER:
			if (c == '\r')
				b->state = B_TRAILER_LF;
			else if (!(cclass[c] & C_VALUE) && c != ':')
				rc = -400;
			break;
		case B_TRAILER_LF:
			rc = c == '\n' ? (b->state = B_TRAILER_START, 0) : -400;
			break;
		case B_END_LF:
			rc = c == '\n' ? 1 : -400;
			break;
		default:
			rc = -400;
			break;
		}
		if (b->state != B_DATA && b->state != B_LENGTH &&
		    ++b->line >
			(b->state >= B_TRAILER_START ? lim->max_header_bytes : CHUNK_LINE_MAX))
			rc = b->state >= B_TRAILER_START ? -431 : -400;
		i++;
	}
	*used = i;
	return rc;
}

/* ---- %-decoding and dates ---- */

int
http_pct_decode(const char *in, size_t len, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -1;
			hi = hexval((uint8_t)in[i + 1]);
			lo = hexval((uint8_t)in[i + 2]);
			if (hi < 0 || lo < 0 || (hi | lo) == 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return (int)o;
}

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void
http_date_format(int64_t t, char out[30])
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	memcpy(out, wdays[tm.tm_wday], 3);
	out[3] = ',';
	out[4] = ' ';
	out[5] = (char)('0' + tm.tm_mday / 10);
	out[6] = (char)('0' + tm.tm_mday % 10);
	out[7] = ' ';
	memcpy(out + 8, months[tm.tm_mon], 3);
	out[11] = ' ';
	unsigned y = (unsigned)(tm.tm_year + 1900) % 10000;
	out[12] = (char)('0' + y / 1000);
	out[13] = (char)('0' + y / 100 % 10);
	out[14] = (char)('0' + y / 10 % 10);
	out[15] = (char)('0' + y % 10);
	out[16] = ' ';
	out[17] = (char)('0' + tm.tm_hour / 10);
	out[18] = (char)('0' + tm.tm_hour % 10);
	out[19] = ':';
	out[20] = (char)('0' + tm.tm_min / 10);
	out[21] = (char)('0' + tm.tm_min % 10);
	out[22] = ':';
	out[23] = (char)('0' + tm.tm_sec / 10);
	out[24] = (char)('0' + tm.tm_sec % 10);
	memcpy(out + 25, " GMT", 5);
}

static int
two_digits(const char *s)
{
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
		return -1;
	return (s[0] - '0') * 10 + (s[1] - '0');
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int
days_in_month(int y, unsigned mon)
{
	static const uint8_t dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return dim[mon] + (mon == 1 && leap);
}

int
http_date_parse(const char *s, size_t len, int64_t *out)
{
	int day, yh, yl, hh, mm, ss;
	unsigned mon;

	/* IMF-fixdate only: "Sun, 06 Nov 1994 08:49:37 GMT". The obsolete formats a server
	 * must also accept are not: a date that does not parse makes the condition false. */
	if (len != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
	    s[16] != ' ' || s[19] != ':' || s[22] != ':' || memcmp(s + 25, " GMT", 4) != 0)
		return -1;
	for (mon = 0; mon < 12; mon++)
		if (memcmp(s + 8, months[mon], 3) == 0)
			break;
	day = two_digits(s + 5);
	yh = two_digits(s + 12);
	yl = two_digits(s + 14);
	hh = two_digits(s + 17);
	mm = two_digits(s + 20);
	ss = two_digits(s + 23);
	if (mon == 12 || yh < 0 || yl < 0 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 ||
	    ss > 59 || day < 1 || day > days_in_month(yh * 100 + yl, mon))
		return -1;
	*out = days_from_civil(yh * 100 + yl, mon + 1, (unsigned)day) * 86400 + hh * 3600 +
	       mm * 60 + ss;
	return 0;
}

/* A scan of the head, for the fields the parser does not keep. */
size_t
http_header_value(const char *head, size_t len, const char *name, const char **out)
{
	size_t nl = strlen(name);
	const char *p = memchr(head, '\n', len), *end = head + len;

	while (p != NULL && ++p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *v;

		if (eol == NULL)
			break;
		if ((size_t)(eol - p) > nl && p[nl] == ':' && http_ieq(p, nl, name)) {
			v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			while (eol > v && (eol[-1] == '\r' || eol[-1] == ' ' || eol[-1] == '\t'))
				eol--;
			*out = v;
			return (size_t)(eol - v);
		}
		p = eol;
	}
	return 0;
}
