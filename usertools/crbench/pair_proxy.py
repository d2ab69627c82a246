# SPDX-License-Identifier: BSD-3-Clause
"""cr-proxy vs HAProxy (mode tcp, nbthread 1), each alone on ctx.server_cpu.

Both proxies relay to the same backends, which run on ctx.client_cpu next to the load:
  nginx     nginx-light, one process (master_process off), `return 200`, keepalive
            requests unbounded, access log off; config, pid, logs and temp paths in a
            ctx.tmpdir()
  sink      a Python process that reads and drops whatever a connection sends
Proxies, started once for the whole pairing (two of each: one in front of nginx, one in
front of the sink):
  cr-proxy  build_dir/app/cr-proxy/cr-proxy -l CPU --check-interval 0 --telemetry off
  haproxy   `mode tcp`, `nbthread 1`, maxconn 4096, no `check` on the server line;
            config generated in a ctx.tmpdir()
Modes:
  plain        wrk -t1, ctx.connections keep-alive connections, one request at a time
  pipeline16   the same with 16 requests per write (pipeline.lua)
  bulk-MB      one 1 GB stream (a Python sender, 1 MiB sendall) through the proxy to the
               sink; here "requests" are megabytes (10^6 bytes): req/s is MB/s and
               req/cpu-s is MB per proxy-CPU-second; no latency
  tls          TLS termination: wrk -t1 over https, ctx.connections keep-alive
               connections, TLS 1.3 with TLS_AES_128_GCM_SHA256 only and an ECDSA P-256
               certificate made for the run (pair_https.make_cert), plain to nginx.
               cr-proxy: --tls-listen --tls-cert --tls-key --tls-protocols TLSv1.3
               --tls-ciphersuites TLS_AES_128_GCM_SHA256 (its plain --listen unused);
               haproxy: the same `mode tcp` frontend with `bind ... ssl crt FILE
               ssl-min-ver TLSv1.3 ciphersuites TLS_AES_128_GCM_SHA256` (FILE: the
               certificate and key in one PEM, as haproxy reads it)
Runs are interleaved (cr-proxy, haproxy, cr-proxy, ...) so noise on a shared machine falls
on both alike; each cell is the median of ctx.runs runs.
Rows only with --modes (a sweep to pick --splice-threshold): "splice-threshold SIZE" for
SIZE in 16k, 64k, 256k, 1m: wrk GETs a file of SIZE from nginx (a `location /static/`,
`sendfile on`) through cr-proxy --splice-threshold 4096 (a keep-alive connection's answers
spliced from its first few KiB on, ours) and through cr-proxy --splice-threshold off
(received and sent by lib/net, peer), per proxy-CPU-second; a ratio above 1 means splice
wins for answers of that size.
"""
import os
import shutil
import subprocess
import sys

from . import core, pair_https

PAIRING = "proxy"
PACKAGES = ["haproxy", "nginx-light", "wrk"]
DEPTH = 16
HERE = os.path.dirname(os.path.abspath(__file__))
BULK_BYTES = 1000 * 1000 * 1000

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
        listen 127.0.0.1:{port} backlog=4096;
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

HAPROXY_CONF = """\
global
    nbthread 1
    maxconn 4096
defaults
    mode tcp
    timeout connect 2s
    timeout client 300s
    timeout server 300s
frontend bench
    bind 127.0.0.1:{port}{ssl}
    default_backend servers
backend servers
    server s1 127.0.0.1:{backend}
"""

SINK_PY = """\
import socket, sys, threading
def drain(c):
    buf = bytearray(1 << 20)
    while c.recv_into(buf):
        pass
    c.close()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1])))
ls.listen(16)
while True:
    c, _ = ls.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""

SEND_PY = """\
import socket, sys, time
port, total = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
blk = memoryview(bytearray(1 << 20))
t0 = time.monotonic()
left = total
while left > 0:
    n = min(left, len(blk))
    s.sendall(blk[:n])
    left -= n
s.shutdown(socket.SHUT_WR)
s.recv(1)
s.close()
print("%.6f" % (time.monotonic() - t0))
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def wait(ctx, proc, port):
    try:
        ctx.wait_port(port)
    except core.BenchError as e:
        raise core.BenchError("%s: %s; its output: %s"
                              % (proc.argv[0], e, proc.output().strip() or "(none)")) from None
    if not proc.alive():
        raise core.BenchError("%s exited (status %s): %s"
                              % (proc.argv[0], proc.popen.returncode, proc.output()))


def start_nginx(ctx, root):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(exe, os.X_OK):
        raise core.BenchError("nginx not found (Debian package nginx-light)")
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    conf = write(os.path.join(tmp, "nginx.conf"), NGINX_CONF.format(tmp=tmp, port=port,
                                                                      root=root))
    proc = ctx.spawn([exe, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf],
                     ctx.client_cpu, cwd=tmp)
    wait(ctx, proc, port)
    return proc, port


def start_sink(ctx):
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    proc = ctx.spawn([sys.executable, write(os.path.join(tmp, "sink.py"), SINK_PY), str(port)],
                     ctx.client_cpu)
    wait(ctx, proc, port)
    return proc, port


def start_cr_proxy(ctx, exe, backend, tls=None, extra=()):
    """cr-proxy in front of @p backend; with @p tls (cert, key), on its TLS listener."""
    port = ctx.free_port()
    argv = [exe, "-l", str(ctx.server_cpu), "--telemetry", "off",
            "--listen", "127.0.0.1:%d" % (0 if tls else port),
            "--backend", "127.0.0.1:%d" % backend, "--check-interval", "0",
            "--client-timeout", "300", "--server-timeout", "300"]
    if tls is not None:
        argv += ["--tls-listen", "127.0.0.1:%d" % port, "--tls-cert", tls[0], "--tls-key",
                 tls[1], "--tls-protocols", "TLSv1.3", "--tls-ciphersuites", pair_https.CIPHER]
    proc = ctx.spawn(argv + list(extra) + ctx.ours_args, ctx.server_cpu)
    wait(ctx, proc, port)
    return proc, port


def start_haproxy(ctx, backend, tls=None):
    """haproxy in front of @p backend; with @p tls (cert, key), an `ssl crt` bind."""
    exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(exe, os.X_OK):
        raise core.BenchError("haproxy not found (Debian package haproxy)")
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    ssl = ""
    if tls is not None:
        pem = os.path.join(tmp, "haproxy.pem")
        with open(tls[0]) as c, open(tls[1]) as k:
            write(pem, c.read() + k.read())
        os.chmod(pem, 0o600)
        ssl = " ssl crt %s ssl-min-ver TLSv1.3 ciphersuites %s" % (pem, pair_https.CIPHER)
    conf = write(os.path.join(tmp, "haproxy.cfg"), HAPROXY_CONF.format(port=port,
                                                                        backend=backend,
                                                                        ssl=ssl))
    proc = ctx.spawn([exe, "-f", conf, "-db"], ctx.server_cpu, cwd=tmp)
    wait(ctx, proc, port)
    return proc, port


def bulk(ctx, port):
    """One BULK_BYTES stream through 127.0.0.1:port, the sender pinned to client_cpu."""
    send = write(os.path.join(ctx.tmpdir(), "send.py"), SEND_PY)
    try:
        r = subprocess.run([sys.executable, send, str(port), str(BULK_BYTES)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           preexec_fn=lambda: os.sched_setaffinity(0, {ctx.client_cpu}),
                           timeout=300)
    except subprocess.TimeoutExpired:
        raise core.BenchError("bulk sender did not finish within 300 s") from None
    if r.returncode != 0:
        raise core.BenchError("bulk sender through port %d failed: %s"
                              % (port, r.stdout.strip()[-400:]))
    secs = float(r.stdout.strip().splitlines()[-1])
    mb = BULK_BYTES / 1e6
    return {"requests": mb, "rps": mb / secs, "p50_us": None, "p99_us": None,
            "errors": 0, "non_2xx": 0}


MODES = [("plain", "http", None),
         ("pipeline%d" % DEPTH, "http", os.path.join(HERE, "pipeline.lua")),
         ("bulk-MB", "bulk", None),
         ("tls", "tls", None)]
SWEEP = [("splice-threshold %s" % n, "sweep-%s.bin" % n, size)
         for n, size in (("16k", 16 << 10), ("64k", 64 << 10), ("256k", 256 << 10),
                         ("1m", 1 << 20))]
MODE_NAMES = [m for m, _, _ in MODES] + [m for m, _, _ in SWEEP]


def make_root(ctx):
    """nginx's root: static/ with the sweep's files (random bytes)."""
    root = ctx.tmpdir()
    os.mkdir(os.path.join(root, "static"))
    for _, name, size in SWEEP:
        with open(os.path.join(root, "static", name), "wb") as f:
            f.write(os.urandom(size))
    return root


def sweep_rows(ctx, exe, http_port, sweep):
    """The splice-threshold sweep: cr-proxy splicing from 4 KiB on against never."""
    procs = {"cr-proxy splice": start_cr_proxy(ctx, exe, http_port,
                                               extra=["--splice-threshold", "4096"]),
             "cr-proxy copy": start_cr_proxy(ctx, exe, http_port,
                                             extra=["--splice-threshold", "off"])}
    rows = []
    for mode, name, _ in sweep:
        raw = {n: [] for n in procs}
        for i in range(ctx.runs):
            for n, (proc, port) in procs.items():
                def load(port=port):
                    return ctx.wrk("http://127.0.0.1:%d/static/%s" % (port, name),
                                   ctx.connections, ctx.duration)
                r = ctx.measure(proc, load)
                if r["errors"] or r["non_2xx"]:
                    ctx.log("%s %s run %d: %d socket errors, %d non-2xx responses"
                            % (n, mode, i + 1, r["errors"], r["non_2xx"]))
                ctx.log("%-15s %-21s run %d/%d: %10.0f req/s %10.0f per proxy-cpu-s "
                        "(proxy cpu %.0f%%)" % (n, mode, i + 1, ctx.runs, r["rps"],
                                                r["per_cpu_s"], 100 * r["cpu_util"]))
                raw[n].append(r)
        rows.append(core.row(PAIRING, mode, "cr-proxy splice",
                             ctx.median(raw["cr-proxy splice"]), "cr-proxy copy",
                             ctx.median(raw["cr-proxy copy"])))
    for proc, _ in procs.values():
        proc.stop()
    return rows


def run(ctx):
    exe = ctx.app("cr-proxy")
    nginx, http_port = start_nginx(ctx, make_root(ctx))
    modes = [m for m in MODES if ctx.want(m[0])]
    # The sweep is asked for by name only: it is no comparison with a peer.
    sweep = [x for x in SWEEP if ctx.modes is not None and x[0] in ctx.modes]
    if not modes:
        rows = sweep_rows(ctx, exe, http_port, sweep)
        nginx.stop()
        return rows
    sink, sink_port = start_sink(ctx)
    proxies = {}  # name -> {"http": (proc, port), "bulk": (proc, port)}
    proxies["cr-proxy"] = {"http": start_cr_proxy(ctx, exe, http_port),
                           "bulk": start_cr_proxy(ctx, exe, sink_port)}
    proxies["haproxy"] = {"http": start_haproxy(ctx, http_port),
                          "bulk": start_haproxy(ctx, sink_port)}
    if any(kind == "tls" for _, kind, _ in modes):
        tls = pair_https.make_cert(ctx)
        proxies["cr-proxy"]["tls"] = start_cr_proxy(ctx, exe, http_port, tls)
        proxies["haproxy"]["tls"] = start_haproxy(ctx, http_port, tls)

    cells = {}
    for mode, kind, script in modes:
        raw = {name: [] for name in proxies}
        for i in range(ctx.runs):
            for name, procs in proxies.items():
                proc, port = procs[kind]
                if kind == "bulk":
                    def load(port=port):
                        return bulk(ctx, port)
                else:
                    def load(port=port, script=script,
                             scheme="https" if kind == "tls" else "http"):
                        return ctx.wrk("%s://127.0.0.1:%d/" % (scheme, port),
                                       ctx.connections, ctx.duration, script)
                r = ctx.measure(proc, load)
                if r["errors"] or r["non_2xx"]:
                    ctx.log("%s %s run %d: %d socket errors, %d non-2xx responses"
                            % (name, mode, i + 1, r["errors"], r["non_2xx"]))
                ctx.log("%-8s %-10s run %d/%d: %10.0f %s/s %10.0f per proxy-cpu-s "
                        "(proxy cpu %.0f%%)" % (name, mode, i + 1, ctx.runs, r["rps"],
                                                "MB" if kind == "bulk" else "req",
                                                r["per_cpu_s"], 100 * r["cpu_util"]))
                raw[name].append(r)
        for name in proxies:
            cells[(name, mode)] = ctx.median(raw[name])

    rows = [core.row(PAIRING, mode, "cr-proxy", cells[("cr-proxy", mode)], "haproxy",
                     cells[("haproxy", mode)]) for mode, _, _ in modes]
    if sweep:
        rows += sweep_rows(ctx, exe, http_port, sweep)
    for procs in proxies.values():
        for proc, _ in procs.values():
            proc.stop()
    sink.stop()
    nginx.stop()
    return rows
