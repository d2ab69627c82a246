# SPDX-License-Identifier: BSD-3-Clause
"""cr-http vs nginx and the liburing limit, plaintext, non-pipelined and pipelined 16.

Servers, each pinned to ctx.server_cpu and started once for the whole pairing:
  cr-http   build_dir/app/cr-http/cr-http -l CPU --listen 127.0.0.1:PORT, GET /plaintext
  nginx     nginx-light, one process (master_process off: the process measured is the one
            serving), `return 200 "Hello, World!"`, keepalive_requests unbounded, access
            log off; config, pid, logs and temp paths in a ctx.tmpdir()
  limit     cr-bench-http-limit (app/cr-bench/http_limit.c; build_dir/app/cr-bench/, or
            libexec/coreact/ installed): one
            fixed response per "\\r\\n\\r\\n", multishot accept/recv, buffer ring
Load: wrk -t1 pinned to ctx.client_cpu, ctx.connections connections; pipelined mode sends
16 requests per write (pipeline.lua). Runs are interleaved (server A, B, C, A, B, C, ...)
so that noise on a shared machine falls on every server alike; each cell is the median.
Rows: cr-http vs nginx, cr-http vs limit, and limit vs nginx (the reference of the others).
"""
import os
import shutil

from . import core

PAIRING = "http"
PACKAGES = ["wrk", "nginx-light"]
DEPTH = 16
HERE = os.path.dirname(os.path.abspath(__file__))

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            return 200 "Hello, World!";
        }}
    }}
}}
"""


def start_nginx(ctx):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(exe, os.X_OK):
        raise core.BenchError("nginx not found (Debian package nginx-light)")
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port))
    proc = ctx.spawn([exe, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf],
                     ctx.server_cpu, cwd=tmp)
    wait(ctx, proc, port)
    return proc, port


def start_limit(ctx):
    port = ctx.free_port()
    proc = ctx.spawn([ctx.app("cr-bench-http-limit"), str(port)], ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def start_cr_http(ctx, exe):
    port = ctx.free_port()
    proc = ctx.spawn([exe, "-l", str(ctx.server_cpu), "--listen", "127.0.0.1:%d" % port]
                     + ctx.ours_args, ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def wait(ctx, proc, port):
    try:
        ctx.wait_port(port)
    except core.BenchError as e:
        raise core.BenchError("%s: %s; its output: %s"
                              % (proc.argv[0], e, proc.output().strip() or "(none)")) from None
    if not proc.alive():
        raise core.BenchError("%s exited (status %s): %s"
                              % (proc.argv[0], proc.popen.returncode, proc.output()))


MODES = [("plain", None), ("pipeline%d" % DEPTH, os.path.join(HERE, "pipeline.lua"))]
MODE_NAMES = [m for m, _ in MODES]


def run(ctx):
    servers = {}  # name -> (proc, url path)
    try:
        exe = ctx.app("cr-http")
    except core.NotBuilt as e:
        exe = None
        ctx.log("cr-http not built (%s): its columns stay empty" % e)
    if exe is not None:
        proc, port = start_cr_http(ctx, exe)
        servers["cr-http"] = (proc, "http://127.0.0.1:%d/plaintext" % port)
    proc, port = start_nginx(ctx)
    servers["nginx"] = (proc, "http://127.0.0.1:%d/plaintext" % port)
    proc, port = start_limit(ctx)
    servers["limit"] = (proc, "http://127.0.0.1:%d/plaintext" % port)

    modes = [(m, s) for m, s in MODES if ctx.want(m)]
    cells = {}
    for mode, script in modes:
        raw = {name: [] for name in servers}
        for i in range(ctx.runs):
            for name, (proc, url) in servers.items():
                def load(url=url, script=script):
                    return ctx.wrk(url, ctx.connections, ctx.duration, script)
                r = ctx.measure(proc, load)
                if r["errors"] or r["non_2xx"]:
                    ctx.log("%s %s run %d: %d socket errors, %d non-2xx responses"
                            % (name, mode, i + 1, r["errors"], r["non_2xx"]))
                ctx.log("%-7s %-10s run %d/%d: %10.0f req/s %10.0f req/cpu-s "
                        "(server cpu %.0f%%)" % (name, mode, i + 1, ctx.runs, r["rps"],
                                                 r["per_cpu_s"], 100 * r["cpu_util"]))
                raw[name].append(r)
        for name in servers:
            cells[(name, mode)] = ctx.median(raw[name])

    rows = []
    for mode, _ in modes:
        ours = cells.get(("cr-http", mode))
        rows.append(core.row(PAIRING, mode, "cr-http", ours, "nginx", cells[("nginx", mode)]))
        rows.append(core.row(PAIRING, mode, "cr-http", ours, "limit", cells[("limit", mode)]))
        rows.append(core.row(PAIRING, mode, "limit", cells[("limit", mode)], "nginx",
                             cells[("nginx", mode)]))
    for proc, _ in servers.values():
        proc.stop()
    return rows
