/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FUNCTION, answering as Redis 7.0 does with no function loaded (cr-kv has no FUNCTION
 * LOAD), and CONFIG REWRITE, which has no file to write (cr-kv takes no config file).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

KV_CMD(function_flush)
{
	if (x->argc > 3) {
		rb_errorf(x->out,
			  "ERR unknown subcommand or wrong number of arguments for '%.128s'. Try "
			  "FUNCTION HELP.",
			  x->argv[1].p);
		return;
	}
	if (x->argc == 3 && strcasecmp(x->argv[2].p, "sync") != 0 &&
	    strcasecmp(x->argv[2].p, "async") != 0) {
		rb_error(x->out, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
		return;
	}
	rb_ok(x->out); /* nothing to delete */
}

KV_CMD(function_list)
{
	bool code = false, lib = false;
	uint32_t i;

	for (i = 2; i < x->argc; i++) {
		if (!code && strcasecmp(x->argv[i].p, "withcode") == 0) {
			code = true;
			continue;
		}
		if (!lib && strcasecmp(x->argv[i].p, "libraryname") == 0) {
			if (i >= x->argc - 1) {
				rb_error(x->out, "ERR library name argument was not given");
				return;
			}
			lib = true;
			i++;
			continue;
		}
		rb_errorf(x->out, "ERR Unknown argument %s", x->argv[i].p);
		return;
	}
	rb_array(x->out, 0); /* no library */
}

/* Written in the client's protocol (resp3.c leaves it as it is): a map in RESP3. */
KV_CMD(function_stats)
{
	bool r3 = x->kc->resp == 3;

	rb_raw(x->out, r3 ? "%2\r\n" : "*4\r\n", 4);
	rb_bulkstr(x->out, "running_script");
	rb_raw(x->out, r3 ? "_\r\n" : "$-1\r\n", r3 ? 3 : 5);
	rb_bulkstr(x->out, "engines");
	rb_raw(x->out, r3 ? "%1\r\n" : "*2\r\n", 4);
	rb_bulkstr(x->out, "LUA");
	rb_raw(x->out, r3 ? "%2\r\n" : "*4\r\n", 4);
	rb_bulkstr(x->out, "libraries_count");
	rb_int(x->out, 0);
	rb_bulkstr(x->out, "functions_count");
	rb_int(x->out, 0);
}

/* The payload of no library: RDB version 10, then the CRC64 of those two bytes. */
KV_CMD(function_dump)
{
	static const char empty[] = {0x0a, 0x00, 0x5d, (char)0x9b, 0x5c,
				     0x40, 0x0f, 0x7f, (char)0xa2, (char)0xda};

	rb_bulk(x->out, empty, sizeof(empty));
}

KV_CMD(function_kill)
{
	rb_error(x->out, "NOTBUSY No scripts in execution right now.");
}

KV_CMD(function_delete)
{
	rb_error(x->out, "ERR Library not found");
}

KV_CMD(function_help)
{
	static const char *const l[] = {
	    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "DELETE <LIBRARY NAME>",
	    "    Delete the given library.",
	    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
	    "    Return general information on all the libraries:",
	    "    * Library name",
	    "    * The engine used to run the Library",
	    "    * Library description",
	    "    * Functions list",
	    "    * Library code (if WITHCODE is given)",
	    "    It also possible to get only function that matches a pattern using LIBRARYNAME "
	    "argument.",
	    "STATS",
	    "    Return information about the current function running:",
	    "    * Function name",
	    "    * Command used to run the function",
	    "    * Duration in MS that the function is running",
	    "    If no function is running, return nil",
	    "    In addition, returns a list of available engines.",
	    "KILL",
	    "    Kill the current running function.",
	    "FLUSH [ASYNC|SYNC]",
	    "    Delete all the libraries.",
	    "    When called without the optional mode argument, the behavior is determined by the",
	    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	    "    * ASYNC: Asynchronously flush the libraries.",
	    "    * SYNC: Synchronously flush the libraries.",
	    "DUMP",
	    "    Return a serialized payload representing the current libraries, can be restored "
	    "using FUNCTION RESTORE command",
	    "HELP",
	    "    Prints this help.",
	    NULL};

	kv_reply_help(x, l);
}

KV_CMD(config_rewrite)
{
	rb_error(x->out, "ERR The server is running without a config file");
}
