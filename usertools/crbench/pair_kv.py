# SPDX-License-Identifier: BSD-3-Clause
"""cr-kv vs redis-server (persistence off): all five types, pipeline 1 and 16.

Strings (SET, GET), hashes (HSET, HGET), lists (LPUSH, LPOP), sets (SADD) and sorted sets
(ZADD, ZRANGE).

Servers, started once for the whole pairing:
  cr-kv      build_dir/app/cr-kv/cr-kv -l CPU --listen 127.0.0.1:PORT --telemetry off,
             pinned to ctx.server_cpu (one lcore, one shard)
  redis      redis-server --save "" --appendonly no --bind 127.0.0.1 --port PORT, pinned
             to ctx.server_cpu (its background threads included: the whole process)
  cr-kv 2lc  cr-kv -l SERVER_CPU,CLIENT_CPU: two lcores, two shards, about half of the
             requests handed to the other lcore with cr_call. It shares the client's CPU
             with redis-benchmark (a 2-CPU machine has no third one): the scaling figure
             is what two lcores give here, not a clean 2x experiment.
Load: redis-benchmark -c 50 -r 100000 -n N -P 1|16 --csv, pinned to ctx.client_cpu, with
either a built-in test (-t set|get|hset|lpush|lpop|sadd|zadd) or a command of its own
(HGET myhash element:__rand_int__, ZRANGE myzset 0 9); N is sized for about ctx.duration
seconds from a short first run against redis. The built-ins other than SET and GET work on
one key each (myhash, mylist, myset, myzset, with up to 100,000 random members), so on
2 lcores those requests all go to one shard. The modes run in the order of MODES, so
HGET reads the hash HSET filled, LPOP pops what LPUSH pushed and ZRANGE reads the ZADD
set; the sizing run adds a little more to redis's collections than to cr-kv's.
Runs are interleaved (cr-kv, redis, cr-kv 2lc, cr-kv, ...) so noise on a shared machine
falls on every server alike; each cell is the median of ctx.runs runs. Server CPU is
utime+stime of the whole process from /proc (ctx.measure), so per_cpu_s is requests per
server-CPU-second.
Rows: cr-kv vs redis per mode; cr-kv 2lc vs redis and vs cr-kv (1 lcore) per mode.

Memory per key ("mem string", "mem hash", "mem list", "mem set", "mem zset"): for each
type, a fresh cr-kv (one lcore) and a fresh redis-server each get ctx.mem_keys keys
(default 1,000,000) of that type with small elements, the same bytes through
redis-cli --pipe: strings of 16 bytes; hashes of 5 fields with 8-byte values; lists of 5
elements; sets of 5 short string members (Redis 7.0 keeps them in a hashtable); sorted
sets of 5 members with integer scores (listpack in both). The figure is the growth of the
process's RSS (/proc/PID/statm) over the same server just started, per key; the ratio is
cr-kv / redis (below 1: cr-kv takes less). One load per server, not ctx.runs: memory does
not vary between runs as throughput does.
"""
import csv
import io
import math
import os
import shutil
import subprocess
import time

from . import core

PAIRING = "kv"
PACKAGES = ["redis-server", "redis-tools"]
CLIENTS = 50
KEYSPACE = 100000
# (mode name, redis-benchmark test: a -t name or a command of its own as a list)
TESTS = [("set", "set"), ("get", "get"), ("hset", "hset"),
         ("hget", ["hget", "myhash", "element:__rand_int__"]),
         ("lpush", "lpush"), ("lpop", "lpop"), ("sadd", "sadd"), ("zadd", "zadd"),
         ("zrange", ["zrange", "myzset", "0", "9"])]
MODES = [(name, test, pipe) for pipe in (1, 16) for name, test in TESTS]
MEM_TYPES = ["string", "hash", "list", "set", "zset"]
MODE_NAMES = ["%s P%d" % (name, pipe) for name, _, pipe in MODES] + \
    ["mem %s" % t for t in MEM_TYPES]
MEM_KEYS = 1000000


def csv_name(test):
    """The name redis-benchmark --csv gives @test: the -t name in capitals, or the
    command line as given."""
    return test.upper() if isinstance(test, str) else " ".join(test)


def benchmark(ctx, port, test, pipeline, n):
    """One redis-benchmark run: its figures as a load() dict."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        raise core.BenchError("redis-benchmark not found (Debian package redis-tools)")
    argv = [exe, "-h", "127.0.0.1", "-p", str(port), "-c", str(CLIENTS),
            "-r", str(KEYSPACE), "-n", str(n), "-P", str(pipeline), "--csv"]
    argv += ["-t", test] if isinstance(test, str) else test
    ctx.debug("load: " + " ".join(argv))
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: os.sched_setaffinity(0, {ctx.client_cpu}),
                           timeout=max(120, ctx.duration * 20))
    except subprocess.TimeoutExpired:
        raise core.BenchError("redis-benchmark did not finish: %s" % " ".join(argv)) \
            from None
    if r.returncode != 0 or "rror" in r.stderr:
        raise core.BenchError("redis-benchmark exited %d: %s %s"
                              % (r.returncode, r.stdout.strip()[-300:], r.stderr.strip()[-300:]))
    return parse_csv(r.stdout, csv_name(test), n)


def parse_csv(text, name, n):
    rows = [x for x in csv.reader(io.StringIO(text)) if x]
    if len(rows) < 2 or rows[0][:2] != ["test", "rps"]:
        raise core.BenchError("cannot read redis-benchmark --csv output: %r" % text[-300:])
    head = rows[0]
    for r in rows[1:]:
        if r[0] == name:
            f = dict(zip(head, r))
            return {"requests": n, "rps": float(f["rps"]),
                    "p50_us": float(f["p50_latency_ms"]) * 1000,
                    "p99_us": float(f["p99_latency_ms"]) * 1000,
                    "avg_us": float(f["avg_latency_ms"]) * 1000,
                    "max_us": float(f["max_latency_ms"]) * 1000}
    raise core.BenchError("no %r line in redis-benchmark output: %r" % (name, text[-300:]))


def wait(ctx, proc, port):
    try:
        ctx.wait_port(port)
    except core.BenchError as e:
        raise core.BenchError("%s: %s; its output: %s"
                              % (proc.argv[0], e, proc.output().strip() or "(none)")) from None
    if not proc.alive():
        raise core.BenchError("%s exited (status %s): %s"
                              % (proc.argv[0], proc.popen.returncode, proc.output()))


def start_redis(ctx):
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = ctx.free_port()
    proc = ctx.spawn([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                      "--dir", ctx.tmpdir()], ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def start_kv(ctx, exe, two):
    port = ctx.free_port()
    argv = [exe, "--listen", "127.0.0.1:%d" % port, "--telemetry", "off"] + ctx.ours_args
    if two:
        # spawn() pins to one CPU; taskset widens the affinity to both before exec, so
        # the measured pid is cr-kv's.
        cpus = "%d,%d" % (ctx.server_cpu, ctx.client_cpu)
        argv = ["taskset", "-c", cpus] + argv + ["-l", cpus]
    else:
        argv += ["-l", str(ctx.server_cpu)]
    proc = ctx.spawn(argv, ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def _resp(args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def mem_load(kind, n):
    """The requests that make @n keys of type @kind, as RESP bytes."""
    def one(i):
        k = b"%s:%012d" % (kind.encode(), i)
        if kind == "string":
            return [b"SET", k, b"v%015d" % i]
        if kind == "hash":
            return [b"HSET", k] + [x for f in range(5) for x in (b"f%d" % f, b"v%07d" % f)]
        if kind == "list":
            return [b"RPUSH", k] + [b"element%d" % e for e in range(5)]
        if kind == "set":
            return [b"SADD", k] + [b"member%d" % e for e in range(5)]
        return [b"ZADD", k] + [x for e in range(5) for x in (b"%d" % e, b"member%d" % e)]
    return b"".join(_resp(one(i)) for i in range(n))


def rss(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")


def pipe_in(ctx, port, data):
    """Send @data with redis-cli --pipe; fail unless every reply came without an error."""
    exe = shutil.which("redis-cli")
    if exe is None:
        raise core.BenchError("redis-cli not found (Debian package redis-tools)")
    argv = [exe, "-h", "127.0.0.1", "-p", str(port), "--pipe"]
    ctx.debug("load: %s (%d bytes)" % (" ".join(argv), len(data)))
    r = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600,
                       preexec_fn=lambda: os.sched_setaffinity(0, {ctx.client_cpu}))
    out = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 or "errors: 0," not in out:
        raise core.BenchError("redis-cli --pipe: %s" % out.strip()[-300:])


def mem_cell(ctx, start, data, n):
    """A fresh server from @start(), its RSS growth per key after @data (n keys)."""
    proc, port = start()
    try:
        time.sleep(0.5)  # started: the first ticks, the pools sized at start
        before = rss(proc.pid)
        pipe_in(ctx, port, data)
        time.sleep(0.5)
        after = rss(proc.pid)
    finally:
        proc.stop()
    return {"keys": n, "rss_before": before, "rss_after": after,
            "bytes_per_key": (after - before) / n}


def mem_rows(ctx, exe):
    n = getattr(ctx, "mem_keys", None) or MEM_KEYS
    rows = []
    for kind in MEM_TYPES:
        mode = "mem %s" % kind
        if not ctx.want(mode):
            continue
        data = mem_load(kind, n)
        ours = mem_cell(ctx, lambda: start_kv(ctx, exe, False), data, n)
        peer = mem_cell(ctx, lambda: start_redis(ctx), data, n)
        ctx.log("%-10s %d keys: cr-kv %.1f B/key, redis %.1f B/key"
                % (mode, n, ours["bytes_per_key"], peer["bytes_per_key"]))
        rows.append({"pairing": PAIRING, "mode": mode, "kind": "memory",
                     "ours_name": "cr-kv", "ours": ours, "peer_name": "redis", "peer": peer,
                     "ratio_rps": None, "ratio_per_cpu": None,
                     "ratio_mem": ours["bytes_per_key"] / peer["bytes_per_key"]
                     if peer["bytes_per_key"] > 0 else None})
    return rows


def run(ctx):
    exe = ctx.app("cr-kv")
    rows = mem_rows(ctx, exe)
    if not any(ctx.want("%s P%d" % (label, pipe)) for label, _, pipe in MODES):
        return rows
    servers = {}
    servers["cr-kv"] = start_kv(ctx, exe, False)
    servers["redis"] = start_redis(ctx)
    if ctx.client_cpu != ctx.server_cpu and shutil.which("taskset"):
        servers["cr-kv 2lc"] = start_kv(ctx, exe, True)
    else:
        ctx.log("one CPU only (or no taskset): no 2-lcore figure")

    modes = [(label, test, pipe) for label, test, pipe in MODES
             if ctx.want("%s P%d" % (label, pipe))]
    cells = {}
    for label, test, pipe in modes:
        mode = "%s P%d" % (label, pipe)
        # Size the run for about ctx.duration seconds from a short one against redis.
        probe = benchmark(ctx, servers["redis"][1], test, pipe, 20000 * pipe)
        rps = probe["rps"] if math.isfinite(probe["rps"]) else 1e6
        n = max(20000, int(rps * ctx.duration))
        raw = {name: [] for name in servers}
        for i in range(ctx.runs):
            for name, (proc, port) in servers.items():
                def load(port=port, test=test, pipe=pipe, n=n):
                    return benchmark(ctx, port, test, pipe, n)
                r = ctx.measure(proc, load)
                ctx.log("%-9s %-7s run %d/%d: %10.0f req/s %10.0f req/cpu-s (server cpu %.0f%%)"
                        % (name, mode, i + 1, ctx.runs, r["rps"], r["per_cpu_s"],
                           100 * r["cpu_util"]))
                raw[name].append(r)
        for name in servers:
            cells[(name, mode)] = ctx.median(raw[name])

    for label, _, pipe in modes:
        mode = "%s P%d" % (label, pipe)
        rows.append(core.row(PAIRING, mode, "cr-kv", cells[("cr-kv", mode)], "redis",
                             cells[("redis", mode)]))
    if "cr-kv 2lc" in servers:
        for label, _, pipe in modes:
            mode = "%s P%d" % (label, pipe)
            two = cells[("cr-kv 2lc", mode)]
            rows.append(core.row(PAIRING, mode, "cr-kv 2lc", two, "redis",
                                 cells[("redis", mode)]))
            rows.append(core.row(PAIRING, mode, "cr-kv 2lc", two, "cr-kv",
                                 cells[("cr-kv", mode)]))
    for proc, _ in servers.values():
        proc.stop()
    return rows
