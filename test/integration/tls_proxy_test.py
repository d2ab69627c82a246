#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of cr-proxy's TLS: termination (--tls-listen), TLS from the clients
and plain HTTP to a cr-http backend, with curl --cacert and python's ssl; and TLS to the
backends (--backend-tls) with nginx (ssl) and openssl s_server as the backends.

  tls_proxy_test.py CR_PROXY CR_HTTP TEST [--driver uring|epoll]

TEST is one of: cli, curl, pipeline, backend_nginx, backend_sni, backend_sni_each,
backend_silent, backend_badcert, connect_budget, backend_client_eof, maxconn_early,
check_budget, backend_refusals, reload_live, retire_live.
Exit 0 pass,
1 fail, 77 skip.
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import apptest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_test import Failure, check, log  # noqa: E402
import http_test  # noqa: E402
import tls_http_test  # noqa: E402

SKIP = 77


class Proxy:
    """cr-proxy with @p args (default: TLS termination in front of @p backend), ready once
    its stdout has @p ready; its stderr is collected by stop()."""

    def __init__(self, exe, driver, certs, backend=None, args=None,
                 ready=rb"(tls, plain to the backends)", telemetry=False, lcores=None):
        if args is None:
            args = ["--listen", "127.0.0.1:0", "--backend", "%s:%d" % backend,
                    "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert,
                    "--tls-key", certs.key]
        self.tel = os.path.join(certs.dir, "tel.%d.sock" % time.monotonic_ns())
        self.proc = subprocess.Popen(
            [exe, "-l", lcores or str(min(os.sched_getaffinity(0))), "--io-driver", driver,
             "--telemetry", self.tel if telemetry else "off"] + args,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, deadline = b"", time.monotonic() + 10
        while ready not in out:
            check(time.monotonic() < deadline and self.proc.poll() is None,
                  "cr-proxy not ready: %r %r %r" % (out, self.proc.poll(),
                                                    self.proc.stderr.read()
                                                    if self.proc.poll() is not None else ""))
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                out += os.read(self.proc.stdout.fileno(), 4096)
        self.out = out
        m = re.search(rb"listening on 127\.0\.0\.1:(\d+) \(tls", out)
        self.port = int(m.group(1)) if m else None
        self.url = "https://localhost:%d" % self.port if m else None
        m = re.search(rb"listening on 127\.0\.0\.1:(\d+), ", out)
        self.plain_port = int(m.group(1)) if m else None
        m = re.search(rb"listening on 127\.0\.0\.1:(\d+) \(tls passthrough", out)
        self.sni_port = int(m.group(1)) if m else None
        self.err = ""

    def telemetry(self, cmd):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(self.tel)
        s.sendall(cmd.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(65536)
            if not d:
                break
            buf += d
        s.close()
        d = json.loads(buf)
        return d.get(cmd, d)  # a command with parameters answers under its own name

    def app_counters(self):
        """The app counters of /stats, summed over the lcores."""
        return self.telemetry("/stats")["total"]["app"]

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        self.err = err.decode(errors="replace")
        check(self.proc.returncode == 0, "cr-proxy exit %d: %s" % (self.proc.returncode, err))
        return self.err


def start_port(start, what):
    """start(port) on free ports of 127.0.0.1 until one is taken by it (5 tries)."""
    for _ in range(5):
        port = apptest.free_port()
        proc = start(port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc, port
            except OSError:
                time.sleep(0.05)
        stop_proc(proc)
    raise Failure("%s did not start" % what)


def stop_proc(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SServer:
    """`openssl s_server -www` on 127.0.0.1 with @p cert: it answers an HTTP GET with a
    page that starts with its own command line. @p extra: more s_server options."""

    def __init__(self, cert, key, extra=()):
        self.proc, self.port = start_port(
            lambda port: subprocess.Popen(
                ["openssl", "s_server", "-accept", "127.0.0.1:%d" % port, "-cert", cert,
                 "-key", key, "-www", "-quiet"] + list(extra),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL), "openssl s_server")
        self.addr = ("127.0.0.1", self.port)

    def stop(self):
        stop_proc(self.proc)


NGINX = "/usr/sbin/nginx"


class NginxTLS:
    """nginx with ssl on 127.0.0.1, our certificate; /plaintext answers Hello, World!, and
    its log has a line per request: TLS version, SNI name, session reused (r or .), its
    connection's serial number."""

    def __init__(self, certs):
        self.d = tempfile.mkdtemp(prefix="tls_proxy_nginx.", dir=certs.dir)
        self.log = os.path.join(self.d, "tls.log")
        self.certs_cert, self.certs_key = certs.cert, certs.key
        self.proc, self.port = start_port(self._start, "nginx")
        self.addr = ("127.0.0.1", self.port)

    def _start(self, port):
        d = self.d
        conf = os.path.join(d, "nginx.conf")
        temps = "".join("%s_temp_path %s/%s;\n" % (t, d, t)
                        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(conf, "w") as f:
            f.write("""daemon off; master_process off; worker_processes 1;
pid %(d)s/nginx.pid; error_log %(d)s/error.log;
events { worker_connections 64; }
http {
  %(temps)s
  log_format tls '$ssl_protocol $ssl_server_name $ssl_session_reused $connection';
  access_log %(log)s tls;
  server {
    listen 127.0.0.1:%(port)d ssl;
    ssl_certificate %(cert)s; ssl_certificate_key %(key)s;
    ssl_protocols TLSv1.2 TLSv1.3;
    location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
  }
}
""" % {"d": d, "temps": temps, "port": port, "log": self.log, "cert": self.certs_cert,
       "key": self.certs_key})
        return subprocess.Popen([NGINX, "-p", d, "-c", conf], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def lines(self):
        with open(self.log) as f:
            return [ln.split() for ln in f.read().splitlines()]

    def stop(self):
        stop_proc(self.proc)


def http_get(port, path="/plaintext", timeout=10):
    """One GET on a new plain connection to 127.0.0.1:@p port: (status, headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                  % path.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    return status, "\n".join(lines[1:]).lower(), body


def t_curl(proxy_exe, http_exe, driver, certs):
    if shutil.which("curl") is None:
        return SKIP
    be = http_test.Server(http_exe, driver)
    px = Proxy(proxy_exe, driver, certs, be.addr)
    try:
        r = subprocess.run(["curl", "-sS", "--cacert", certs.ca, "-w", "\n%{num_connects}\n",
                            px.url + "/plaintext", px.url + "/json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        check(r.returncode == 0, "curl through the proxy: %s" % r.stderr)
        lines = r.stdout.split("\n")
        check(lines[0] == "Hello, World!1" or lines[0].startswith("Hello, World!"),
              "curl: %r" % r.stdout)
        check('{"message":"Hello, World!"}' in r.stdout and lines[-2] == "0",
              "not two answers on one kept-alive connection: %r" % r.stdout)
    finally:
        px.stop()
        be.stop()
    return 0


def t_pipeline(proxy_exe, http_exe, driver, certs):
    be = http_test.Server(http_exe, driver)
    px = Proxy(proxy_exe, driver, certs, be.addr)
    try:
        raw = socket.create_connection(("127.0.0.1", px.port), timeout=10)
        s = tls_http_test.client_ctx(certs).wrap_socket(raw, server_hostname="localhost")
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" * 30)
        rs = tls_http_test.read_responses(s, 30)
        check(all(b == b"Hello, World!" for _, b in rs), "30 pipelined answers")
        s.close()
    finally:
        px.stop()
        be.stop()
    return 0


def handshake_holding_finished(obj, inc, out, s):
    """Run the client side of @p obj's handshake over socket @p s until it is done; its
    Finished stays in @p out, unsent, for the caller to send with what follows."""
    for _ in range(20):
        try:
            obj.do_handshake()
            return
        except ssl.SSLWantReadError:
            data = out.read()
            if data:
                s.sendall(data)
            b = s.recv(65536)
            check(b, "closed during the handshake")
            inc.write(b)


def tls_get_with_finished(port, certs, path="/plaintext", timeout=10):
    """A TLS GET whose request record goes in the same write as the client's Finished, so
    the proxy's lib/tls decrypts it in the call that ends the handshake: (status, body)."""
    ctx = tls_http_test.client_ctx(certs)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        handshake_holding_finished(obj, inc, out, s)
        obj.write(b"GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                  % path.encode())
        s.sendall(out.read())  # Finished and the request, one write
        got = b""
        for _ in range(1000):
            try:
                b = obj.read(65536)
                if not b:
                    break  # close_notify
                got += b
            except ssl.SSLWantReadError:
                b = s.recv(65536)
                if not b:
                    break
                inc.write(b)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
    except ConnectionResetError:
        return 0, b"(reset)"
    finally:
        s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    parts = head.split(b" ")
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), body


def t_backend_nginx(proxy_exe, http_exe, driver, certs):
    """nginx with ssl as the backend: verified by our CA and its IP address (the default
    name of a numeric backend), then by --backend-tls-sni a.test, which nginx logs; every
    connection after the lcore's first resumes its session (nginx logs r); and TLS from
    the client too (--tls-listen), TLS both ways."""
    if not os.path.exists(NGINX) or shutil.which("curl") is None:
        log("SKIP: no %s or curl" % NGINX)
        return SKIP
    ng = NginxTLS(certs)
    try:
        for sni in (None, "a.test"):
            args = ["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % ng.port,
                    "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0",
                    "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert,
                    "--tls-key", certs.key]
            if sni is not None:
                args += ["--backend-tls-sni", sni]
            px = Proxy(proxy_exe, driver, certs, args=args,
                       ready=b"(tls, TLS to the backends)")
            try:
                for _ in range(2):
                    st, hdrs, body = http_get(px.plain_port)
                    check(st == 200 and body == b"Hello, World!" and "server: nginx" in hdrs,
                          "plain client, TLS backend: %d %r %r" % (st, hdrs, body))
                r = subprocess.run(["curl", "-sS", "--cacert", certs.ca, px.url + "/plaintext"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=30)
                check(r.returncode == 0 and r.stdout == "Hello, World!",
                      "TLS both ways: %r %r" % (r.stdout, r.stderr))
                # The request read with the handshake's end waits for the backend's open
                # (it was reset when sent on a TLS connection still in its handshake).
                st, body = tls_get_with_finished(px.port, certs)
                check(st == 200 and body == b"Hello, World!",
                      "a request in the Finished's write: %d %r" % (st, body))
            finally:
                px.stop()
        lines = ng.lines()
        check(len(lines) == 8, "nginx saw 8 requests: %r" % lines)
        check(all(ln[0] == "TLSv1.3" for ln in lines), "all over TLS 1.3: %r" % lines)
        check([ln[1] for ln in lines] == ["-"] * 4 + ["a.test"] * 4,
              "no SNI for an IP address, then a.test: %r" % lines)
        check([ln[2] for ln in lines] == [".", "r", "r", "r"] * 2,
              "every connection after each proxy's first resumed: %r" % lines)
    finally:
        ng.stop()
    return 0


def t_backend_sni(proxy_exe, http_exe, driver, certs):
    """openssl s_server as the backend, which fails the handshake unless the SNI name is
    b.test (-servername_fatal): --backend-tls-sni b.test passes (and b.test's certificate
    verifies); a.test, even unverified, is refused by the server, and cr-proxy says why."""
    b = SServer(certs.cert, certs.key, ["-cert2", certs.cert_b, "-key2", certs.key_b,
                                        "-servername", "b.test", "-servername_fatal"])
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % b.port, "--backend-tls",
            "--backend-tls-ca", certs.ca, "--backend-tls-sni", "b.test",
            "--check-interval", "0"], ready=b"TLS to the backends")
        try:
            st, _, body = http_get(px.plain_port, "/")
            check(st == 200 and b"s_server" in body, "through to s_server: %d %r" % (st, body))
        finally:
            px.stop()
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % b.port, "--backend-tls",
            "--backend-tls-verify", "none", "--backend-tls-sni", "a.test", "--retries", "0",
            "--check-interval", "0"], ready=b"TLS to the backends")
        try:
            st, _, body = http_get(px.plain_port, "/")
            check(st == 0 and body == b"", "a.test refused, the client closed: %d" % st)
        finally:
            err = px.stop()
        check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: .*unrecognized name"
                        % b.port, err), "the reason logged: %r" % err)
    finally:
        b.stop()
    return 0


def t_backend_sni_each(proxy_exe, http_exe, driver, certs):
    """Each backend its own name: a (by --config's `backend ... sni a.test`) and b (by
    --backend ...,sni=b.test), two s_servers that fail any other SNI name: every request,
    round robin over both, gets through."""
    a = SServer(certs.cert, certs.key, ["-cert2", certs.cert, "-key2", certs.key,
                                        "-servername", "a.test", "-servername_fatal"])
    b = SServer(certs.cert, certs.key, ["-cert2", certs.cert_b, "-key2", certs.key_b,
                                        "-servername", "b.test", "-servername_fatal"])
    conf = os.path.join(certs.dir, "proxy.conf")
    with open(conf, "w") as f:
        f.write("backend 127.0.0.1:%d sni a.test\n" % a.port)
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--config", conf, "--listen", "127.0.0.1:0",
            "--backend", "127.0.0.1:%d,sni=b.test" % b.port, "--backend-tls",
            "--backend-tls-ca", certs.ca, "--check-interval", "0", "--retries", "0"],
            ready=b"TLS to the backends")
        try:
            for i in range(4):
                st, _, body = http_get(px.plain_port, "/")
                check(st == 200 and b"s_server" in body, "request %d: %d %r" % (i, st, body))
        finally:
            err = px.stop()
        check("TLS connect failed" not in err, "no failed connect: %r" % err)
    finally:
        a.stop()
        b.stop()
    return 0


def t_backend_silent(proxy_exe, http_exe, driver, certs):
    """A backend that accepts and never answers the ClientHello: the handshake is cut at
    --connect-timeout (0.5 s) as a failed connect, the next backend (nginx) answers, and
    the line says it timed out."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held = []
    done = threading.Event()

    def accept():
        silent.settimeout(0.1)
        while not done.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    ng = NginxTLS(certs)
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % silent.getsockname()[1],
            "--backend", "127.0.0.1:%d" % ng.port, "--backend-tls", "--backend-tls-ca",
            certs.ca, "--check-interval", "0", "--connect-timeout", "0.5",
            "--balance", "roundrobin"], ready=b"TLS to the backends")
        try:
            t0 = time.monotonic()
            for i in range(2):
                st, hdrs, body = http_get(px.plain_port)
                check(st == 200 and "server: nginx" in hdrs, "request %d: %d %r" % (i, st, body))
            dt = time.monotonic() - t0
        finally:
            err = px.stop()
        check(dt >= 0.4, "one request waited for the handshake timeout: %.2f s" % dt)
        check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: timed out"
                        % silent.getsockname()[1], err), "the line: %r" % err)
    finally:
        done.set()
        th.join(5)
        for c in held:
            c.close()
        silent.close()
        ng.stop()
    return 0


def t_backend_badcert(proxy_exe, http_exe, driver, certs):
    """Two backends, the first with a certificate of another CA, the second nginx: every
    client is answered by nginx (a failed verification is a failed connect, retried on
    the next), the first is marked down, and its line names it and OpenSSL's reason."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    other = tls_http_test.Certs()
    bad = SServer(other.cert, other.key)
    ng = NginxTLS(certs)
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % bad.port,
            "--backend", "127.0.0.1:%d" % ng.port, "--backend-tls", "--backend-tls-ca",
            certs.ca, "--check-interval", "0.2", "--fall", "2"], ready=b"TLS to the backends",
            telemetry=True)
        try:
            for i in range(10):
                st, hdrs, body = http_get(px.plain_port)
                check(st == 200 and "server: nginx" in hdrs, "request %d: %d %r" % (i, st, body))
            bs = {b["address"]: b for b in px.telemetry("/backends")["backends"]}
            bad_b, ng_b = bs["127.0.0.1:%d" % bad.port], bs["127.0.0.1:%d" % ng.port]
            check(bad_b["state"] == "down" and bad_b["tls"] and bad_b["connections"] == 0,
                  "/backends, the bad one: %r" % bad_b)
            check(ng_b["state"] == "up" and ng_b["tls"] and ng_b["connections"] >= 10,
                  "/backends, nginx: %r" % ng_b)
        finally:
            err = px.stop()
        check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: certificate verify "
                        r"failed: unable to get local issuer certificate" % bad.port, err),
              "the reason logged: %r" % err)
        check(re.search(r"backend 127\.0\.0\.1:%d is down" % bad.port, err),
              "marked down: %r" % err)
        check(not re.search(r"backend 127\.0\.0\.1:%d is down" % ng.port, err),
              "nginx stays up: %r" % err)
    finally:
        ng.stop()
        bad.stop()
        other.remove()
    return 0


class SilentTLS:
    """A backend that accepts TCP and never says a word (no ServerHello): each
    connection it accepts is kept open, with its accept time (monotonic). With
    @p late_accept the listener's accept queue is full at first (listen(0) and one
    connection waiting in it), so a connect's first SYN is dropped; the queue is emptied
    after @p late_accept s, and the connect completes with the SYN's retransmission
    (about 1 s after it began): a TCP connect that takes most of --connect-timeout."""

    def __init__(self, late_accept=None):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(0 if late_accept is not None else 16)
        self.port = self.ls.getsockname()[1]
        self.filler = None
        if late_accept is not None:
            self.filler = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        self.late = late_accept
        self.held, self.times = [], []
        self.done = threading.Event()
        self.started = None
        self.th = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.started = time.monotonic()
        self.th.start()

    def _run(self):
        self.ls.settimeout(0.05)
        if self.late is not None:
            self.done.wait(self.late)
            c, _ = self.ls.accept()  # the filler: the queue has room again
            self.held.append(c)
        for _ in range(2000):  # bounded: 100 s at most
            if self.done.is_set():
                break
            try:
                c, _ = self.ls.accept()
            except OSError:
                continue
            self.times.append(time.monotonic())
            self.held.append(c)

    def stop(self):
        self.done.set()
        if self.th.is_alive():
            self.th.join(5)
        for c in self.held:
            c.close()
        if self.filler is not None:
            self.filler.close()
        self.ls.close()


def wait_eof(s, limit):
    """Seconds until @p s reads EOF or a reset (at most @p limit, else None)."""
    t0 = time.monotonic()
    s.settimeout(limit)
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
    except (ConnectionResetError, BrokenPipeError):
        pass
    except socket.timeout:
        return None
    return time.monotonic() - t0


def t_connect_budget(proxy_exe, http_exe, driver, certs):
    """R3: the TCP connect and the TLS handshake to a backend share one --connect-timeout.
    A backend whose TCP connect takes about 1 s (its first SYN dropped) and that then never
    answers the ClientHello: with --connect-timeout 1.5 the client is closed about 1.5 s
    after it connected (before, the handshake got 1.5 s of its own: about 2.5 s), the
    session is logged connect_failed with no connect time, and the line says timed out."""
    be = SilentTLS(late_accept=0.3)
    slog = os.path.join(certs.dir, "session.log")
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % be.port,
            "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0",
            "--connect-timeout", "1.5", "--retries", "0", "--session-log", slog],
            ready=b"TLS to the backends")
        try:
            be.start()
            c = socket.create_connection(("127.0.0.1", px.plain_port), timeout=5)
            t0 = time.monotonic()
            dt = wait_eof(c, 6)
            c.close()
            check(len(be.times) == 1, "one backend connection: %r" % be.times)
            tcp = be.times[0] - t0
            # The case this is about: a TCP connect that took most of the budget.
            check(tcp >= 0.7, "the TCP connect took %.2f s (the SYN was not dropped?)" % tcp)
            check(dt is not None, "the client was not closed within 6 s")
            log("TCP connect %.2f s, client closed after %.2f s (connect-timeout 1.5)"
                % (tcp, dt))
            check(1.4 <= dt <= 1.5 + 0.35,
                  "connect + handshake took %.2f s, not one --connect-timeout (1.5 s)" % dt)
        finally:
            err = px.stop()
        check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: timed out" % be.port,
                        err), "the line: %r" % err)
        with open(slog) as f:
            lines = f.read().splitlines()
        check(len(lines) == 1, "one session line: %r" % lines)
        fields = lines[0].split()
        check(fields[-1] == "connect_failed" and fields[4].split("/")[1] == "-1",
              "the session line: %r" % lines[0])
    finally:
        be.stop()
    return 0


def tls_request_then_eof(port, certs, request, timeout=10):
    """A TLS client whose request and close_notify go in the same write as its Finished,
    then a FIN: the proxy's lib/tls reads the request and the client's EOF in the call
    that ends the handshake. Returns what it read back (b"(reset)" on a reset)."""
    ctx = tls_http_test.client_ctx(certs)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = b""
    try:
        handshake_holding_finished(obj, inc, out, s)
        obj.write(request)
        try:
            obj.unwrap()
        except ssl.SSLWantReadError:
            pass  # close_notify is in out; the peer's comes later
        s.sendall(out.read())  # Finished, the request and close_notify: one write
        s.shutdown(socket.SHUT_WR)
        for _ in range(1000):
            try:
                b = obj.read(65536)
                if not b:
                    break
                got += b
            except ssl.SSLWantReadError:
                b = s.recv(65536)
                if not b:
                    break
                inc.write(b)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            except ssl.SSLError:
                break
    except ConnectionResetError:
        return b"(reset)"
    finally:
        s.close()
    return got


def t_backend_client_eof(proxy_exe, http_exe, driver, certs):
    """A TLS client whose request and EOF arrive with its Finished, while the proxy's
    TLS connection to the backend (nginx) is still in its handshake: the request still
    reaches nginx and the answer the client; the backend is not counted as failed (the
    client's EOF was passed on as a shut of our write during the handshake, which failed
    it: a backend failure, a retry, no answer)."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    ng = NginxTLS(certs)
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % ng.port,
            "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0",
            "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert, "--tls-key", certs.key],
            ready=b"(tls, TLS to the backends)", telemetry=True)
        try:
            for i in range(3):
                got = tls_request_then_eof(
                    px.port, certs, b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n")
                check(got.startswith(b"HTTP/1.1 200") and got.endswith(b"Hello, World!"),
                      "request %d: %r" % (i, got))
            st = px.app_counters()
            bs = px.telemetry("/backends")["backends"]
            check(st.get("proxy_connect_failures", 0) == 0 and bs[0]["failures"] == 0,
                  "no connect failure: %r %r" % (st, bs))
            live = None
            for _ in range(40):  # every session ends with its connections: 2 s at most
                live = px.telemetry("/backends")["sessions"]
                if live == 0:
                    break
                time.sleep(0.05)
            check(live == 0, "%r sessions still live after their clients closed" % live)
        finally:
            err = px.stop()
        check("TLS connect failed" not in err, "no failed connect: %r" % err)
    finally:
        ng.stop()
    return 0


def t_maxconn_early(proxy_exe, http_exe, driver, certs):
    """--maxconn 1 with TLS termination: a TLS client whose request came with its
    Finished, over the limit, waits and is answered when the session before it ends (it
    was reset: its early request had nowhere to wait with a plain backend); one whose
    close_notify and FIN came with them too is answered and closed."""
    be = http_test.Server(http_exe, driver)
    px = Proxy(proxy_exe, driver, certs, args=[
        "--listen", "127.0.0.1:0", "--backend", "%s:%d" % be.addr, "--maxconn", "1",
        "--check-interval", "0", "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert,
        "--tls-key", certs.key], telemetry=True)
    try:
        first = socket.create_connection(("127.0.0.1", px.plain_port), timeout=10)
        first.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        check(b"Hello, World!" in first.recv(65536), "the first session is served")
        res = {}
        th = threading.Thread(target=lambda: res.update(r=tls_get_with_finished(px.port, certs)))
        th.start()
        for _ in range(100):  # until it waits for --maxconn (at most 5 s)
            if px.app_counters().get("proxy_maxconn_waits", 0) >= 1:
                break
            time.sleep(0.05)
        check(px.app_counters().get("proxy_maxconn_waits", 0) == 1, "the TLS client waits")
        time.sleep(0.2)
        check(th.is_alive(), "the waiting client was answered or closed: %r" % res)
        first.close()
        th.join(10)
        check(not th.is_alive(), "the waiting client is never answered")
        st, body = res["r"]
        check(st == 200 and body == b"Hello, World!", "the waiting client: %d %r" % (st, body))
        check(px.app_counters().get("proxy_nobufs", 0) == 0, "no session reset")
        # The same with the client's close_notify and FIN in that write too: its EOF,
        # read before there was a backend connection, reaches the backend after the
        # request (it was lost: the backend, keeping the connection alive, never closed).
        first = socket.create_connection(("127.0.0.1", px.plain_port), timeout=10)
        first.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        check(b"Hello, World!" in first.recv(65536), "the first session again")
        res = {}
        th = threading.Thread(target=lambda: res.update(r=tls_request_then_eof(
            px.port, certs, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)))
        th.start()
        for _ in range(100):  # until it waits for --maxconn (at most 5 s)
            if px.app_counters().get("proxy_maxconn_waits", 0) >= 2:
                break
            time.sleep(0.05)
        check(px.app_counters().get("proxy_maxconn_waits", 0) == 2, "the second TLS client waits")
        t_eof = time.monotonic()
        first.close()
        th.join(10)
        check("r" in res, "the client with its EOF: no EOF back within 3 s")
        log("the client with its EOF: %.2f s" % (time.monotonic() - t_eof))
        check(res["r"].startswith(b"HTTP/1.1 200") and res["r"].endswith(b"Hello, World!"),
              "the client with its EOF: %r" % res["r"])
    finally:
        px.stop()
        be.stop()
    return 0


def t_retry_early(proxy_exe, http_exe, driver, certs):
    """Two plain backends, the first a closed port (not yet known down: no checks), round
    robin: a TLS client whose request came with its Finished (and, every other time, its
    close_notify and FIN) is answered whichever backend it was sent to first. The request
    was queued on the refused connection and died with it: the second backend got nothing
    (or, with the EOF, an empty request) and the client no answer."""
    be = http_test.Server(http_exe, driver)
    dead = apptest.free_port()
    px = Proxy(proxy_exe, driver, certs, args=[
        "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % dead,
        "--backend", "%s:%d" % be.addr, "--balance", "roundrobin", "--check-interval", "0",
        "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert, "--tls-key", certs.key],
        telemetry=True)
    try:
        for i in range(4):
            if i % 2 == 0:
                st, body = tls_get_with_finished(px.port, certs, timeout=5)
                check(st == 200 and body == b"Hello, World!",
                      "request %d (with its Finished): %d %r" % (i, st, body))
            else:
                got = tls_request_then_eof(
                    px.port, certs, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)
                check(got.startswith(b"HTTP/1.1 200") and got.endswith(b"Hello, World!"),
                      "request %d (with its Finished and EOF): %r" % (i, got))
        check(px.app_counters().get("proxy_connect_failures", 0) >= 1,
              "the closed port was tried: %r" % px.app_counters())
    finally:
        px.stop()
        be.stop()
    return 0


def t_check_budget(proxy_exe, http_exe, driver, certs):
    """--check-timeout bounds a --backend-tls health check whole, TCP connect and
    handshake: a backend that accepts and never answers the ClientHello, checked every
    0.2 s with --check-timeout 0.2 and --fall 2, is down within 2 s, though
    --connect-timeout is 5 (before, each check's handshake had the 5 s of the client
    context's handshake timeout: down after about 10 s)."""
    be = SilentTLS()
    try:
        be.start()
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % be.port,
            "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0.2",
            "--check-timeout", "0.2", "--connect-timeout", "5", "--fall", "2"],
            ready=b"TLS to the backends", telemetry=True)
        try:
            t0 = time.monotonic()
            state = None
            for _ in range(60):  # 3 s at most
                state = px.telemetry("/backends")["backends"][0]["state"]
                if state == "down":
                    break
                time.sleep(0.05)
            dt = time.monotonic() - t0
            check(state == "down", "the silent backend is %s after %.1f s" % (state, dt))
            log("silent TLS backend marked down %.2f s after the start, %d checks"
                % (dt, len(be.times)))
            check(dt < 2.0, "marked down after %.2f s" % dt)
        finally:
            err = px.stop()
        check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: .*timed out" % be.port,
                        err), "the reason logged: %r" % err)
    finally:
        be.stop()
    return 0


class ClosingTLS(SilentTLS):
    """A backend that reads the ClientHello and closes (a FIN) without an answer."""

    def _run(self):
        self.ls.settimeout(0.05)
        for _ in range(2000):  # bounded: 100 s at most
            if self.done.is_set():
                break
            try:
                c, _ = self.ls.accept()
            except OSError:
                continue
            self.times.append(time.monotonic())
            c.settimeout(2)
            try:
                c.recv(4096)
            except OSError:
                pass
            c.close()


def t_backend_refusals(proxy_exe, http_exe, driver, certs):
    """A backend whose certificate fails (another CA's, our CA's for another name, an
    expired one), and one that closes in the middle of the handshake, each the only
    backend: the client reads a clean EOF (no reset) soon, the session is logged
    connect_failed with no connect time, proxy_connect_failures and the backend's
    failures count it, and the proxy's line names the reason (a backend that closed
    during the handshake had no line)."""
    other = tls_http_test.Certs()
    old_cert, old_key = certs.expired()
    slog = os.path.join(certs.dir, "refusals.log")
    cases = [
        ("another CA", lambda: SServer(other.cert, other.key), [],
         r"certificate verify failed: unable to get local issuer certificate"),
        ("another name", lambda: SServer(certs.cert_b, certs.key_b), [],
         r"certificate verify failed: IP address mismatch"),
        ("another host name", lambda: SServer(certs.cert_b, certs.key_b),
         ["--backend-tls-sni", "localhost"], r"certificate verify failed: hostname mismatch"),
        ("expired", lambda: SServer(old_cert, old_key), ["--backend-tls-sni", "localhost"],
         r"certificate verify failed: certificate has expired"),
        ("closed", ClosingTLS, [], r"closed by the backend during the TLS handshake"),
    ]
    try:
        for n, (what, make, extra, reason) in enumerate(cases, 1):
            be = make()
            if isinstance(be, ClosingTLS):
                be.start()
            try:
                px = Proxy(proxy_exe, driver, certs, args=[
                    "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % be.port,
                    "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0",
                    "--retries", "0", "--connect-timeout", "3", "--session-log", slog]
                    + extra, ready=b"TLS to the backends", telemetry=True)
                try:
                    c = socket.create_connection(("127.0.0.1", px.plain_port), timeout=5)
                    c.settimeout(5)
                    t0 = time.monotonic()
                    try:
                        got = c.recv(100)
                    except ConnectionResetError:
                        got = None
                    dt = time.monotonic() - t0
                    c.close()
                    check(got == b"", "%s: the client got %r, not an EOF" % (what, got))
                    check(dt < 1.0, "%s: the client waited %.2f s" % (what, dt))
                    ctr = px.app_counters()
                    bk = px.telemetry("/backends")["backends"][0]
                    check(ctr.get("proxy_connect_failures") == 1 and bk["failures"] == 1
                          and bk["connections"] == 0,
                          "%s: counted %r %r" % (what, ctr, bk))
                finally:
                    err = px.stop()
                check(re.search(r"backend 127\.0\.0\.1:%d: TLS connect failed: %s"
                                % (be.port, reason), err),
                      "%s: the reason logged: %r" % (what, err))
                lines = []
                for _ in range(100):  # the log thread's: 5 s at most
                    with open(slog) as f:
                        lines = f.read().splitlines()
                    if len(lines) >= n:
                        break
                    time.sleep(0.05)
                check(len(lines) == n, "%s: %d session lines: %r" % (what, n, lines))
                f = lines[-1].split()
                check(f[-1] == "connect_failed" and f[4].split("/")[1] == "-1"
                      and f[3] == "127.0.0.1:%d" % be.port,
                      "%s: the session line %r" % (what, lines[-1]))
                log("%s: EOF after %.3f s, %s" % (what, dt, reason))
            finally:
                be.stop()
    finally:
        other.remove()
    return 0


def peer_names(der):
    """The DNS names of a DER certificate (openssl x509 -ext subjectAltName)."""
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-ext",
                        "subjectAltName"], input=der, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=10)
    return re.findall(rb"DNS:([\w.-]+)", r.stdout)


def read_until(proc, want, limit=10):
    """Read @p proc's stdout until @p want is in it (at most @p limit s)."""
    out, deadline = b"", time.monotonic() + limit
    while want not in out and time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            out += os.read(proc.stdout.fileno(), 4096)
    return out


def t_reload_live(proxy_exe, http_exe, driver, certs):
    """SIGHUP with TLS sessions live, TLS from the client and to the backend (nginx): the
    certificate files are replaced by b.test's and reloaded; the session opened before
    keeps working on its connections (two more requests, its backend connection the same:
    nginx sees no new handshake), a new client gets b.test's certificate, and the backend
    list of --config is read again with them."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    ng = NginxTLS(certs)
    d = tempfile.mkdtemp(prefix="reload.", dir=certs.dir)
    cert, key, conf = (os.path.join(d, n) for n in ("cert.pem", "key.pem", "proxy.conf"))
    shutil.copy(certs.cert, cert)
    shutil.copy(certs.key, key)
    os.chmod(key, 0o600)
    with open(conf, "w") as f:
        f.write("backend 127.0.0.1:%d\n" % ng.port)
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--config", conf, "--listen", "127.0.0.1:0", "--backend-tls",
            "--backend-tls-ca", certs.ca, "--check-interval", "0", "--tls-listen",
            "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key],
            ready=b"(tls, TLS to the backends)")
        try:
            ctx = tls_http_test.client_ctx(certs)
            live = ctx.wrap_socket(socket.create_connection(("127.0.0.1", px.port), timeout=10),
                                   server_hostname="localhost")
            req = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"
            live.sendall(req)
            check(tls_http_test.read_responses(live, 1)[0][1] == b"Hello, World!",
                  "the live session before the reload")
            shutil.copy(certs.cert_b, cert)
            shutil.copy(certs.key_b, key)
            px.proc.send_signal(signal.SIGHUP)
            out = read_until(px.proc, b"reloaded %s" % conf.encode())
            check(b"TLS certificates and keys reloaded" in out and b"1 backend" in out,
                  "the reload lines: %r" % out)
            for i in range(2):
                live.sendall(req)
                check(tls_http_test.read_responses(live, 1)[0][1] == b"Hello, World!",
                      "the live session after the reload, request %d" % i)
            check(peer_names(live.getpeercert(True)) == [b"localhost", b"a.test"],
                  "the live session's certificate")
            ctx2 = tls_http_test.client_ctx(certs)
            new = ctx2.wrap_socket(socket.create_connection(("127.0.0.1", px.port), timeout=10),
                                   server_hostname="b.test")
            check(peer_names(new.getpeercert(True)) == [b"b.test"], "a new client: b.test's")
            new.sendall(b"GET /plaintext HTTP/1.1\r\nHost: b.test\r\n\r\n")
            check(tls_http_test.read_responses(new, 1)[0][1] == b"Hello, World!",
                  "a new client after the reload")
            new.close()
            live.close()
        finally:
            err = px.stop()
        check("TLS connect failed" not in err, "no failed backend connect: %r" % err)
        lines = ng.lines()
        check(len(lines) == 4 and lines[0][3] == lines[1][3] == lines[2][3] != lines[3][3],
              "nginx: 3 requests of the live session on one connection, one of the new "
              "client on another: %r" % lines)
    finally:
        ng.stop()
    return 0


def t_retire_live(proxy_exe, http_exe, driver, certs):
    """Retiring an lcore with TLS sessions live on it, TLS from the clients and to the
    backend (nginx): every session keeps working while it retires (a request each), a new
    client is served by the other lcore, and once the clients close the lcore goes
    offline (within 5 s); started again, it runs."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    if len(os.sched_getaffinity(0)) < 2:
        log("SKIP: one CPU")
        return SKIP
    ng = NginxTLS(certs)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    try:
        px = Proxy(proxy_exe, driver, certs, args=[
            "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % ng.port,
            "--backend-tls", "--backend-tls-ca", certs.ca, "--check-interval", "0",
            "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert, "--tls-key", certs.key,
            "--shutdown-timeout", "20"], ready=b"(tls, TLS to the backends)", telemetry=True,
            lcores="%d,%d" % tuple(cpus))

        def lcores():
            return {lc["lcore"]: lc for lc in px.telemetry("/stats")["lcores"]}
        try:
            ctx = tls_http_test.client_ctx(certs)
            req = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"
            live = []
            for _ in range(16):
                c = ctx.wrap_socket(socket.create_connection(("127.0.0.1", px.port),
                                                             timeout=10),
                                    server_hostname="localhost")
                c.sendall(req)
                check(tls_http_test.read_responses(c, 1)[0][1] == b"Hello, World!",
                      "a session before the retire")
                live.append(c)
            second = max(lcores())
            on = lcores()[second]["net_connections"]
            check(on > 0, "none of 16 sessions on lcore %d" % second)
            r = px.telemetry("/lcore/retire,%d" % second)
            check("error" not in json.dumps(r), "retire: %r" % r)
            check(lcores()[second]["state"] == "RETIRING", "lcore %d retiring" % second)
            for i, c in enumerate(live):
                c.sendall(req)
                check(tls_http_test.read_responses(c, 1)[0][1] == b"Hello, World!",
                      "session %d while its lcore retires" % i)
            st, body = tls_get_with_finished(px.port, certs)
            check(st == 200 and body == b"Hello, World!", "a new client: %d %r" % (st, body))
            check(lcores()[second]["state"] == "RETIRING", "lcore left before its sessions")
            for c in live:
                c.close()
            state = None
            for _ in range(100):  # 5 s at most
                state = lcores()[second]["state"]
                if state == "OFFLINE":
                    break
                time.sleep(0.05)
            check(state == "OFFLINE", "lcore %d %s 5 s after its clients closed"
                  % (second, state))
            px.telemetry("/lcore/start,%d" % second)
            for _ in range(100):
                state = lcores()[second]["state"]
                if state == "RUNNING":
                    break
                time.sleep(0.05)
            check(state == "RUNNING", "lcore %d started again: %s" % (second, state))
            log("retire: %d TLS sessions on lcore %d kept working, offline once closed"
                % (on // 2, second))
        finally:
            err = px.stop()
        check("TLS connect failed" not in err, "no failed backend connect: %r" % err)
    finally:
        ng.stop()
    return 0


def t_cli(proxy_exe, http_exe, driver, certs):
    """Bad values of the TLS-to-backend and passthrough options: one line naming the
    option (or the file) and what is accepted, exit 2; --help lists them."""
    plain = ["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:9", "--check-interval", "0"]
    cases = [
        (plain + ["--backend-tls", "--backend-tls-verify", "maybe"],
         "--backend-tls-verify maybe: invalid value; accepted: none or required"),
        (plain + ["--backend-tls", "--backend-tls-sni", "a~b"],
         "--backend-tls-sni a~b: invalid value; accepted: a host name or an IP address"),
        (plain + ["--backend-tls", "--backend-tls-protocols", "TLSv1.1"],
         "--backend-tls-protocols TLSv1.1: invalid value"),
        (plain + ["--backend-tls", "--backend-tls-ca", "/nonexistent/ca.pem"],
         "backend 127.0.0.1:9: /nonexistent/ca.pem: No such file or directory"),
        (plain + ["--backend-tls", "--backend-tls-ca", certs.key],
         "no PEM CA certificate"),
        (plain + ["--backend-tls-ca", certs.ca], "given without --backend-tls"),
        (["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:9,sni=a.test"],
         "sni without --backend-tls"),
        (plain + ["--backend", "127.0.0.1:10,sni=a~b"],
         "--backend 127.0.0.1:10,sni=a~b: sni=a~b: invalid; accepted: a host name or an IP"),
        (["--sni-listen", "127.0.0.1:0", "--sni-route", "bad..name=127.0.0.1:1"],
         "--sni-route bad..name=127.0.0.1:1: bad..name: invalid; accepted: a host name"),
        (["--sni-listen", "127.0.0.1:0", "--sni-route", "a.test=127.0.0.1:0"],
         "127.0.0.1:0: invalid; accepted: HOST:PORT"),
        (["--sni-listen", "127.0.0.1:0"], "--sni-listen needs --sni-route"),
        (plain + ["--sni-route", "a.test=127.0.0.1:1"], "without --sni-listen"),
        (["--sni-listen", "127.0.0.1:0", "--sni-default", "refuse", "--sni-timeout", "0"],
         "--sni-timeout 0: invalid value; accepted: a number of seconds"),
    ]
    for args, want in cases:
        r = subprocess.run([proxy_exe, "--telemetry", "off"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr and len(r.stderr.splitlines()) == 1,
              "%s: exit %d, %r (wanted %r)" % (" ".join(args), r.returncode, r.stderr, want))
    r = subprocess.run([proxy_exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30)
    for opt in ("--backend-tls ", "--backend-tls-ca FILE", "--backend-tls-verify MODE",
                "--backend-tls-sni NAME", "--sni-listen HOST:PORT", "--sni-route NAME=",
                "--sni-default", "--sni-timeout SECONDS"):
        check(opt in r.stdout, "--help lists %s" % opt)
    return 0


TESTS = {"cli": t_cli, "curl": t_curl, "pipeline": t_pipeline, "backend_nginx": t_backend_nginx,
         "backend_sni": t_backend_sni, "backend_sni_each": t_backend_sni_each,
         "backend_silent": t_backend_silent, "backend_badcert": t_backend_badcert,
         "connect_budget": t_connect_budget, "backend_client_eof": t_backend_client_eof,
         "maxconn_early": t_maxconn_early, "check_budget": t_check_budget,
         "backend_refusals": t_backend_refusals, "reload_live": t_reload_live,
         "retire_live": t_retire_live, "retry_early": t_retry_early}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("proxy")
    ap.add_argument("http")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if shutil.which("openssl") is None:
        return SKIP
    if apptest.skip_if_refused(a.proxy, a.driver, log):
        return SKIP
    signal.alarm(100)
    certs = tls_http_test.Certs()
    try:
        rc = TESTS[a.test](a.proxy, a.http, a.driver, certs)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
        certs.remove()
    if rc == SKIP:
        return SKIP
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
