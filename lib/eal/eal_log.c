/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Log components, run-time levels and the line formatter (eal_log_sink.c writes lines,
 * eal_log_thread.c buffers them for the log thread).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cr_log.h"
#include "eal_internal.h"

/*
 * Specs are remembered so that a component registered later (a library loaded after the
 * options were parsed) still gets the level the user asked for. A handful is plenty.
 */
#define MAX_SPECS   16
#define PATTERN_MAX 64

struct level_spec {
	char pattern[PATTERN_MAX]; /* "" = every component */
	int level;
};

/* Control path only: registration and level changes. cr_log_write() takes no lock. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cr_log_component *components;
static struct level_spec specs[MAX_SPECS];
static unsigned n_specs;

static const char *const level_names[] = {
	[CR_LOG_ERR] = "err",
	[CR_LOG_WARNING] = "warning",
	[CR_LOG_NOTICE] = "notice",
	[CR_LOG_INFO] = "info",
	[CR_LOG_DEBUG] = "debug",
};
_Static_assert(sizeof(level_names) / sizeof(level_names[0]) == CR_LOG_DEBUG + 1,
	       "one name per level");

struct cr_log_component cr__eal_log = {"lib.eal", CR_LOG_NOTICE, NULL};

__attribute__((constructor)) static void
eal_log_register(void)
{
	cr_log_register(&cr__eal_log);
}

static bool
pattern_matches(const char *pattern, const char *name)
{
	size_t n = strlen(pattern);

	if (n == 0)
		return true;
	if (pattern[n - 1] == '*')
		return strncmp(pattern, name, n - 1) == 0;
	return strcmp(pattern, name) == 0;
}

/* Under log_lock. */
static void
apply_spec(struct cr_log_component *c, const struct level_spec *sp)
{
	/* relaxed: pairs with the relaxed load in CR_LOG(); a level is a hint, not a fence. */
	if (pattern_matches(sp->pattern, c->name))
		atomic_store_explicit(&c->level, sp->level, memory_order_relaxed);
}

/* Under log_lock. */
static void
drop_spec(unsigned i)
{
	memmove(&specs[i], &specs[i + 1], (n_specs - i - 1) * sizeof(specs[0]));
	n_specs--;
}

/* Under log_lock. Keeps the list in the order specs must be replayed. */
static void
remember_spec(const struct level_spec *sp)
{
	/* A spec for every component overrides all earlier ones. */
	if (sp->pattern[0] == '\0')
		n_specs = 0;
	for (unsigned i = 0; i < n_specs; i++) {
		if (strcmp(specs[i].pattern, sp->pattern) == 0) {
			drop_spec(i);
			break;
		}
	}
	if (n_specs == MAX_SPECS)
		drop_spec(0);
	specs[n_specs++] = *sp;
}

void
cr_log_register(struct cr_log_component *c)
{
	pthread_mutex_lock(&log_lock);
	for (struct cr_log_component *it = components; it != NULL; it = it->next) {
		if (it == c)
			goto out_unlock;
	}
	for (unsigned i = 0; i < n_specs; i++)
		apply_spec(c, &specs[i]);
	c->next = components;
	components = c;
out_unlock:
	pthread_mutex_unlock(&log_lock);
}

int
cr_log_parse_level(const char *s)
{
	static const struct {
		const char *name;
		int level;
	} aliases[] = {
		{"error", CR_LOG_ERR},
		{"warn", CR_LOG_WARNING},
	};

	if (s == NULL)
		return -EINVAL;
	if (s[0] >= '0' + CR_LOG_ERR && s[0] <= '0' + CR_LOG_DEBUG && s[1] == '\0')
		return s[0] - '0';
	for (int l = CR_LOG_ERR; l <= CR_LOG_DEBUG; l++) {
		if (strcasecmp(s, level_names[l]) == 0)
			return l;
	}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (strcasecmp(s, aliases[i].name) == 0)
			return aliases[i].level;
	}
	return -EINVAL;
}

/* One element of a spec, [el, el + n): "LEVEL" or "PATTERN:LEVEL". */
static int
parse_spec(const char *el, size_t n, struct level_spec *out)
{
	const char *colon = memchr(el, ':', n);
	size_t plen = colon != NULL ? (size_t)(colon - el) : 0;
	const char *lvl = colon != NULL ? colon + 1 : el;
	char level[16];
	size_t llen = n - (size_t)(lvl - el);

	if (colon != NULL && (plen == 0 || plen >= PATTERN_MAX))
		return -EINVAL;
	if (llen == 0 || llen >= sizeof(level))
		return -EINVAL;
	memcpy(level, lvl, llen);
	level[llen] = '\0';
	out->level = cr_log_parse_level(level);
	if (out->level < 0)
		return -EINVAL;
	memcpy(out->pattern, el, plen);
	out->pattern[plen] = '\0';
	return 0;
}

int
cr_log_set_level(const char *spec)
{
	struct level_spec parsed[MAX_SPECS];
	unsigned n = 0;
	const char *el = spec;

	if (spec == NULL)
		return -EINVAL;
	/* Parse everything first so that a bad spec changes nothing. */
	for (;;) {
		size_t len = strcspn(el, ",");

		if (n == MAX_SPECS || parse_spec(el, len, &parsed[n]) != 0)
			return -EINVAL;
		n++;
		if (el[len] == '\0')
			break;
		el += len + 1;
	}

	pthread_mutex_lock(&log_lock);
	for (unsigned i = 0; i < n; i++) {
		remember_spec(&parsed[i]);
		for (struct cr_log_component *c = components; c != NULL; c = c->next)
			apply_spec(c, &parsed[i]);
	}
	pthread_mutex_unlock(&log_lock);
	return 0;
}

static const char *
level_name(int level)
{
	if (level < CR_LOG_ERR)
		return level_names[CR_LOG_ERR];
	if (level > CR_LOG_DEBUG)
		return level_names[CR_LOG_DEBUG];
	return level_names[level];
}

/*
 * Formats one whole line, "<time> <name>: <level>: text\n", always with its timestamp:
 * the sink leaves it out (cr_log_set_timestamps(false), syslog) by starting at *body. The
 * caller sees a long line truncated rather than split.
 */
static size_t
format_line(char *buf, size_t len, const struct cr_log_component *c, int level, size_t *body,
	    const char *fmt, va_list ap)
{
	size_t ts = cr__log_timestamp(buf, len);
	int pre = snprintf(buf + ts, len - ts, "%s: %s: ", c->name, level_name(level));
	size_t n = pre > 0 && (size_t)pre < len - ts ? ts + (size_t)pre : ts;
	int text = vsnprintf(buf + n, len - n, fmt, ap);

	*body = ts;
	if (text > 0)
		n += (size_t)text < len - n ? (size_t)text : len - n - 1;
	/* Leave room for the newline; callers may or may not end fmt with one. */
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > len - 2)
		n = len - 2;
	buf[n++] = '\n';
	buf[n] = '\0';
	return n;
}

void
cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
{
	char line[CR__LOG_LINE_MAX];
	int saved_errno = errno;
	va_list ap;
	size_t n, body;

	if (atomic_load_explicit(&c->level, memory_order_relaxed) < level)
		return;
	va_start(ap, fmt);
	n = format_line(line, sizeof(line), c, level, &body, fmt, ap);
	va_end(ap);
	cr__log_emit(line, n, body, level);
	/* Callers often log right after a failed call and then look at errno. */
	errno = saved_errno;
}

const char *
cr__log_level_name(int level)
{
	return level_name(level);
}
