/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Logging with one component per library ("lib.reactor", "drv.uring") and levels
 * settable at run time. A disabled level costs one relaxed load.
 */
#ifndef CR_LOG_H
#define CR_LOG_H

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Levels, syslog numbering. */
enum cr_log_level {
	CR_LOG_ERR = 3,
	CR_LOG_WARNING = 4,
	CR_LOG_NOTICE = 5,
	CR_LOG_INFO = 6,
	CR_LOG_DEBUG = 7,
};

/** A log component; define with CR_LOG_COMPONENT(). */
struct cr_log_component {
	const char *name;
	_Atomic int level;
	struct cr_log_component *next; /* private: registry link */
};

/**
 * Register @p c (done by CR_LOG_COMPONENT at load time) and give it the level that
 * earlier cr_log_set_level() calls set for its name. Registering twice is harmless.
 * @p c must stay valid for the rest of the process.
 */
void cr_log_register(struct cr_log_component *c);

/**
 * Define a static component @p var named @p name, default level NOTICE (or the level
 * set for it or for all components by an earlier cr_log_set_level()).
 */
#define CR_LOG_COMPONENT(var, name)                                                        \
	static struct cr_log_component var = {name, CR_LOG_NOTICE, NULL};                  \
	__attribute__((constructor)) static void var##_register(void)                      \
	{                                                                                  \
		cr_log_register(&var);                                                     \
	}

/**
 * printf-style log line "<name>: <level>: text\n" to stderr, written with one write(2)
 * so lines from different threads do not interleave; a trailing newline in @p fmt is not
 * doubled, a line longer than 1 KiB is truncated. Nothing is written if @p level is above
 * the component's level. Keeps errno. Any thread.
 */
void cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define CR_LOG(c, lvl, ...)                                                                \
	do {                                                                               \
		if (atomic_load_explicit(&(c).level, memory_order_relaxed) >= CR_LOG_##lvl) \
			cr_log_write(&(c), CR_LOG_##lvl, __VA_ARGS__);                     \
	} while (0)

/**
 * Set levels from a spec: "LEVEL" for every component, or "PATTERN:LEVEL" where PATTERN
 * is a component name or a prefix ending in '*' ("lib.*:debug"); several specs may be
 * joined with ',' and applied in order, so a later spec wins. LEVEL is err, warning,
 * notice, info, debug (case-insensitive; "error" and "warn" too) or 3..7.
 * Specs are remembered for components registered later (the last 16 patterns; a spec for
 * every component forgets the earlier ones). Control path; any thread.
 * @return 0 or -EINVAL (empty element, bad level, pattern of 64+ characters, more than 16
 *         elements; nothing changed).
 */
int cr_log_set_level(const char *spec);

/** Parse a level name or number; @return the level or -EINVAL. */
int cr_log_parse_level(const char *s);

#ifdef __cplusplus
}
#endif
#endif /* CR_LOG_H */
