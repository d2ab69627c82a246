/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for app/cr-proxy/sni_parse.c, the ClientHello reader of SNI passthrough.
 *
 * The input is what a client sent, looked at as a connection would grow it: every prefix
 * at split points drawn from the input's first byte, each in a heap copy of its exact size
 * (so a read past it is ASan's). Checked: once a prefix is decided (not PX_SNI_MORE), every
 * longer one gets the same answer and the same name; a name is NUL-ended within its
 * buffer, lower case, printable, without spaces; nothing is decided MORE past 16 KiB.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../app/cr-proxy/sni_parse.h"

static uint8_t scratch[PX_SNI_MAX];

static enum px_sni_result
parse_copy(const uint8_t *data, size_t n, char *name)
{
	uint8_t *c = malloc(n != 0 ? n : 1);
	enum px_sni_result r;

	memcpy(c, data, n);
	r = px_sni_parse(c, n, scratch, sizeof(scratch), name, PX_SNI_NAME_MAX);
	free(c);
	return r;
}

static void
check_name(const char *name)
{
	size_t i, n = strnlen(name, PX_SNI_NAME_MAX);

	if (n == 0 || n == PX_SNI_NAME_MAX)
		abort();
	for (i = 0; i < n; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7f || (name[i] >= 'A' && name[i] <= 'Z'))
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[PX_SNI_NAME_MAX], first_name[PX_SNI_NAME_MAX] = "";
	enum px_sni_result first = PX_SNI_MORE, r;
	size_t step, n;

	if (size < 1)
		return 0;
	step = 1 + data[0] % 64;
	data++;
	size--;
	for (n = 0;; n = n + step < size ? n + step : size) {
		name[0] = '\0';
		r = parse_copy(data, n, name);
		if (r == PX_SNI_MORE && n >= PX_SNI_MAX)
			abort();
		if (r == PX_SNI_FOUND)
			check_name(name);
		if (first != PX_SNI_MORE &&
		    (r != first || (r == PX_SNI_FOUND && strcmp(name, first_name) != 0)))
			abort(); /* a decision changed with more bytes */
		if (first == PX_SNI_MORE && r != PX_SNI_MORE) {
			first = r;
			strcpy(first_name, name);
		}
		if (n == size)
			break;
	}
	return 0;
}
