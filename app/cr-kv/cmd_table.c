/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command table: Redis 7.0's names, arities, flags and key positions, and how each
 * command is routed across shards. Lookup is case-insensitive through a small hash
 * index built at load time.
 */
#include <ctype.h>
#include <string.h>

#include "kv.h"
#include "script.h"

#define W  KV_WRITE
#define R  KV_READONLY
#define M  KV_DENYOOM
#define F  KV_FAST
#define LS (KV_LOADING | KV_STALE)

/* .stat: a slot per command and subcommand, numbered as the table is compiled. */
#define CMD(n, a, fl, route, merge, f, l, s, fn, pre, grp, sum)                                    \
	{                                                                                          \
		n, a, fl, route, merge, f, l, s, fn, pre, NULL, grp, sum, .stat = __COUNTER__ + 1 \
	}
/* A command over several keys that must be atomic: one transaction over their shards. */
#define CMDX(n, a, fl, f, l, s, fn, pre, grp, sum, keys, multi)                            \
	{                                                                                  \
		n, a, fl, KV_ROUTE_MULTI, 0, f, l, s, fn, pre, NULL, grp, sum, keys, multi, \
		    .stat = __COUNTER__ + 1                                                \
	}

static const struct kv_cmd command_subs[] = {
    CMD("command|count", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_command_count, NULL, "server",
	"Get total number of Redis commands"),
    CMD("command|docs", -2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_command_docs, NULL, "server",
	"Get array of specific Redis command documentation"),
    CMD("command|info", -2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_command_info, NULL, "server",
	"Get array of specific Redis command details, or all when no argument is given."),
    CMD("command|list", -2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_command_list, NULL, "server",
	"Get an array of Redis command names"),
    CMD("command|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_command_help, NULL, "server",
	"Show helpful text about the different subcommands"),
    {NULL},
};

static const struct kv_cmd client_subs[] = {
    CMD("client|setname", 3, KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_setname, NULL,
	"connection", "Set the current connection name"),
    CMD("client|getname", 2, KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_getname, NULL,
	"connection", "Get the current connection name"),
    CMD("client|id", 2, KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_id, NULL,
	"connection", "Returns the client ID for the current connection"),
    CMD("client|info", 2, KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_info, NULL,
	"connection", "Returns information about the current client connection."),
    CMD("client|list", -2, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_list,
	NULL, "connection", "Get the list of client connections"),
    CMD("client|kill", -3, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_kill,
	NULL, "connection", "Kill the connection of a client"),
    CMD("client|no-evict", 3, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0,
	cmd_client_no_evict, NULL, "connection",
	"Set client eviction mode for the current connection"),
    CMD("client|reply", 3, KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_reply, NULL,
	"connection", "Instruct the server whether to reply to commands"),
    CMD("client|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_client_help, NULL, "connection",
	"Show helpful text about the different subcommands"),
    {NULL},
};

/* A server with no functions (cmd_admin.c). */
static const struct kv_cmd function_subs[] = {
    CMD("function|delete", 3, W | KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_function_delete,
	NULL, "scripting", "Delete a function by name"),
    CMD("function|dump", 2, KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_function_dump, NULL,
	"scripting", "Dump all functions into a serialized binary payload"),
    CMD("function|flush", -2, W | KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_function_flush, NULL,
	"scripting", "Deleting all functions"),
    CMD("function|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_function_help, NULL, "scripting",
	"Show helpful text about the different subcommands"),
    CMD("function|kill", 2, KV_NOSCRIPT | KV_ALLOW_BUSY, KV_ROUTE_LOCAL, 0, 0, 0, 0,
	cmd_function_kill, NULL, "scripting", "Kill the function currently in execution."),
    CMD("function|list", -2, KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_function_list, NULL,
	"scripting", "List information about all the functions"),
    CMD("function|stats", 2, KV_NOSCRIPT | KV_ALLOW_BUSY, KV_ROUTE_LOCAL, 0, 0, 0, 0,
	cmd_function_stats, NULL, "scripting",
	"Return information about the function currently running (name, description, "
	"duration)"),
    {NULL},
};

static const struct kv_cmd object_subs[] = {
    CMD("object|encoding", 3, R, KV_ROUTE_KEY1, 0, 2, 2, 1, cmd_object_encoding, NULL, "generic",
	"Inspect the internal encoding of a Redis object"),
    CMD("object|freq", 3, R, KV_ROUTE_KEY1, 0, 2, 2, 1, cmd_object_freq, NULL, "generic",
	"Get the logarithmic access frequency counter of a Redis object"),
    CMD("object|idletime", 3, R, KV_ROUTE_KEY1, 0, 2, 2, 1, cmd_object_idletime, NULL, "generic",
	"Get the time since a Redis object was last accessed"),
    CMD("object|refcount", 3, R, KV_ROUTE_KEY1, 0, 2, 2, 1, cmd_object_refcount, NULL, "generic",
	"Get the number of references to the value of the key"),
    CMD("object|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_object_help, NULL, "generic",
	"Show helpful text about the different subcommands"),
    {NULL},
};

/* Every lcore keeps its own slow log: GET, LEN and RESET run on each (slowlog.h). */
static const struct kv_cmd slowlog_subs[] = {
    CMD("slowlog|get", -2, KV_ADMIN | LS, KV_ROUTE_ALL, KV_MERGE_SLOWLOG, 0, 0, 0, cmd_slowlog_get,
	precheck_slowlog_get, "server", "Get the slow log's entries"),
    CMD("slowlog|len", 2, KV_ADMIN | LS, KV_ROUTE_ALL, KV_MERGE_SLOWLOG, 0, 0, 0, cmd_slowlog_len,
	NULL, "server", "Get the slow log's length"),
    CMD("slowlog|reset", 2, KV_ADMIN | LS, KV_ROUTE_ALL, KV_MERGE_SLOWLOG, 0, 0, 0,
	cmd_slowlog_reset, NULL, "server", "Clear all entries from the slow log"),
    CMD("slowlog|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_slowlog_help, NULL, "server",
	"Show helpful text about the different subcommands"),
    {NULL},
};

static const struct kv_cmd pubsub_subs[] = {
    CMD("pubsub|channels", -2, KV_PUBSUB | LS, KV_ROUTE_ALL, KV_MERGE_PUBSUB, 0, 0, 0,
	cmd_pubsub_channels, precheck_pubsub_channels, "pubsub", "List active channels"),
    CMD("pubsub|numsub", -2, KV_PUBSUB | LS, KV_ROUTE_ALL, KV_MERGE_PUBSUB, 0, 0, 0,
	cmd_pubsub_numsub, NULL, "pubsub", "Get the count of subscribers for channels"),
    CMD("pubsub|numpat", 2, KV_PUBSUB | LS, KV_ROUTE_ALL, KV_MERGE_PUBSUB, 0, 0, 0,
	cmd_pubsub_numpat, NULL, "pubsub",
	"Get the count of unique patterns pattern subscriptions"),
    CMD("pubsub|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_pubsub_help, NULL, "pubsub",
	"Show helpful text about the different subcommands"),
    {NULL},
};

/* Scripting (script_run.c, script_cache.c): the cache is the process's. */
static const struct kv_cmd script_subs[] = {
    CMD("script|load", 3, KV_NOSCRIPT | KV_STALE, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_load, NULL,
	"scripting", "Load the specified Lua script into the script cache."),
    CMD("script|exists", -3, KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_exists, NULL,
	"scripting", "Check existence of scripts in the script cache."),
    CMD("script|flush", -2, KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_flush, NULL,
	"scripting", "Remove all the scripts from the script cache."),
    CMD("script|kill", 2, KV_NOSCRIPT | KV_ALLOW_BUSY, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_kill,
	NULL, "scripting", "Kill the script currently in execution."),
    CMD("script|debug", 3, KV_NOSCRIPT, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_debug, NULL,
	"scripting", "Set the debug mode for executed scripts."),
    CMD("script|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_script_help, NULL, "scripting",
	"Show helpful text about the different subcommands"),
    {NULL},
};

/* EVAL and its kind: their keys are locked and the script runs on the client's lcore. */
#define EVALF (KV_NOSCRIPT | KV_STALE | KV_SKIP_MONITOR | KV_NO_MANDATORY_KEYS | KV_MOVABLEKEYS)
#define EVAL(n, fl, sum)                                                                   \
	{                                                                                  \
		n, -3, fl, KV_ROUTE_SCRIPT, 0, 0, 0, 0, NULL, precheck_eval, NULL, "scripting", \
		    sum, kv_keys_script, kv_script_eval, .stat = __COUNTER__ + 1           \
	}

static const struct kv_cmd config_subs[] = {
    CMD("config|get", -3, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_config_get,
	NULL, "server", "Get the values of configuration parameters"),
    CMD("config|set", -4, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_config_set,
	NULL, "server", "Set configuration parameters to the given values"),
    CMD("config|resetstat", 2, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_ALL, KV_MERGE_RESETSTAT, 0, 0,
	0, cmd_config_resetstat, NULL, "server", "Reset the stats returned by INFO"),
    CMD("config|rewrite", 2, KV_ADMIN | KV_NOSCRIPT | LS, KV_ROUTE_LOCAL, 0, 0, 0, 0,
	cmd_config_rewrite, NULL, "server",
	"Rewrite the configuration file with the in memory configuration"),
    CMD("config|help", 2, LS, KV_ROUTE_LOCAL, 0, 0, 0, 0, cmd_config_help, NULL, "server",
	"Show helpful text about the different subcommands"),
    {NULL},
};

#define K1  KV_ROUTE_KEY1
#define KS  KV_ROUTE_KEYS
#define ALL KV_ROUTE_ALL
#define LOC KV_ROUTE_LOCAL

const struct kv_cmd kv_cmds[] = {
    /* strings */
    CMD("get", 2, R | F, K1, 0, 1, 1, 1, cmd_get, NULL, "string", "Get the value of a key"),
    CMD("set", -3, W | M, K1, 0, 1, 1, 1, cmd_set, NULL, "string", "Set the string value of a key"),
    CMD("setnx", 3, W | M | F, K1, 0, 1, 1, 1, cmd_setnx, NULL, "string",
	"Set the value of a key, only if the key does not exist"),
    CMD("setex", 4, W | M, K1, 0, 1, 1, 1, cmd_setex, NULL, "string",
	"Set the value and expiration of a key"),
    CMD("psetex", 4, W | M, K1, 0, 1, 1, 1, cmd_psetex, NULL, "string",
	"Set the value and expiration in milliseconds of a key"),
    CMD("getset", 3, W | M | F, K1, 0, 1, 1, 1, cmd_getset, NULL, "string",
	"Set the string value of a key and return its old value"),
    CMD("getdel", 2, W | F, K1, 0, 1, 1, 1, cmd_getdel, NULL, "string",
	"Get the value of a key and delete the key"),
    CMD("getex", -2, W | F, K1, 0, 1, 1, 1, cmd_getex, NULL, "string",
	"Get the value of a key and optionally set its expiration"),
    CMD("mget", -2, R | F, KS, KV_MERGE_MGET, 1, -1, 1, cmd_mget, NULL, "string",
	"Get the values of all the given keys"),
    CMD("mset", -3, W | M, KS, KV_MERGE_OK, 1, -1, 2, cmd_mset, precheck_mset, "string",
	"Set multiple keys to multiple values"),
    CMDX("msetnx", -3, W | M, 1, -1, 2, cmd_msetnx_local, precheck_mset, "string",
	 "Set multiple keys to multiple values, only if none of the keys exist", NULL,
	 kv_multi_msetnx),
    CMD("append", 3, W | M | F, K1, 0, 1, 1, 1, cmd_append, NULL, "string",
	"Append a value to a key"),
    CMD("strlen", 2, R | F, K1, 0, 1, 1, 1, cmd_strlen, NULL, "string",
	"Get the length of the value stored in a key"),
    CMD("getrange", 4, R, K1, 0, 1, 1, 1, cmd_getrange, NULL, "string",
	"Get a substring of the string stored at a key"),
    CMD("setrange", 4, W | M, K1, 0, 1, 1, 1, cmd_setrange, NULL, "string",
	"Overwrite part of a string at key starting at the specified offset"),
    CMD("incr", 2, W | M | F, K1, 0, 1, 1, 1, cmd_incr, NULL, "string",
	"Increment the integer value of a key by one"),
    CMD("decr", 2, W | M | F, K1, 0, 1, 1, 1, cmd_decr, NULL, "string",
	"Decrement the integer value of a key by one"),
    CMD("incrby", 3, W | M | F, K1, 0, 1, 1, 1, cmd_incrby, NULL, "string",
	"Increment the integer value of a key by the given amount"),
    CMD("decrby", 3, W | M | F, K1, 0, 1, 1, 1, cmd_decrby, NULL, "string",
	"Decrement the integer value of a key by the given number"),
    CMD("incrbyfloat", 3, W | M | F, K1, 0, 1, 1, 1, cmd_incrbyfloat, NULL, "string",
	"Increment the float value of a key by the given amount"),
    /* keys */
    CMD("del", -2, W, KS, KV_MERGE_SUM, 1, -1, 1, cmd_del, NULL, "generic", "Delete a key"),
    CMD("unlink", -2, W | F, KS, KV_MERGE_SUM, 1, -1, 1, cmd_del, NULL, "generic",
	"Delete a key asynchronously in another thread. Otherwise it is just as DEL, but "
	"non blocking."),
    CMD("exists", -2, R | F, KS, KV_MERGE_SUM, 1, -1, 1, cmd_exists, NULL, "generic",
	"Determine if a key exists"),
    CMD("type", 2, R | F, K1, 0, 1, 1, 1, cmd_type, NULL, "generic",
	"Determine the type stored at key"),
    CMD("expire", -3, W | F, K1, 0, 1, 1, 1, cmd_expire, NULL, "generic",
	"Set a key's time to live in seconds"),
    CMD("pexpire", -3, W | F, K1, 0, 1, 1, 1, cmd_pexpire, NULL, "generic",
	"Set a key's time to live in milliseconds"),
    CMD("expireat", -3, W | F, K1, 0, 1, 1, 1, cmd_expireat, NULL, "generic",
	"Set the expiration for a key as a UNIX timestamp"),
    CMD("pexpireat", -3, W | F, K1, 0, 1, 1, 1, cmd_pexpireat, NULL, "generic",
	"Set the expiration for a key as a UNIX timestamp specified in milliseconds"),
    CMD("ttl", 2, R | F, K1, 0, 1, 1, 1, cmd_ttl, NULL, "generic",
	"Get the time to live for a key in seconds"),
    CMD("pttl", 2, R | F, K1, 0, 1, 1, 1, cmd_pttl, NULL, "generic",
	"Get the time to live for a key in milliseconds"),
    CMD("persist", 2, W | F, K1, 0, 1, 1, 1, cmd_persist, NULL, "generic",
	"Remove the expiration from a key"),
    CMDX("rename", 3, W, 1, 2, 1, cmd_rename_local, NULL, "generic", "Rename a key", NULL,
	 kv_multi_rename),
    CMDX("renamenx", 3, W | F, 1, 2, 1, cmd_rename_local, NULL, "generic",
	 "Rename a key, only if the new key does not exist", NULL, kv_multi_rename),
    CMDX("copy", -3, W | M, 1, 2, 1, cmd_copy_local, NULL, "generic", "Copy a key", NULL,
	 kv_multi_copy),
    CMD("touch", -2, R | F, KS, KV_MERGE_SUM, 1, -1, 1, cmd_touch, NULL, "generic",
	"Alters the last access time of a key(s). Returns the number of existing keys specified."),
    {"object", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, object_subs, "generic",
     "A container for object introspection commands"},
    CMD("keys", 2, R, ALL, KV_MERGE_KEYS, 0, 0, 0, cmd_keys, NULL, "generic",
	"Find all keys matching the given pattern"),
    CMD("scan", -2, R, KV_ROUTE_SCAN, 0, 0, 0, 0, cmd_scan, NULL, "generic",
	"Incrementally iterate the keys space"),
    CMD("dbsize", 1, R | F, ALL, KV_MERGE_SUM, 0, 0, 0, cmd_dbsize, NULL, "server",
	"Return the number of keys in the selected database"),
    CMD("flushdb", -1, W, ALL, KV_MERGE_OK, 0, 0, 0, cmd_flushdb, precheck_flush, "server",
	"Remove all keys from the current database"),
    CMD("flushall", -1, W, ALL, KV_MERGE_OK, 0, 0, 0, cmd_flushdb, precheck_flush, "server",
	"Remove all keys from all databases"),
    CMD("randomkey", 1, R, ALL, KV_MERGE_RANDOM, 0, 0, 0, cmd_randomkey, NULL, "generic",
	"Return a random key from the keyspace"),
    /* hashes */
    CMD("hset", -4, W | M | F, K1, 0, 1, 1, 1, cmd_hset, NULL, "hash",
	"Set the string value of a hash field"),
    CMD("hsetnx", 4, W | M | F, K1, 0, 1, 1, 1, cmd_hsetnx, NULL, "hash",
	"Set the value of a hash field, only if the field does not exist"),
    CMD("hget", 3, R | F, K1, 0, 1, 1, 1, cmd_hget, NULL, "hash", "Get the value of a hash field"),
    CMD("hmset", -4, W | M | F, K1, 0, 1, 1, 1, cmd_hmset, NULL, "hash",
	"Set multiple hash fields to multiple values"),
    CMD("hmget", -3, R | F, K1, 0, 1, 1, 1, cmd_hmget, NULL, "hash",
	"Get the values of all the given hash fields"),
    CMD("hdel", -3, W | F, K1, 0, 1, 1, 1, cmd_hdel, NULL, "hash",
	"Delete one or more hash fields"),
    CMD("hlen", 2, R | F, K1, 0, 1, 1, 1, cmd_hlen, NULL, "hash",
	"Get the number of fields in a hash"),
    CMD("hstrlen", 3, R | F, K1, 0, 1, 1, 1, cmd_hstrlen, NULL, "hash",
	"Get the length of the value of a hash field"),
    CMD("hincrby", 4, W | M | F, K1, 0, 1, 1, 1, cmd_hincrby, NULL, "hash",
	"Increment the integer value of a hash field by the given number"),
    CMD("hincrbyfloat", 4, W | M | F, K1, 0, 1, 1, 1, cmd_hincrbyfloat, NULL, "hash",
	"Increment the float value of a hash field by the given amount"),
    CMD("hkeys", 2, R, K1, 0, 1, 1, 1, cmd_hkeys, NULL, "hash", "Get all the fields in a hash"),
    CMD("hvals", 2, R, K1, 0, 1, 1, 1, cmd_hvals, NULL, "hash", "Get all the values in a hash"),
    CMD("hgetall", 2, R, K1, 0, 1, 1, 1, cmd_hgetall, NULL, "hash",
	"Get all the fields and values in a hash"),
    CMD("hexists", 3, R | F, K1, 0, 1, 1, 1, cmd_hexists, NULL, "hash",
	"Determine if a hash field exists"),
    CMD("hrandfield", -2, R, K1, 0, 1, 1, 1, cmd_hrandfield, NULL, "hash",
	"Get one or multiple random fields from a hash"),
    CMD("hscan", -3, R, K1, 0, 1, 1, 1, cmd_hscan, NULL, "hash",
	"Incrementally iterate hash fields and associated values"),
    /* lists */
    CMDX("lmove", 5, W | M, 1, 2, 1, cmd_lmove, NULL, "list",
	 "Pop an element from a list, push it to another list and return it", NULL, kv_multi_lmove),
    CMDX("rpoplpush", 3, W | M, 1, 2, 1, cmd_rpoplpush, NULL, "list",
	 "Remove the last element in a list, prepend it to another list and return it", NULL,
	 kv_multi_lmove),
    CMDX("lmpop", -4, W | KV_MOVABLEKEYS, 0, 0, 0, cmd_lmpop, NULL, "list",
	 "Pop elements from a list", kv_keys_mpop, kv_multi_mpop),
    CMDX("blpop", -3, W | KV_NOSCRIPT | KV_BLOCKING, 1, -2, 1, cmd_blpop, precheck_bpop, "list",
	 "Remove and get the first element in a list, or block until one is available", NULL, NULL),
    CMDX("brpop", -3, W | KV_NOSCRIPT | KV_BLOCKING, 1, -2, 1, cmd_brpop, precheck_bpop, "list",
	 "Remove and get the last element in a list, or block until one is available", NULL, NULL),
    CMDX("blmove", 6, W | M | KV_NOSCRIPT | KV_BLOCKING, 1, 2, 1, cmd_blmove, precheck_bpop, "list",
	 "Pop an element from a list, push it to another list and return it; or block until one "
	 "is available",
	 NULL, NULL),
    CMDX("brpoplpush", 4, W | M | KV_NOSCRIPT | KV_BLOCKING, 1, 2, 1, cmd_brpoplpush, precheck_bpop,
	 "list",
	 "Pop an element from a list, push it to another list and return it; or block until one "
	 "is available",
	 NULL, NULL),
    CMDX("blmpop", -5, W | KV_BLOCKING | KV_MOVABLEKEYS, 0, 0, 0, cmd_blmpop, precheck_bpop, "list",
	 "Pop elements from a list, or block until one is available", kv_keys_mpop, NULL),
    CMD("lpush", -3, W | M | F, K1, 0, 1, 1, 1, cmd_lpush, NULL, "list",
	"Prepend one or multiple elements to a list"),
    CMD("rpush", -3, W | M | F, K1, 0, 1, 1, 1, cmd_rpush, NULL, "list",
	"Append one or multiple elements to a list"),
    CMD("lpushx", -3, W | M | F, K1, 0, 1, 1, 1, cmd_lpushx, NULL, "list",
	"Prepend an element to a list, only if the list exists"),
    CMD("rpushx", -3, W | M | F, K1, 0, 1, 1, 1, cmd_rpushx, NULL, "list",
	"Append an element to a list, only if the list exists"),
    CMD("lpop", -2, W | F, K1, 0, 1, 1, 1, cmd_lpop, NULL, "list",
	"Remove and get the first elements in a list"),
    CMD("rpop", -2, W | F, K1, 0, 1, 1, 1, cmd_rpop, NULL, "list",
	"Remove and get the last elements in a list"),
    CMD("llen", 2, R | F, K1, 0, 1, 1, 1, cmd_llen, NULL, "list", "Get the length of a list"),
    CMD("lrange", 4, R, K1, 0, 1, 1, 1, cmd_lrange, NULL, "list",
	"Get a range of elements from a list"),
    CMD("lindex", 3, R, K1, 0, 1, 1, 1, cmd_lindex, NULL, "list",
	"Get an element from a list by its index"),
    CMD("lset", 4, W | M, K1, 0, 1, 1, 1, cmd_lset, NULL, "list",
	"Set the value of an element in a list by its index"),
    CMD("linsert", 5, W | M, K1, 0, 1, 1, 1, cmd_linsert, NULL, "list",
	"Insert an element before or after another element in a list"),
    CMD("lrem", 4, W, K1, 0, 1, 1, 1, cmd_lrem, NULL, "list", "Remove elements from a list"),
    CMD("ltrim", 4, W, K1, 0, 1, 1, 1, cmd_ltrim, NULL, "list",
	"Trim a list to the specified range"),
    CMD("lpos", -3, R, K1, 0, 1, 1, 1, cmd_lpos, NULL, "list",
	"Return the index of matching elements on a list"),
    /* sets */
    CMDX("smove", 4, W | F, 1, 2, 1, cmd_smove, NULL, "set",
	 "Move a member from one set to another", NULL, kv_multi_smove),
    CMDX("sinter", -2, R, 1, -1, 1, cmd_sinter, NULL, "set", "Intersect multiple sets", NULL,
	 kv_multi_setop),
    CMDX("sinterstore", -3, W | M, 1, -1, 1, cmd_sinterstore, NULL, "set",
	 "Intersect multiple sets and store the resulting set in a key", NULL, kv_multi_setop),
    CMDX("sintercard", -3, R | KV_MOVABLEKEYS, 0, 0, 0, cmd_sintercard, NULL, "set",
	 "Intersect multiple sets and return the cardinality of the result", kv_keys_sintercard,
	 kv_multi_setop),
    CMDX("sunion", -2, R, 1, -1, 1, cmd_sunion, NULL, "set", "Add multiple sets", NULL,
	 kv_multi_setop),
    CMDX("sunionstore", -3, W | M, 1, -1, 1, cmd_sunionstore, NULL, "set",
	 "Add multiple sets and store the resulting set in a key", NULL, kv_multi_setop),
    CMDX("sdiff", -2, R, 1, -1, 1, cmd_sdiff, NULL, "set", "Subtract multiple sets", NULL,
	 kv_multi_setop),
    CMDX("sdiffstore", -3, W | M, 1, -1, 1, cmd_sdiffstore, NULL, "set",
	 "Subtract multiple sets and store the resulting set in a key", NULL, kv_multi_setop),
    CMD("sadd", -3, W | M | F, K1, 0, 1, 1, 1, cmd_sadd, NULL, "set",
	"Add one or more members to a set"),
    CMD("srem", -3, W | F, K1, 0, 1, 1, 1, cmd_srem, NULL, "set",
	"Remove one or more members from a set"),
    CMD("smembers", 2, R, K1, 0, 1, 1, 1, cmd_smembers, NULL, "set",
	"Get all the members in a set"),
    CMD("sismember", 3, R | F, K1, 0, 1, 1, 1, cmd_sismember, NULL, "set",
	"Determine if a given value is a member of a set"),
    CMD("smismember", -3, R | F, K1, 0, 1, 1, 1, cmd_smismember, NULL, "set",
	"Returns the membership associated with the given elements for a set"),
    CMD("scard", 2, R | F, K1, 0, 1, 1, 1, cmd_scard, NULL, "set",
	"Get the number of members in a set"),
    CMD("spop", -2, W | F, K1, 0, 1, 1, 1, cmd_spop, NULL, "set",
	"Remove and return one or multiple random members from a set"),
    CMD("srandmember", -2, R, K1, 0, 1, 1, 1, cmd_srandmember, NULL, "set",
	"Get one or multiple random members from a set"),
    CMD("sscan", -3, R, K1, 0, 1, 1, 1, cmd_sscan, NULL, "set",
	"Incrementally iterate Set elements"),
    /* sorted sets */
    CMDX("zunion", -3, R | KV_MOVABLEKEYS, 0, 0, 0, cmd_zunion, NULL, "sorted-set",
	 "Add multiple sorted sets", kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zinter", -3, R | KV_MOVABLEKEYS, 0, 0, 0, cmd_zinter, NULL, "sorted-set",
	 "Intersect multiple sorted sets", kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zdiff", -3, R | KV_MOVABLEKEYS, 0, 0, 0, cmd_zdiff, NULL, "sorted-set",
	 "Subtract multiple sorted sets", kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zunionstore", -4, W | M | KV_MOVABLEKEYS, 1, 1, 1, cmd_zunionstore, NULL, "sorted-set",
	 "Add multiple sorted sets and store the resulting sorted set in a new key",
	 kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zinterstore", -4, W | M | KV_MOVABLEKEYS, 1, 1, 1, cmd_zinterstore, NULL, "sorted-set",
	 "Intersect multiple sorted sets and store the resulting sorted set in a new key",
	 kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zdiffstore", -4, W | M | KV_MOVABLEKEYS, 1, 1, 1, cmd_zdiffstore, NULL, "sorted-set",
	 "Subtract multiple sorted sets and store the resulting sorted set in a new key",
	 kv_keys_numkeys, kv_multi_zsetop),
    CMDX("zintercard", -3, R | KV_MOVABLEKEYS, 0, 0, 0, cmd_zintercard, NULL, "sorted-set",
	 "Intersect multiple sorted sets and return the cardinality of the result", kv_keys_numkeys,
	 kv_multi_zsetop),
    CMDX("zrangestore", -5, W | M, 1, 2, 1, cmd_zrangestore, NULL, "sorted-set",
	 "Store a range of members from sorted set into another key", NULL, kv_multi_zrangestore),
    CMD("zadd", -4, W | M | F, K1, 0, 1, 1, 1, cmd_zadd, NULL, "sorted-set",
	"Add one or more members to a sorted set, or update its score if it already exists"),
    CMD("zincrby", 4, W | M | F, K1, 0, 1, 1, 1, cmd_zincrby, NULL, "sorted-set",
	"Increment the score of a member in a sorted set"),
    CMD("zrem", -3, W | F, K1, 0, 1, 1, 1, cmd_zrem, NULL, "sorted-set",
	"Remove one or more members from a sorted set"),
    CMD("zcard", 2, R | F, K1, 0, 1, 1, 1, cmd_zcard, NULL, "sorted-set",
	"Get the number of members in a sorted set"),
    CMD("zscore", 3, R | F, K1, 0, 1, 1, 1, cmd_zscore, NULL, "sorted-set",
	"Get the score associated with the given member in a sorted set"),
    CMD("zmscore", -3, R | F, K1, 0, 1, 1, 1, cmd_zmscore, NULL, "sorted-set",
	"Get the score associated with the given members in a sorted set"),
    CMD("zrank", 3, R | F, K1, 0, 1, 1, 1, cmd_zrank, NULL, "sorted-set",
	"Determine the index of a member in a sorted set"),
    CMD("zrevrank", 3, R | F, K1, 0, 1, 1, 1, cmd_zrevrank, NULL, "sorted-set",
	"Determine the index of a member in a sorted set, with scores ordered from high to low"),
    CMD("zcount", 4, R | F, K1, 0, 1, 1, 1, cmd_zcount, NULL, "sorted-set",
	"Count the members in a sorted set with scores within the given values"),
    CMD("zlexcount", 4, R | F, K1, 0, 1, 1, 1, cmd_zlexcount, NULL, "sorted-set",
	"Count the number of members in a sorted set between a given lexicographical range"),
    CMD("zrange", -4, R, K1, 0, 1, 1, 1, cmd_zrange, NULL, "sorted-set",
	"Return a range of members in a sorted set"),
    CMD("zrangebyscore", -4, R, K1, 0, 1, 1, 1, cmd_zrangebyscore, NULL, "sorted-set",
	"Return a range of members in a sorted set, by score"),
    CMD("zrevrangebyscore", -4, R, K1, 0, 1, 1, 1, cmd_zrevrangebyscore, NULL, "sorted-set",
	"Return a range of members in a sorted set, by score, with scores ordered from high to "
	"low"),
    CMD("zrangebylex", -4, R, K1, 0, 1, 1, 1, cmd_zrangebylex, NULL, "sorted-set",
	"Return a range of members in a sorted set, by lexicographical range"),
    CMD("zrevrangebylex", -4, R, K1, 0, 1, 1, 1, cmd_zrevrangebylex, NULL, "sorted-set",
	"Return a range of members in a sorted set, by lexicographical range, ordered from higher "
	"to lower strings."),
    CMD("zrevrange", -4, R, K1, 0, 1, 1, 1, cmd_zrevrange, NULL, "sorted-set",
	"Return a range of members in a sorted set, by index, with scores ordered from high to "
	"low"),
    CMD("zremrangebyrank", 4, W, K1, 0, 1, 1, 1, cmd_zremrangebyrank, NULL, "sorted-set",
	"Remove all members in a sorted set within the given indexes"),
    CMD("zremrangebyscore", 4, W, K1, 0, 1, 1, 1, cmd_zremrangebyscore, NULL, "sorted-set",
	"Remove all members in a sorted set within the given scores"),
    CMD("zremrangebylex", 4, W, K1, 0, 1, 1, 1, cmd_zremrangebylex, NULL, "sorted-set",
	"Remove all members in a sorted set between the given lexicographical range"),
    CMD("zpopmin", -2, W | F, K1, 0, 1, 1, 1, cmd_zpopmin, NULL, "sorted-set",
	"Remove and return members with the lowest scores in a sorted set"),
    CMD("zpopmax", -2, W | F, K1, 0, 1, 1, 1, cmd_zpopmax, NULL, "sorted-set",
	"Remove and return members with the highest scores in a sorted set"),
    CMDX("zmpop", -4, W | KV_MOVABLEKEYS, 0, 0, 0, cmd_zmpop, NULL, "sorted-set",
	 "Remove and return members with scores in a sorted set", kv_keys_mpop, kv_multi_mpop),
    CMDX("bzpopmin", -3, W | KV_NOSCRIPT | KV_BLOCKING | F, 1, -2, 1, cmd_bzpopmin, precheck_bpop,
	 "sorted-set",
	 "Remove and return the member with the lowest score from one or more sorted sets, or "
	 "block until one is available",
	 NULL, NULL),
    CMDX("bzpopmax", -3, W | KV_NOSCRIPT | KV_BLOCKING | F, 1, -2, 1, cmd_bzpopmax, precheck_bpop,
	 "sorted-set",
	 "Remove and return the member with the highest score from one or more sorted sets, or "
	 "block until one is available",
	 NULL, NULL),
    CMDX("bzmpop", -5, W | KV_BLOCKING | KV_MOVABLEKEYS, 0, 0, 0, cmd_bzmpop, precheck_bpop,
	 "sorted-set",
	 "Remove and return members with scores in a sorted set or block until one is "
	 "available",
	 kv_keys_mpop, NULL),
    CMD("zrandmember", -2, R, K1, 0, 1, 1, 1, cmd_zrandmember, NULL, "sorted-set",
	"Get one or multiple random elements from a sorted set"),
    CMD("zscan", -3, R, K1, 0, 1, 1, 1, cmd_zscan, NULL, "sorted-set",
	"Incrementally iterate sorted sets elements and associated scores"),
    /* server and connection */
    CMD("ping", -1, F, LOC, 0, 0, 0, 0, cmd_ping, NULL, "connection", "Ping the server"),
    /* pub/sub (pubsub.c) */
    CMD("subscribe", -2, KV_PUBSUB | LS | KV_NOSCRIPT, LOC, 0, 0, 0, 0, cmd_subscribe, NULL,
	"pubsub", "Listen for messages published to the given channels"),
    CMD("unsubscribe", -1, KV_PUBSUB | LS | KV_NOSCRIPT, LOC, 0, 0, 0, 0, cmd_unsubscribe, NULL,
	"pubsub", "Stop listening for messages posted to the given channels"),
    CMD("psubscribe", -2, KV_PUBSUB | LS | KV_NOSCRIPT, LOC, 0, 0, 0, 0, cmd_psubscribe, NULL,
	"pubsub", "Listen for messages published to channels matching the given patterns"),
    CMD("punsubscribe", -1, KV_PUBSUB | LS | KV_NOSCRIPT, LOC, 0, 0, 0, 0, cmd_punsubscribe, NULL,
	"pubsub", "Stop listening for messages posted to channels matching the given patterns"),
    CMD("publish", 3, KV_PUBSUB | LS | F, ALL, KV_MERGE_PUBSUB, 0, 0, 0, cmd_publish, NULL,
	"pubsub", "Post a message to a channel"),
    {"pubsub", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, pubsub_subs, "pubsub",
     "A container for Pub/Sub commands"},
    CMD("echo", 2, LS | F, LOC, 0, 0, 0, 0, cmd_echo, NULL, "connection", "Echo the given string"),
    CMD("select", 2, LS | F, LOC, 0, 0, 0, 0, cmd_select, NULL, "connection",
	"Change the selected database for the current connection"),
    CMD("quit", -1, LS | F | KV_NOSCRIPT | KV_NO_AUTH | KV_ALLOW_BUSY, LOC, 0, 0, 0, 0, cmd_quit,
	NULL, "connection", "Close the connection"),
    CMD("info", -1, LS, ALL, KV_MERGE_INFO, 0, 0, 0, cmd_info_shard, NULL, "server",
	"Get information and statistics about the server"),
    {"command", -1, LS, LOC, 0, 0, 0, 0, cmd_command, NULL, command_subs, "server",
     "Get array of Redis command details"},
    {"client", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, client_subs, "connection",
     "A container for client connection commands"},
    CMD("hello", -1, KV_NOSCRIPT | LS | F | KV_NO_AUTH | KV_ALLOW_BUSY, LOC, 0, 0, 0, 0, cmd_hello,
	NULL, "connection", "Handshake with Redis"),
    CMD("auth", -2, KV_NOSCRIPT | LS | F | KV_NO_AUTH | KV_ALLOW_BUSY, LOC, 0, 0, 0, 0, cmd_auth,
	NULL, "connection", "Authenticate to the server"),
    {"config", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, config_subs, "server",
     "A container for server configuration commands"},
    {"slowlog", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, slowlog_subs, "server",
     "A container for slow log commands"},
    CMD("time", 1, LS | F, LOC, 0, 0, 0, 0, cmd_time, NULL, "server",
	"Return the current server time"),
    CMD("reset", 1, KV_NOSCRIPT | LS | F | KV_NO_AUTH | KV_ALLOW_BUSY, LOC, 0, 0, 0, 0, cmd_reset,
	NULL, "connection", "Reset the connection"),
    {"function", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, function_subs, "scripting",
     "A container for function commands"},
    /* scripting (script_run.c) */
    EVAL("eval", EVALF, "Execute a Lua script server side"),
    EVAL("evalsha", EVALF, "Execute a Lua script server side"),
    EVAL("eval_ro", KV_READONLY | EVALF, "Execute a read-only Lua script server side"),
    EVAL("evalsha_ro", KV_READONLY | EVALF, "Execute a read-only Lua script server side"),
    {"script", -2, 0, LOC, 0, 0, 0, 0, NULL, NULL, script_subs, "scripting",
     "A container for Lua scripts management commands"},
    /* transactions (cmd_exec.c) */
    CMD("multi", 1, KV_NOSCRIPT | LS | F | KV_ALLOW_BUSY, KV_ROUTE_TX, 0, 0, 0, 0, cmd_multi, NULL,
	"transactions", "Mark the start of a transaction block"),
    CMD("exec", 1, KV_NOSCRIPT | LS | KV_SKIP_SLOWLOG, KV_ROUTE_TX, 0, 0, 0, 0, cmd_exec, NULL,
	"transactions", "Execute all commands issued after MULTI"),
    CMD("discard", 1, KV_NOSCRIPT | LS | F | KV_ALLOW_BUSY, KV_ROUTE_TX, 0, 0, 0, 0, cmd_discard,
	NULL, "transactions", "Discard all commands issued after MULTI"),
    CMD("watch", -2, KV_NOSCRIPT | LS | F | KV_ALLOW_BUSY, KV_ROUTE_TX, 0, 1, -1, 1, cmd_watch,
	NULL, "transactions",
	"Watch the given keys to determine execution of the MULTI/EXEC block"),
    CMD("unwatch", 1, KV_NOSCRIPT | LS | F | KV_ALLOW_BUSY, KV_ROUTE_TX, 0, 0, 0, 0, cmd_unwatch,
	NULL, "transactions", "Forget about all watched keys"),
};

const unsigned kv_ncmds = sizeof(kv_cmds) / sizeof(kv_cmds[0]);

int
kv_cmd_keys(const struct kv_cmd *cmd, const struct kv_arg *argv, uint32_t argc, uint32_t *idx,
	    uint32_t max)
{
	uint32_t i, n = 0, last;

	if (cmd->keys != NULL)
		return cmd->keys(argv, argc, idx, max);
	if (cmd->first_key <= 0)
		return 0;
	last = cmd->last_key < 0 ? argc + (uint32_t)cmd->last_key : (uint32_t)cmd->last_key;
	for (i = (uint32_t)cmd->first_key; i <= last && i < argc && n < max;
	     i += (uint32_t)cmd->step)
		idx[n++] = i;
	return (int)n;
}

/* ---- lookup ---- */

#define INDEX_SIZE 1024u
_Static_assert(sizeof(kv_cmds) / sizeof(kv_cmds[0]) < INDEX_SIZE / 2, "index too small");

static const struct kv_cmd *index_[INDEX_SIZE];

static unsigned
name_hash(const char *s, size_t n)
{
	unsigned h = 2166136261u;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)tolower((unsigned char)s[i])) * 16777619u;
	return h;
}

__attribute__((constructor)) static void
build_index(void)
{
	unsigned i;

	for (i = 0; i < kv_ncmds; i++) {
		unsigned h = name_hash(kv_cmds[i].name, strlen(kv_cmds[i].name));

		while (index_[h % INDEX_SIZE] != NULL)
			h++;
		index_[h % INDEX_SIZE] = &kv_cmds[i];
	}
}

static bool
same(const char *name, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (name[i] == '\0' || name[i] != tolower((unsigned char)s[i]))
			return false;
	return name[n] == '\0';
}

const struct kv_cmd *
kv_cmd_lookup(const char *s, size_t n)
{
	unsigned h = name_hash(s, n);
	const struct kv_cmd *c;

	/* Redis looks names up as C strings: a NUL ends the name. */
	n = strnlen(s, n);
	h = name_hash(s, n);
	while ((c = index_[h % INDEX_SIZE]) != NULL) {
		if (same(c->name, s, n))
			return c;
		h++;
	}
	return NULL;
}

const struct kv_cmd *
kv_cmd_sub_lookup(const struct kv_cmd *c, const char *s, size_t n)
{
	const struct kv_cmd *sub;
	size_t plen = strlen(c->name) + 1;

	n = strnlen(s, n);
	for (sub = c->sub; sub->name != NULL; sub++)
		if (same(sub->name + plen, s, n))
			return sub;
	return NULL;
}

_Static_assert(__COUNTER__ < KV_CMDSTAT_MAX, "KV_CMDSTAT_MAX: more commands than slots");
