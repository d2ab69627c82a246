/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the lib/eal log suites (eal_log, eal_log_sink, eal_log_thread): components to
 * log with, stderr captured into err_text, files in a private temporary directory.
 */
#ifndef LOG_UT_H
#define LOG_UT_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ut_cunit.h"

#include "cr_eal.h"
#include "cr_log.h"
#include "eal_internal.h"

#define OUT_MAX (1 << 20)

__attribute__((unused)) static struct cr_log_component lib_a = {"lib.a", CR_LOG_NOTICE, NULL};
__attribute__((unused)) static struct cr_log_component lib_b = {"lib.b", CR_LOG_NOTICE, NULL};

static char *err_text;

/* ---- capturing stderr ---- */

struct capture {
	int saved;
	FILE *tmp;
};

static inline void
capture_begin(struct capture *c)
{
	fflush(NULL);
	c->tmp = tmpfile();
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->tmp);
	c->saved = dup(STDERR_FILENO);
	dup2(fileno(c->tmp), STDERR_FILENO);
}

static inline void
capture_end(struct capture *c)
{
	size_t n;

	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	rewind(c->tmp);
	n = fread(err_text, 1, OUT_MAX - 1, c->tmp);
	err_text[n] = '\0';
	fclose(c->tmp);
}

static inline int
level_of(const struct cr_log_component *c)
{
	return atomic_load(&c->level);
}

/* ---- files ---- */

static char tmpdir[64];

static inline void
path_in_tmp(char *buf, size_t len, const char *name)
{
	if (tmpdir[0] == '\0') {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/eal_log_ut.XXXXXX");
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
	}
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* The whole of @p path into err_text ("" if it does not exist). */
static inline const char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(err_text, 1, OUT_MAX - 1, f);
		fclose(f);
	}
	err_text[n] = '\0';
	return err_text;
}

static inline unsigned
count_lines(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static inline int
log_suite_init(void)
{
	err_text = malloc(OUT_MAX);
	return err_text == NULL;
}

static inline int
log_suite_fini(void)
{
	cr_log_stop();
	if (tmpdir[0] != '\0')
		rmdir(tmpdir);
	free(err_text);
	return 0;
}

#endif /* LOG_UT_H */
