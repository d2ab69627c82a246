/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Capturing what a call prints on stdout or stderr, for suites that check the one-line
 * error reports: the descriptor is pointed at a temporary file for the duration.
 */
#ifndef UT_CAPTURE_H
#define UT_CAPTURE_H

#include <stdio.h>
#include <unistd.h>

#include "ut_cunit.h"

#define UT_CAPTURE_MAX 8192

struct ut_capture {
	int fd;
	int saved;
	FILE *tmp;
};

static inline void
ut_capture_begin(struct ut_capture *c, int fd)
{
	fflush(NULL);
	c->fd = fd;
	c->tmp = tmpfile();
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->tmp);
	c->saved = dup(fd);
	dup2(fileno(c->tmp), fd);
}

/* Restore the descriptor; @p text (UT_CAPTURE_MAX bytes) receives what was printed. */
static inline void
ut_capture_end(struct ut_capture *c, char *text)
{
	size_t n;

	fflush(NULL);
	dup2(c->saved, c->fd);
	close(c->saved);
	rewind(c->tmp);
	n = fread(text, 1, UT_CAPTURE_MAX - 1, c->tmp);
	text[n] = '\0';
	fclose(c->tmp);
}

static inline unsigned
ut_count_lines(const char *s)
{
	unsigned n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

#endif /* UT_CAPTURE_H */
