/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The log as telemetry sees it: lines each lcore dropped (a reader), where lines go
 * (/log), and reopening the log file for log rotation (/log/reopen).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "telemetry_internal.h"

static int
read_dropped(unsigned lcore, uint64_t *out, void *arg)
{
	(void)arg;
	*out = cr_log_dropped(lcore);
	return 0;
}

__attribute__((constructor)) static void
register_log_reader(void)
{
	cr_telemetry_reader_register_prom(
	    "log_dropped_lines", CR_TELEMETRY_COUNTER,
	    "Log lines dropped because the lcore's log buffer was full.",
	    &(struct cr_telemetry_prom){"log_dropped_lines"}, read_dropped, NULL);
}

static const char *
sink_name(enum cr_log_sink_kind k)
{
	return k == CR_LOG_SINK_FILE ? "file" : k == CR_LOG_SINK_SYSLOG ? "syslog" : "stderr";
}

static void
write_sink(struct cr_json *reply)
{
	char where[PATH_MAX];
	enum cr_log_sink_kind k = cr_log_sink(where, sizeof(where));

	cr_json_string(reply, "sink", sink_name(k));
	if (k == CR_LOG_SINK_FILE)
		cr_json_string(reply, "path", where);
	else if (k == CR_LOG_SINK_SYSLOG)
		cr_json_string(reply, "ident", where);
}

int
cr__tel_cmd_log(const char *cmd, const char *params, struct cr_json *reply)
{
	char key[16];
	unsigned id;

	(void)cmd;
	if (params[0] != '\0')
		return cr_json_errorf(reply, -EINVAL, "takes no parameters, got '%s'", params);
	cr_json_object_begin(reply, NULL);
	write_sink(reply);
	cr_json_bool(reply, "timestamps", cr_log_timestamps());
	/* Per lcore: only lcores buffer their lines. */
	cr_json_object_begin(reply, "dropped_lines");
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		snprintf(key, sizeof(key), "%u", id);
		cr_json_u64(reply, key, cr_log_dropped(id));
	}
	cr_json_object_end(reply);
	cr_json_object_end(reply);
	return 0;
}

int
cr__tel_cmd_log_reopen(const char *cmd, const char *params, struct cr_json *reply)
{
	int rc;

	(void)cmd;
	if (params[0] != '\0')
		return cr_json_errorf(reply, -EINVAL, "takes no parameters, got '%s'", params);
	rc = cr_log_reopen();
	if (rc != 0)
		return cr_json_errorf(reply, rc,
				      "cannot reopen the log: %s; still writing to "
				      "the old one",
				      cr_strerror(rc));
	cr_json_object_begin(reply, NULL);
	write_sink(reply);
	cr_json_bool(reply, "reopened", true);
	cr_json_object_end(reply);
	return 0;
}
