/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Commands: the registry, request parsing and dispatch, /help, and running a handler's
 * work on an lcore.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "telemetry_internal.h"

struct command {
	char name[CR_TELEMETRY_CMD_LEN];
	char help[CR_TELEMETRY_HELP_LEN];
	cr_telemetry_cmd_fn fn;
};

static int cmd_help(const char *cmd, const char *params, struct cr_json *reply);

/* Built-ins come first in /help and cannot be registered over. */
static const struct command builtins[] = {
	{"/help", "list the commands with their help; /help,CMD for one", cmd_help},
	{"/info", "app name, pid, version, io driver, lcores, socket and metrics address",
	 cr__tel_cmd_info},
	{"/lcores", "each lcore: id, cpu, numa node, state, incarnation", cr__tel_cmd_lcores},
	{"/stats", "counters per lcore and totals; /stats,ID for one lcore", cr__tel_cmd_stats},
	{"/pool/resize", "/pool/resize,N: start or retire lcores until N are running",
	 cr__tel_cmd_pool_resize},
	{"/lcore/retire", "/lcore/retire,ID: retire lcore ID (it finishes what it holds first)",
	 cr__tel_cmd_lcore_retire},
	{"/lcore/start", "/lcore/start,ID: start OFFLINE lcore ID again", cr__tel_cmd_lcore_start},
	{"/histograms", "each histogram summed over the lcores: count, sum_ns, buckets",
	 cr__tel_cmd_histograms},
	{"/log", "where log lines go, and lines dropped per lcore (full log buffer)",
	 cr__tel_cmd_log},
	{"/log/reopen", "reopen the --log-file (after logrotate moved it) or the syslog socket",
	 cr__tel_cmd_log_reopen},
};

/* Registration is rare and may come from any thread; dispatch holds the lock only to find
 * a handler, never while it runs, so a handler may register commands. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct command commands[CR_TELEMETRY_MAX_COMMANDS];
static unsigned n_commands;

bool
cr__tel_cmd_name_ok(const char *name)
{
	size_t i, n;

	if (name == NULL || name[0] != '/')
		return false;
	n = strlen(name);
	if (n < 2 || n >= CR_TELEMETRY_CMD_LEN)
		return false;
	for (i = 1; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '/' || c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* Under reg_lock, or for built-ins only when @p registered is false. */
static const struct command *
find(const char *name, bool registered)
{
	unsigned i;

	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i].name, name) == 0)
			return &builtins[i];
	for (i = 0; registered && i < n_commands; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int
cr_telemetry_register(const char *cmd, cr_telemetry_cmd_fn fn, const char *help)
{
	struct command *c;
	int rc = 0;

	if (!cr__tel_cmd_name_ok(cmd) || fn == NULL)
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	if (find(cmd, true) != NULL) {
		rc = -EEXIST;
		goto out_unlock;
	}
	if (n_commands == CR_TELEMETRY_MAX_COMMANDS) {
		rc = -ENOSPC;
		goto out_unlock;
	}
	c = &commands[n_commands++];
	snprintf(c->name, sizeof(c->name), "%s", cmd);
	snprintf(c->help, sizeof(c->help), "%s", help != NULL ? help : "");
	c->fn = fn;
out_unlock:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

static int
cmd_help(const char *cmd, const char *params, struct cr_json *reply)
{
	const struct command *c;
	unsigned i;

	(void)cmd;
	pthread_mutex_lock(&reg_lock);
	if (params[0] != '\0') {
		c = find(params, true);
		if (c != NULL)
			cr_json_string(reply, NULL, c->help);
		pthread_mutex_unlock(&reg_lock);
		if (c == NULL)
			return cr_json_errorf(reply, -ENOENT, "no command '%s'", params);
		return 0;
	}
	cr_json_object_begin(reply, NULL);
	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		cr_json_string(reply, builtins[i].name, builtins[i].help);
	for (i = 0; i < n_commands; i++)
		cr_json_string(reply, commands[i].name, commands[i].help);
	cr_json_object_end(reply);
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

static void reply_error(struct cr_json *reply, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Throw away whatever was written and answer {"error": "..."}. */
static void
reply_error(struct cr_json *reply, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cr_json_init(reply, reply->buf, reply->cap);
	cr_json_object_begin(reply, NULL);
	cr_json_string(reply, "error", msg);
	cr_json_object_end(reply);
}

/* The request as a C string with a trailing "\r\n" or "\n" cut; -EINVAL if it holds a
 * NUL or a control character, -E2BIG if too long. */
static int
request_text(const char *line, size_t n, char *out)
{
	size_t i;

	if (n > 0 && line[n - 1] == '\n')
		n--;
	if (n > 0 && line[n - 1] == '\r')
		n--;
	if (n > CR_TELEMETRY_MAX_REQUEST)
		return -E2BIG;
	for (i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			return -EINVAL;
	memcpy(out, line, n);
	out[n] = '\0';
	return 0;
}

static void
run_handler(cr_telemetry_cmd_fn fn, const char *name, const char *params, struct cr_json *reply)
{
	char errmsg[sizeof(reply->errmsg)];
	int rc;

	cr_json_object_begin(reply, NULL);
	cr__json_key(reply, name);
	rc = fn(name, params, reply);
	if (rc < 0) {
		snprintf(errmsg, sizeof(errmsg), "%s", cr__json_errmsg(reply));
		if (errmsg[0] == '\0')
			snprintf(errmsg, sizeof(errmsg), "%s", cr_strerror(rc));
		reply_error(reply, "%s: %s", name, errmsg);
		return;
	}
	/* A handler that wrote nothing answers null. */
	if (reply->key_pending && reply->depth == 1)
		cr_json_null(reply, NULL);
	cr_json_object_end(reply);
	rc = cr_json_finish(reply);
	if (rc == -ENOSPC)
		reply_error(reply, "%s: reply longer than %zu bytes", name, reply->cap - 1);
	else if (rc != 0)
		reply_error(reply, "%s: the handler wrote invalid JSON", name);
}

void
cr__tel_dispatch(const char *line, size_t n, struct cr_json *reply)
{
	char req[CR_TELEMETRY_MAX_REQUEST + 1], name[CR_TELEMETRY_CMD_LEN];
	const struct command *c;
	cr_telemetry_cmd_fn fn = NULL;
	const char *params;
	size_t len;
	int rc;

	rc = request_text(line, n, req);
	if (rc == -E2BIG) {
		reply_error(reply, "request longer than %d bytes", CR_TELEMETRY_MAX_REQUEST);
		return;
	}
	if (rc != 0) {
		reply_error(reply, "request holds control characters");
		return;
	}
	if (req[0] == '\0') {
		reply_error(reply, "empty request; try /help");
		return;
	}
	params = strchr(req, ',');
	len = params != NULL ? (size_t)(params - req) : strlen(req);
	params = params != NULL ? params + 1 : "";
	if (req[0] != '/') {
		reply_error(reply, "'%.*s' is not a command: commands start with '/'; try /help",
			    (int)len, req);
		return;
	}
	if (len < sizeof(name)) {
		memcpy(name, req, len);
		name[len] = '\0';
		pthread_mutex_lock(&reg_lock);
		c = find(name, true);
		if (c != NULL)
			fn = c->fn;
		pthread_mutex_unlock(&reg_lock);
	}
	if (fn == NULL) {
		reply_error(reply, "unknown command '%.*s'; try /help", (int)len, req);
		return;
	}
	run_handler(fn, name, params, reply);
}

/* ---- running work on an lcore ---- */

enum { CALL_PENDING, CALL_RUNNING, CALL_DONE, CALL_WITHDRAWN };

/* Shared by the waiter and the message; the last of the two to let go frees it. */
struct call_env {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	_Atomic int state;
	_Atomic int refs;
	cr_msg_fn fn;
	void *arg;
};

static void
env_put(struct call_env *e)
{
	/* acq_rel: the last owner sees every write the other made before letting go. */
	if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

/* On the target lcore. The lock is held only to publish DONE, never across fn. */
static void
call_on_lcore(void *arg)
{
	struct call_env *e = arg;
	int expected = CALL_PENDING;

	/* acq_rel: pairs with the CAS in wait_call(); exactly one of RUNNING and WITHDRAWN
	 * wins. */
	if (atomic_compare_exchange_strong_explicit(&e->state, &expected, CALL_RUNNING,
						    memory_order_acq_rel, memory_order_acquire)) {
		e->fn(e->arg);
		pthread_mutex_lock(&e->mu);
		/* release: pairs with the acquire load in wait_call() */
		atomic_store_explicit(&e->state, CALL_DONE, memory_order_release);
		pthread_cond_signal(&e->cv);
		pthread_mutex_unlock(&e->mu);
	}
	env_put(e);
}

static int
wait_call(struct call_env *e, uint64_t timeout_ns)
{
	struct timespec dl;
	uint64_t at;
	int st, rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	at = (uint64_t)dl.tv_sec * 1000000000u + (uint64_t)dl.tv_nsec;
	at = timeout_ns > UINT64_MAX - at ? UINT64_MAX / 2 : at + timeout_ns;
	dl.tv_sec = (time_t)(at / 1000000000u);
	dl.tv_nsec = (long)(at % 1000000000u);
	pthread_mutex_lock(&e->mu);
	while ((st = atomic_load_explicit(&e->state, memory_order_acquire)) != CALL_DONE) {
		int expected = CALL_PENDING;

		if (st == CALL_RUNNING) {
			/* Started: it runs to completion soon (rule 2), so wait it out. */
			pthread_cond_wait(&e->cv, &e->mu);
			continue;
		}
		if (pthread_cond_timedwait(&e->cv, &e->mu, &dl) != ETIMEDOUT)
			continue;
		if (atomic_compare_exchange_strong_explicit(&e->state, &expected, CALL_WITHDRAWN,
							    memory_order_acq_rel,
							    memory_order_acquire)) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int
cr_telemetry_call_on(unsigned lcore, cr_msg_fn fn, void *arg, uint64_t timeout_ns)
{
	pthread_condattr_t ca;
	struct call_env *e;
	int rc;

	if (cr_lcore_id() != CR_LCORE_NONE)
		return -EPERM;
	if (fn == NULL)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cv, &ca);
	pthread_condattr_destroy(&ca);
	e->fn = fn;
	e->arg = arg;
	atomic_init(&e->state, CALL_PENDING);
	atomic_init(&e->refs, 2);
	rc = cr_send(lcore, call_on_lcore, e);
	if (rc != 0) {
		/* Not accepted: the message will never run, so the waiter's ref is the last;
		 * relaxed: no other thread ever saw e. */
		atomic_store_explicit(&e->refs, 1, memory_order_relaxed);
		env_put(e);
		return rc;
	}
	rc = wait_call(e, timeout_ns);
	env_put(e);
	return rc;
}
