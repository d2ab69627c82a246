# SPDX-License-Identifier: BSD-3-Clause
"""cr-http over TLS vs nginx with ssl, same certificate type and cipher for both.

Both servers, pinned to ctx.server_cpu and started once for the pairing, serve
"Hello, World!" over TLS 1.3 only, with TLS_AES_128_GCM_SHA256 only, an ECDSA P-256
certificate made for the run (openssl req, in a ctx.tmpdir()), session tickets on:
  cr-http   build_dir/app/cr-http/cr-http -l CPU --listen 127.0.0.1:P
            --tls-listen 127.0.0.1:PORT --tls-cert --tls-key --tls-protocols TLSv1.3
            --tls-ciphersuites TLS_AES_128_GCM_SHA256, GET /plaintext
  nginx     nginx-light (ssl_module), one process (master_process off), listen ... ssl,
            ssl_protocols TLSv1.3, ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256,
            ssl_session_tickets on, access log off
Modes:
  keepalive   wrk -t1 over https, ctx.connections kept-alive connections
  reconnect   wrk -t1 over https, Connection: close on every request (close.lua): one new
              connection per request; wrk offers the ticket of its last connection, as a
              browser does, so most of these handshakes resume (telemetry's /tls says how many)
  handshake   openssl s_time -new: one connection at a time, a full handshake each (no
              ticket offered); requests are connections here
  resumed     openssl s_time -reuse: one connection at a time, each resuming the session of
              the first (a ticket); requests are connections here
Runs are interleaved (cr-http, nginx, cr-http, ...); each cell is the median. The figure
to compare is per_cpu_s: requests (or connections) per server-CPU-second.
"""
import os
import re
import shutil
import subprocess

from . import core, pair_http

PAIRING = "https"
PACKAGES = ["wrk", "nginx-light", "openssl"]
HERE = os.path.dirname(os.path.abspath(__file__))
CIPHER = "TLS_AES_128_GCM_SHA256"

# pair_http's nginx, its listener made TLS: the same process model, logs and limits.
NGINX_CONF = pair_http.NGINX_CONF.replace("listen 127.0.0.1:{port};", """\
listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites {cipher};
        ssl_session_tickets on;""")
assert NGINX_CONF != pair_http.NGINX_CONF


def make_cert(ctx):
    tmp = ctx.tmpdir()
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-subj", "/CN=localhost", "-days", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise core.BenchError("openssl req: %s" % r.stdout)
    os.chmod(key, 0o600)
    return cert, key


def start_nginx(ctx, cert, key):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(exe, os.X_OK):
        raise core.BenchError("nginx not found (Debian package nginx-light)")
    tmp = ctx.tmpdir()
    port = ctx.free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port, cert=cert, key=key, cipher=CIPHER))
    proc = ctx.spawn([exe, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf],
                     ctx.server_cpu, cwd=tmp)
    pair_http.wait(ctx, proc, port)
    return proc, port


def start_cr_http(ctx, exe, cert, key):
    port = ctx.free_port()
    proc = ctx.spawn([exe, "-l", str(ctx.server_cpu), "--listen", "127.0.0.1:0",
                      "--tls-listen", "127.0.0.1:%d" % port, "--tls-cert", cert,
                      "--tls-key", key, "--tls-protocols", "TLSv1.3",
                      "--tls-ciphersuites", CIPHER] + ctx.ours_args, ctx.server_cpu)
    pair_http.wait(ctx, proc, port)
    return proc, port


def s_time(ctx, port, how):
    """openssl s_time -new or -reuse for ctx.duration seconds: connections as requests."""
    argv = ["openssl", "s_time", "-connect", "127.0.0.1:%d" % port, how,
            "-time", str(ctx.duration), "-www", "/plaintext", "-ciphersuites", CIPHER]
    ctx.debug("load: " + " ".join(argv))
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       preexec_fn=core._pin(ctx.client_cpu), timeout=ctx.duration + 30)
    m = re.search(r"(\d+) connections in (\d+) real seconds", r.stdout)
    if r.returncode != 0 or m is None:
        raise core.BenchError("openssl s_time %s: %s" % (how, r.stdout.strip()[-600:]))
    n, secs = int(m.group(1)), max(int(m.group(2)), 1)
    return {"requests": n, "load_s": float(secs), "rps": n / secs, "p50_us": None,
            "p99_us": None, "avg_us": None, "max_us": None, "errors": 0, "non_2xx": 0}


MODES = ["keepalive", "reconnect", "handshake", "resumed"]
MODE_NAMES = MODES


def run(ctx):
    cert, key = make_cert(ctx)
    servers = {}
    try:
        exe = ctx.app("cr-http")
    except core.NotBuilt as e:
        exe = None
        ctx.log("cr-http not built (%s): its columns stay empty" % e)
    if exe is not None:
        servers["cr-http"] = start_cr_http(ctx, exe, cert, key)
    servers["nginx"] = start_nginx(ctx, cert, key)
    close_lua = os.path.join(HERE, "close.lua")
    cells = {}
    for mode in [m for m in MODES if ctx.want(m)]:
        raw = {name: [] for name in servers}
        for i in range(ctx.runs):
            for name, (proc, port) in servers.items():
                url = "https://127.0.0.1:%d/plaintext" % port

                def load(url=url, port=port, mode=mode):
                    if mode in ("handshake", "resumed"):
                        return s_time(ctx, port, "-new" if mode == "handshake" else "-reuse")
                    return ctx.wrk(url, ctx.connections if mode == "keepalive" else
                                   min(ctx.connections, 16), ctx.duration,
                                   close_lua if mode == "reconnect" else None)
                r = ctx.measure(proc, load)
                if r["errors"] or r["non_2xx"]:
                    ctx.log("%s %s run %d: %d socket errors, %d non-2xx responses"
                            % (name, mode, i + 1, r["errors"], r["non_2xx"]))
                ctx.log("%-7s %-9s run %d/%d: %10.0f req/s %10.0f req/cpu-s (server cpu %.0f%%)"
                        % (name, mode, i + 1, ctx.runs, r["rps"], r["per_cpu_s"],
                           100 * r["cpu_util"]))
                raw[name].append(r)
        for name in servers:
            cells[(name, mode)] = ctx.median(raw[name])
    rows = []
    for mode in [m for m in MODES if ctx.want(m)]:
        rows.append(core.row(PAIRING, mode, "cr-http", cells.get(("cr-http", mode)), "nginx",
                             cells[("nginx", mode)]))
    for proc, _ in servers.values():
        proc.stop()
    return rows
