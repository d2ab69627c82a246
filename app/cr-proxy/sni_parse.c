/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The server_name of a TLS ClientHello, read without OpenSSL from the first bytes a client
 * sent (RFC 8446 4.1.2 and 4.2, RFC 6066 3), for SNI passthrough: the bytes are only
 * looked at, never changed, and the backend gets them as they came.
 *
 * The hello may come in several handshake records, each cut anywhere by TCP. Each call
 * looks at everything received so far: it walks the record headers (a few bytes each) and
 * only once the whole ClientHello is in does it gather the records' payloads into the
 * caller's scratch buffer and parse it. Every length is checked against what holds it;
 * anything that is not a ClientHello is PX_SNI_BAD.
 */
#include <string.h>

#include "sni_parse.h"

#define REC_HANDSHAKE	22
#define REC_HEADER	5
#define REC_MAX		(16384u + 2048u) /* a TLSPlaintext record is at most 2^14 */
#define HS_CLIENT_HELLO 1
#define HS_HEADER	4
#define EXT_SERVER_NAME 0
#define NAME_HOST	0

struct rd {
	const uint8_t *p;
	size_t n;
	bool bad;
};

static unsigned
u8(struct rd *r)
{
	if (r->n < 1) {
		r->bad = true;
		return 0;
	}
	r->n--;
	return *r->p++;
}

static unsigned
u16(struct rd *r)
{
	unsigned hi = u8(r);

	return hi << 8 | u8(r);
}

/* A sub-reader over the next @p len bytes, which @p r skips. */
static struct rd
sub(struct rd *r, size_t len)
{
	struct rd s = {r->p, len, r->bad || len > r->n};

	if (s.bad) {
		r->bad = true;
		s.n = 0;
		return s;
	}
	r->p += len;
	r->n -= len;
	return s;
}

/*
 * Walk the records in @p buf: the handshake bytes they carry so far in *@p hs_len, the
 * ClientHello's whole length (header included) in *@p need once its header is in (0
 * before). @return false if the records are not handshake records of a TLS hello.
 */
static bool
walk(const uint8_t *buf, size_t len, size_t *hs_len, size_t *need)
{
	size_t off = 0;
	uint8_t head[HS_HEADER];

	*hs_len = 0;
	*need = 0;
	while (off + REC_HEADER <= len) {
		const uint8_t *h = buf + off;
		size_t rlen = (size_t)h[3] << 8 | h[4];
		size_t got = len - off - REC_HEADER < rlen ? len - off - REC_HEADER : rlen;
		size_t i;

		if (h[0] != REC_HANDSHAKE || h[1] != 3 || rlen == 0 || rlen > REC_MAX)
			return false;
		for (i = 0; i < got && *hs_len + i < HS_HEADER; i++)
			head[*hs_len + i] = h[REC_HEADER + i];
		*hs_len += got;
		if (*need == 0 && *hs_len >= HS_HEADER) {
			if (head[0] != HS_CLIENT_HELLO)
				return false;
			*need =
			    HS_HEADER + ((size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3]);
		}
		if (got < rlen || (*need != 0 && *hs_len >= *need))
			return true;
		off += REC_HEADER + rlen;
	}
	/* Checked as far as it came: a partial record header says nothing yet. */
	if (off < len && buf[off] != REC_HANDSHAKE)
		return false;
	if (off + 1 < len && buf[off + 1] != 3)
		return false;
	return true;
}

/* Gather @p need handshake bytes from the records of @p buf into @p out. */
static void
gather(const uint8_t *buf, uint8_t *out, size_t need)
{
	size_t off = 0, have = 0;

	while (have < need) {
		size_t rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		size_t n = rlen < need - have ? rlen : need - have;

		memcpy(out + have, buf + off + REC_HEADER, n);
		have += n;
		off += REC_HEADER + rlen;
	}
}

/* The host_name of a server_name extension's data. */
static enum px_sni_result
server_name(struct rd *ext, char *name, size_t cap)
{
	struct rd list = sub(ext, u16(ext));

	while (!list.bad && list.n > 0) {
		unsigned type = u8(&list);
		struct rd host = sub(&list, u16(&list));
		size_t i;

		if (list.bad)
			break;
		if (type != NAME_HOST)
			continue;
		if (host.n == 0 || host.n >= cap)
			return PX_SNI_BAD;
		for (i = 0; i < host.n; i++) {
			uint8_t c = host.p[i];

			/* A DNS name: printable, no NUL, no space (RFC 6066: ASCII). */
			if (c <= 0x20 || c >= 0x7f)
				return PX_SNI_BAD;
			name[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
		}
		name[host.n] = '\0';
		return PX_SNI_FOUND;
	}
	return list.bad ? PX_SNI_BAD : PX_SNI_NONE;
}

/* A whole ClientHello body (after its 4-byte header). */
static enum px_sni_result
client_hello(struct rd *r, char *name, size_t cap)
{
	struct rd exts;

	(void)u16(r);	      /* legacy_version */
	(void)sub(r, 32);     /* random */
	(void)sub(r, u8(r));  /* legacy_session_id */
	(void)sub(r, u16(r)); /* cipher_suites */
	(void)sub(r, u8(r));  /* legacy_compression_methods */
	if (r->bad)
		return PX_SNI_BAD;
	if (r->n == 0)
		return PX_SNI_NONE; /* a TLS 1.2 hello may have no extensions at all */
	exts = sub(r, u16(r));
	if (r->bad || r->n != 0)
		return PX_SNI_BAD;
	while (exts.n > 0) {
		unsigned type = u16(&exts);
		struct rd ext = sub(&exts, u16(&exts));

		if (exts.bad)
			return PX_SNI_BAD;
		if (type == EXT_SERVER_NAME)
			return server_name(&ext, name, cap);
	}
	return PX_SNI_NONE;
}

enum px_sni_result
px_sni_parse(const uint8_t *buf, size_t len, uint8_t *scratch, size_t scratch_len, char *name,
	     size_t cap)
{
	size_t hs_len, need;
	struct rd r;

	if (!walk(buf, len, &hs_len, &need))
		return PX_SNI_BAD;
	if (need > PX_SNI_MAX)
		return PX_SNI_BAD; /* a hello bigger than we would wait for */
	if (need == 0 || hs_len < need)
		return len >= PX_SNI_MAX ? PX_SNI_BAD : PX_SNI_MORE;
	if (need > scratch_len)
		return PX_SNI_BAD;
	gather(buf, scratch, need);
	r.p = scratch + HS_HEADER;
	r.n = need - HS_HEADER;
	r.bad = false;
	return client_hello(&r, name, cap);
}

const char *
px_sni_result_name(enum px_sni_result r)
{
	static const char *const names[] = {
	    [PX_SNI_MORE] = "more",
	    [PX_SNI_FOUND] = "found",
	    [PX_SNI_NONE] = "none",
	    [PX_SNI_BAD] = "bad",
	};

	return names[r];
}
