# SPDX-License-Identifier: BSD-3-Clause
"""cr-http vs nginx and the liburing limit, plaintext, pipelined 16, and static files.

Servers, each pinned to ctx.server_cpu and started once for the whole pairing:
  cr-http   build_dir/app/cr-http/cr-http -l CPU --listen 127.0.0.1:PORT, GET /plaintext;
            for the static rows a second one with --root DIR (its defaults: bodies of
            --splice-min 64 KiB and more go by splice)
  nginx     nginx-light, one process (master_process off: the process measured is the one
            serving), `return 200 "Hello, World!"`, keepalive_requests unbounded, access
            log off; the static files from a `location /static/` with `sendfile on` and
            `tcp_nopush on`; config, pid, logs and temp paths in a ctx.tmpdir()
  limit     cr-bench-http-limit (app/cr-bench/http_limit.c; build_dir/app/cr-bench/, or
            libexec/coreact/ installed): one
            fixed response per "\\r\\n\\r\\n", multishot accept/recv, buffer ring
Load: wrk -t1 pinned to ctx.client_cpu, ctx.connections connections; pipelined mode sends
16 requests per write (pipeline.lua). Runs are interleaved (server A, B, C, A, B, C, ...)
so that noise on a shared machine falls on every server alike; each cell is the median.
Rows: cr-http vs nginx, cr-http vs limit, and limit vs nginx (the reference of the others);
static-4k and static-1m (GET of a 4 KiB and a 1 MiB file, keep-alive): cr-http vs nginx.
Rows only with --modes (a sweep to pick cr-http's --splice-min): "splice-min SIZE" for
SIZE in 16k, 64k, 256k, 1m: a file of SIZE from cr-http --splice-min 1 (always spliced,
ours) against cr-http --splice-min 0 (always copied, peer); a ratio above 1 means splice
wins at that size, so the default belongs at the smallest size from which it does.
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
        location /static/ {{
            root {root};
            sendfile on;
            tcp_nopush on;
        }}
    }}
}}
"""


def start_nginx(ctx, root):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(exe, os.X_OK):
        raise core.BenchError("nginx not found (Debian package nginx-light)")
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port, root=root))
    proc = ctx.spawn([exe, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf],
                     ctx.server_cpu, cwd=tmp)
    wait(ctx, proc, port)
    return proc, port


def start_limit(ctx):
    port = ctx.free_port()
    proc = ctx.spawn([ctx.app("cr-bench-http-limit"), str(port)], ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def start_cr_http(ctx, exe, extra=()):
    port = ctx.free_port()
    proc = ctx.spawn([exe, "-l", str(ctx.server_cpu), "--listen", "127.0.0.1:%d" % port]
                     + list(extra) + ctx.ours_args, ctx.server_cpu)
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
# Static files: (row, file name, size); served from ROOT/static/ by cr-http and nginx.
STATIC = [("static-4k", "4k.bin", 4096), ("static-1m", "1m.bin", 1 << 20)]
SWEEP = [("splice-min %s" % n, "sweep-%s.bin" % n, size)
         for n, size in (("16k", 16 << 10), ("64k", 64 << 10), ("256k", 256 << 10),
                         ("1m", 1 << 20))]
MODE_NAMES = [m for m, _ in MODES] + [m for m, _, _ in STATIC] + [m for m, _, _ in SWEEP]


def make_root(ctx):
    """A document root with static/ holding every file of STATIC and SWEEP (random bytes:
    no compression anywhere can shrink them)."""
    root = ctx.tmpdir()
    os.mkdir(os.path.join(root, "static"))
    for _, name, size in STATIC + SWEEP:
        with open(os.path.join(root, "static", name), "wb") as f:
            f.write(os.urandom(size))
    return root


def interleave(ctx, servers, mode, path, script=None):
    """ctx.runs interleaved runs of wrk on @p path of each server: name -> median."""
    raw = {name: [] for name in servers}
    for i in range(ctx.runs):
        for name, (proc, base) in servers.items():
            def load(url=base + path):
                return ctx.wrk(url, ctx.connections, ctx.duration, script)
            r = ctx.measure(proc, load)
            if r["errors"] or r["non_2xx"]:
                ctx.log("%s %s run %d: %d socket errors, %d non-2xx responses"
                        % (name, mode, i + 1, r["errors"], r["non_2xx"]))
            ctx.log("%-12s %-15s run %d/%d: %10.0f req/s %10.0f req/cpu-s "
                    "(server cpu %.0f%%)" % (name, mode, i + 1, ctx.runs, r["rps"],
                                             r["per_cpu_s"], 100 * r["cpu_util"]))
            raw[name].append(r)
    return {name: ctx.median(raw[name]) for name in servers}


def run(ctx):
    servers = {}  # name -> (proc, base url)
    try:
        exe = ctx.app("cr-http")
    except core.NotBuilt as e:
        exe = None
        ctx.log("cr-http not built (%s): its columns stay empty" % e)
    modes = [(m, s) for m, s in MODES if ctx.want(m)]
    static = [x for x in STATIC if ctx.want(x[0])]
    # The sweep is asked for by name only: it is no comparison with a peer.
    sweep = [x for x in SWEEP if ctx.modes is not None and x[0] in ctx.modes]
    root = make_root(ctx)
    if exe is not None:
        proc, port = start_cr_http(ctx, exe)
        servers["cr-http"] = (proc, "http://127.0.0.1:%d" % port)
    proc, port = start_nginx(ctx, root)
    servers["nginx"] = (proc, "http://127.0.0.1:%d" % port)
    if modes:
        proc, port = start_limit(ctx)
        servers["limit"] = (proc, "http://127.0.0.1:%d" % port)

    cells = {}
    for mode, script in modes:
        got = interleave(ctx, servers, mode, "/plaintext", script)
        for name in servers:
            cells[(name, mode)] = got[name]

    rows = []
    for mode, _ in modes:
        ours = cells.get(("cr-http", mode))
        rows.append(core.row(PAIRING, mode, "cr-http", ours, "nginx", cells[("nginx", mode)]))
        rows.append(core.row(PAIRING, mode, "cr-http", ours, "limit", cells[("limit", mode)]))
        rows.append(core.row(PAIRING, mode, "limit", cells[("limit", mode)], "nginx",
                             cells[("nginx", mode)]))

    if static:
        pair = {"nginx": servers["nginx"]}
        if exe is not None:
            proc, port = start_cr_http(ctx, exe, ["--root", root])
            pair = {"cr-http": (proc, "http://127.0.0.1:%d" % port), "nginx": servers["nginx"]}
        for mode, name, _ in static:
            got = interleave(ctx, pair, mode, "/static/" + name)
            rows.append(core.row(PAIRING, mode, "cr-http", got.get("cr-http"), "nginx",
                                 got["nginx"]))
    if sweep:
        if exe is None:
            raise core.BenchError("the splice-min sweep needs cr-http: %s" % ", ".join(
                m for m, _, _ in sweep))
        pair = {}
        for label, opt in (("splice", "1"), ("copy", "0")):
            proc, port = start_cr_http(ctx, exe, ["--root", root, "--splice-min", opt])
            pair["cr-http " + label] = (proc, "http://127.0.0.1:%d" % port)
        for mode, name, _ in sweep:
            got = interleave(ctx, pair, mode, "/static/" + name)
            rows.append(core.row(PAIRING, mode, "cr-http splice", got["cr-http splice"],
                                 "cr-http copy", got["cr-http copy"]))
    for proc, _ in servers.values():
        proc.stop()
    return rows
