/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for app/cr-kv/resp.c, the RESP2 request parser.
 *
 * The input is fed to the parser as a connection would feed it: in pieces (sizes drawn
 * from the input's first byte), appended to a query buffer that is compacted between
 * requests as cr-kv does. Checked: every argument lies inside the buffer and is
 * NUL-terminated there; the parser never reports a command with no arguments; and for
 * inputs below the 64 KiB inline limit, the commands and the final outcome do not depend
 * on how the input was split (one piece or many).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../app/cr-kv/resp.h"

#define MAX_BULK (1024 * 1024)

struct outcome {
	uint64_t hash; /* of every command's arguments, in order */
	unsigned commands;
	int last;     /* RESP_NEED_MORE or RESP_ERROR */
	char err[64]; /* the error text, if any ("" for out of memory) */
};

static uint64_t
mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static void
run(const uint8_t *data, size_t size, unsigned seed, struct outcome *o)
{
	struct resp_parser p;
	char *buf = NULL;
	size_t len = 0, cap = 0, pos = 0, off = 0;
	uint32_t rng = seed * 2654435761u + 1;

	memset(o, 0, sizeof(*o));
	o->hash = 0xcbf29ce484222325ULL;
	resp_parser_init(&p, MAX_BULK);
	while (off < size) {
		size_t piece = size - off;
		const char *err;
		int r;

		if (seed != 0) {
			rng = rng * 1103515245u + 12345u;
			piece = 1 + (rng >> 16) % 64;
			if (piece > size - off)
				piece = size - off;
		}
		if (len + piece + 1 > cap) {
			cap = (len + piece + 1) * 2;
			buf = realloc(buf, cap);
			if (buf == NULL)
				abort();
		}
		memcpy(buf + len, data + off, piece);
		len += piece;
		off += piece;
		while ((r = resp_parse(&p, buf, len, &pos, &err)) == RESP_COMMAND) {
			uint32_t i;

			if (p.argc == 0)
				abort();
			for (i = 0; i < p.argc; i++) {
				if (p.argv[i].off + p.argv[i].len >= len ||
				    buf[p.argv[i].off + p.argv[i].len] != '\0')
					abort();
				o->hash = mix(o->hash, &p.argv[i].len, sizeof(p.argv[i].len));
				o->hash = mix(o->hash, buf + p.argv[i].off, p.argv[i].len);
			}
			o->commands++;
		}
		o->last = r;
		if (r == RESP_ERROR) {
			if (err != NULL)
				memcpy(o->err, err, p.errlen < 63 ? p.errlen : 63);
			break;
		}
		if (pos > len)
			abort();
		{
			size_t keep = resp_parser_keep(&p, pos);

			if (keep > pos)
				abort();
			memmove(buf, buf + keep, len - keep);
			len -= keep;
			pos -= keep;
			resp_parser_shift(&p, keep);
		}
	}
	resp_parser_fini(&p);
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, pieces;

	if (size == 0)
		return 0;
	run(data + 1, size - 1, 0, &whole);
	run(data + 1, size - 1, data[0] | 1u, &pieces);
	if (size < 32 * 1024) {
		if (whole.commands != pieces.commands || whole.hash != pieces.hash ||
		    whole.last != pieces.last)
			abort();
		if (memcmp(whole.err, pieces.err, sizeof(whole.err)) != 0)
			abort();
	}
	return 0;
}
