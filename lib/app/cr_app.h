/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The application framework: cr_app_run() owns the whole life of an appliance process —
 * options (the common ones, --config FILE, the telemetry ones and the app's own, one help
 * text), lib/net sizing, signals, the runtime, telemetry, the app's start callbacks on the
 * main lcore and on every lcore incarnation, the ordered stop, and the exit status — and
 * cr_lcore_local gives each lcore incarnation its own NUMA-local state.
 *
 * A TCP server is a connection table, a start callback that listens, and a struct cr_app:
 * see doc/examples/upper/main.c and doc/guides/getting-started.md.
 *
 * Order of events in cr_app_run():
 *  1. the soft descriptor limit is raised to the hard one (RLIMIT_NOFILE); options:
 *     defaults, then the --config file's lines, then the command line (which overrides
 *     the file); --help / --version print and return 0;
 *  2. configure(): the app checks what depends on several options, sizes app->net
 *     (cr_app_conns_fit() gives a connection limit that fits the descriptors),
 *     registers lcore-locals, telemetry counters and commands; one line on stderr when
 *     app->net's connection slots do not fit the descriptor limit;
 *  3. lib/net is sized from app->net; SIGINT, SIGTERM, SIGUSR1 (and SIGHUP with a
 *     reload callback) are blocked in every thread but lib/app's signal thread;
 *  4. the runtime starts (cr_reactor_init()): on each lcore the modules start (lib/app's
 *     first: the lcore-locals are created and their init runs), then lcore_init();
 *  5. the signal thread and telemetry (cr_telemetry_start() and cr_telemetry_announce());
 *  6. lcore_start() on each lcore in its first turn; once every lcore ran it, start() on
 *     the main lcore, whose loop is running;
 *  7. at the first SIGINT/SIGTERM, stop() on the main lcore (or cr_reactor_stop()); a
 *     second one forces the shutdown (cr_shutdown_force());
 *  8. every lcore: retire() / shutdown() when it starts closing, lcore_stop() at its end,
 *     then the modules stop (lib/app's last: lcore-local fini); the same at each retire;
 *  9. cr_telemetry_stop(), cr_reactor_fini(), then fini() on the calling thread.
 *
 * Exit status (the return value): 0; 1 when something failed (a callback, the runtime,
 * telemetry, cr_app_fail()); 2 only for a bad option or value (including a --config file
 * line and an --io-driver that cannot run here).
 */
#ifndef CR_APP_H
#define CR_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_eal.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cr_net_config;
struct cr_timer;

/**
 * What an app tells cr_app_run(). Every callback may be NULL and gets @c arg. A callback
 * that returns an error prints the one line that says what failed first
 * (cr_app_errorf() does both); lib/app adds nothing to it.
 */
struct cr_app {
	/** Program name: prefix of every message, telemetry socket name, --help. */
	const char *name;
	/** One line for --help. */
	const char *summary;
	/**
	 * The app's own options (struct cr_opt, cr_eal.h); cr_app_run() adds --config and
	 * the telemetry options after them. Setters run in file order, then command-line
	 * order; cr_app_opt_where() tells them which. May be NULL.
	 */
	const struct cr_opt *opts;
	unsigned n_opts;
	/** Positional words for the usage line, e.g. "FILE..."; NULL: a word is an error. */
	const char *args;
	/**
	 * lib/net's per-lcore sizing: filled with lib/net's defaults before the options are
	 * parsed (so setters and configure() may write into it), handed to
	 * cr_net_configure() before the lcores start. NULL: lib/net keeps its defaults (or
	 * is not linked in).
	 */
	struct cr_net_config *net;
	/**
	 * After the options, before anything starts; on the calling thread. @p argc / @p argv:
	 * the positional words (argc 0 without). @return 0; -EINVAL for a bad option or
	 * combination (exit 2); another -errno (exit 1).
	 */
	int (*configure)(int argc, char **argv, void *arg);
	/**
	 * On every lcore, at each of its starts — every incarnation, those a resize starts
	 * included — after its lcore-locals are created and before it joins the placement
	 * pool (state STARTING): the reactor's on_lcore_start. For state other lcores may
	 * reach at once (timers, leases, a shard's queues); no sockets yet (lib/net opens
	 * them on RUNNING lcores only). An error makes the app stop with exit status 1.
	 */
	int (*lcore_init)(unsigned lcore, void *arg);
	/**
	 * On every lcore, at each of its starts (every incarnation), in its first turn:
	 * RUNNING, lib/net open for it. For per-lcore duties that do I/O — a UDP socket, an
	 * outbound connection — which so come back when a resize starts the lcore again. An
	 * error makes the app stop with exit status 1.
	 */
	int (*lcore_start)(unsigned lcore, void *arg);
	/**
	 * On the main lcore, once, after every lcore the runtime started ran lcore_start;
	 * signals and telemetry are up. For what is done once: listen (lib/net gives lcores
	 * started later their own socket), print the ready line. An error stops the app
	 * (exit 1).
	 */
	int (*start)(void *arg);
	/** struct cr_reactor_hooks' on_retire: the lcore starts retiring. */
	void (*retire)(unsigned lcore, void *arg);
	/** struct cr_reactor_hooks' on_shutdown: the lcore starts shutting down. */
	void (*shutdown)(unsigned lcore, void *arg);
	/**
	 * On every lcore at the end of each incarnation, after its last message ran (sends
	 * fail from here), before lib/net closes what is left and before the lcore-locals'
	 * fini.
	 */
	void (*lcore_stop)(unsigned lcore, void *arg);
	/**
	 * On a closing lcore (retiring or shutting down), a pure predicate: while true, it
	 * does not close — the app still has work there that other lcores wait for (a
	 * message a full mailbox refused, kept to be sent again). Its timers and deferred
	 * tasks keep running meanwhile. @p forced: the shutdown timeout passed; return true
	 * only for what must still finish. NULL: never busy.
	 */
	bool (*lcore_busy)(unsigned lcore, bool forced, void *arg);
	/**
	 * struct cr_reactor_hooks' on_timer_dropped / on_poller_dropped: what an lcore left
	 * armed when it stopped, cancelled by the reactor. NULL: they are counted in a log line.
	 */
	void (*timer_dropped)(unsigned lcore, struct cr_timer *t, void *arg);
	void (*poller_dropped)(unsigned lcore, int (*fn)(void *), void *poller_arg, void *arg);
	/**
	 * On the main lcore at the first SIGINT/SIGTERM: begin the app's own graceful stop
	 * and call cr_reactor_stop() when it is done. NULL: cr_reactor_stop() at once.
	 */
	void (*stop)(void *arg);
	/** SIGHUP, on lib/app's signal thread (not an lcore). NULL: SIGHUP is not taken. */
	void (*reload)(void *arg);
	/**
	 * SIGUSR1, on the signal thread, after lib/app reopened the log sink (cr_log_reopen(),
	 * for logrotate): reopen files of the app's own. NULL: the log sink only.
	 */
	void (*reopen_logs)(void *arg);
	/**
	 * On the calling thread after the runtime stopped and was freed (also after a failed
	 * start, once configure() succeeded): print totals, free what configure() made.
	 * @p failed: the exit status is 1 already. @return 0, or non-zero for exit status 1.
	 */
	int (*fini)(bool failed, void *arg);
	void *arg;
};

/**
 * Run @p app: the whole life of the process (see the file comment), from the options to
 * the exit status. Call once per process, from main(), with main's arguments.
 * @param app not copied: it (and its option table) must stay valid during the call.
 * @return the exit status: 0, 1 (a failure, reported on stderr) or 2 (a bad option or
 *         value, reported in one line naming it and what is accepted).
 */
int cr_app_run(const struct cr_app *app, int argc, char **argv);

/**
 * Print "<app>: " and the formatted line on stderr, flushed, and return @p err: the
 * one-line report of a failing callback, `return cr_app_errorf(rc, "--listen %s: %s", ...)`.
 * Any thread.
 */
int cr_app_errorf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Stop the runtime (cr_reactor_stop()) with exit status 1. Any thread, any time. */
void cr_app_fail(void);

/** The running app's name, or NULL outside cr_app_run(). */
const char *cr_app_name(void);

/** The common options as parsed (--shutdown-timeout etc.); from configure() on. */
const struct cr_eal_config *cr_app_eal_config(void);

/** The lcores the options chose; from configure() on. */
const struct cr_lcore_table *cr_app_lcore_table(void);

/**
 * Connection slots per lcore that fit the descriptor limit: (RLIMIT_NOFILE - 64) / the
 * number of lcores, at most 4096 and at least 64. cr_app_run() raised the soft limit to
 * the hard one before the options, so this is the limit the process runs with. For the
 * default of an app's connection limit; from configure() on.
 */
uint32_t cr_app_conns_fit(void);

/**
 * The app admits at most @p n connections over all its lcores (as cr-kv's maxclients),
 * fewer than its lib/net slots: the descriptor check after configure() counts these
 * instead. 0: no such bound. From configure().
 */
void cr_app_conns_limit(uint64_t n);

/** The --config file's path, or NULL without one; from configure() on. */
const char *cr_app_config_path(void);

/**
 * Inside an option setter: "FILE:LINE" when the value comes from the --config file, NULL
 * when it comes from the command line. For options that add up (a repeated --backend)
 * and must tell the two apart. Only the setter's own thread, during the call.
 */
const char *cr_app_opt_where(void);

/**
 * Read the --config file again, applying only the keys in @p opts (long names as
 * the file uses them) through their setters: a reload (SIGHUP). Keys that are other
 * options of the app are skipped (they take effect at a restart); an unknown key, or a
 * value a setter refuses, is an error in the start-up format, and the reading stops there
 * (lines before it have been applied: setters of a reload should collect into a scratch
 * copy and commit after success). Control path (the reload callback's thread).
 * @return 0; -ENOENT no --config was given; -EINVAL a bad line (reported); -errno the file
 *         cannot be read (reported).
 */
int cr_app_config_reload(const struct cr_opt *opts, unsigned n_opts);

/**
 * An option setter for a socket address ("HOST:PORT", as cr_net_addr_parse() takes it)
 * into the struct cr_net_addr at @p ctx. @return 0 or -EINVAL.
 */
int cr_app_set_addr(const char *val, void *ctx);

/**
 * The usual --listen option for struct cr_app's table: the address goes to @p addr (a
 * struct cr_net_addr *, whose len stays 0 when the option is not given); @p help is its
 * line in --help.
 */
#define CR_APP_OPT_LISTEN(addr, help)                                                        \
	{                                                                                    \
		"listen", 0, "HOST:PORT", help,                                              \
		    "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT; " \
		    "port 0-65535",                                                          \
		    cr_app_set_addr, (addr)                                                  \
	}

/* ---- per-lcore state ---- */

/** Set up one lcore's copy (zeroed, NUMA-local); on that lcore. @return 0 or -errno. */
typedef int (*cr_lcore_local_init_fn)(void *mem, unsigned lcore, void *arg);
/** Tear down one lcore's copy before its memory goes; on that lcore. */
typedef void (*cr_lcore_local_fini_fn)(void *mem, unsigned lcore, void *arg);

/** Most cr_lcore_local_register() calls per process. */
#define CR_LCORE_LOCAL_MAX 32

/**
 * Register per-lcore state of @p size bytes: on every lcore, at each start (every
 * incarnation), a zeroed, 64-byte aligned block on the lcore's NUMA node is made and
 * @p init runs on it — before the lcore's other modules (lib/io, lib/net) start and before
 * struct cr_app's lcore_init, so init sets up memory (and timers, leases) only; I/O
 * belongs in lcore_start. At the end of each
 * incarnation @p fini runs: after the app's lcore_stop and after lib/net closed what was
 * left, so connection callbacks always find their state. @p fini disarms the timers in the
 * block; the memory stays mapped until the lcore's next start (or the end of the run), so
 * one left armed is cancelled safely by the reactor, which then reports it
 * (timer_dropped). Blocks
 * are created in registration order and destroyed in the reverse order. An init that
 * fails makes the lcore's start fail (cr_reactor_init() or cr_lcore_start()).
 *
 * Control path, before the runtime starts (e.g. in configure()).
 * @param init, fini may be NULL.
 * @return an id for cr_lcore_local(); -EINVAL size 0; -EBUSY lcores are running;
 *         -ENOSPC CR_LCORE_LOCAL_MAX reached.
 */
int cr_lcore_local_register(size_t size, cr_lcore_local_init_fn init, cr_lcore_local_fini_fn fini,
			    void *arg);

/**
 * The calling lcore's block of @p id (for its current incarnation), or NULL off an lcore,
 * outside the block's lifetime or for a bad id. Lcore only; cheap (a thread-local load).
 */
void *cr_lcore_local(int id);

#ifdef __cplusplus
}
#endif
#endif /* CR_APP_H */
