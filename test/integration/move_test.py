#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Live connections across resizes (issue 17): what clients see while the pool goes
2 -> 1 -> 2 through the telemetry socket, counted.

  move_test.py BUILD_DIR TEST [--driver uring|epoll] [--cycles N] [--clients N] [--seed S]

TEST is one of:
  https_keepalive  cr-http over TLS: keep-alive clients (Python's ssl), each one TCP
      connection and one TLS session for the whole run, a request then an idle pause:
      none sees an error or an EOF, none makes a second handshake (the server's /tls
      handshake count is exactly the number of clients), and connections were moved
      (net_moved_in);
  kv_tls  cr-kv over TLS: clients (Python's ssl), each one TLS session for the whole run,
      each SET and GET its own key before and after every retire: none sees an EOF or a
      second handshake; each answer is the value set, or cr-kv's documented error for a
      shard that is unavailable during a resize (counted, not failed: shards are cr-kv's);
  wrk_http  cr-http, plain: wrk keep-alive while the pool goes 2 -> 1 -> 2: 0 socket
      errors (connect, read, write, timeout) and 0 non-2xx/3xx answers;
  proxy_bulk  cr-proxy to a Python backend that sends seeded bulk answers: sessions of a
      few transfers each while the pool goes 2 -> 1 -> 2: every transfer byte-exact
      (SHA-256 of the seeded stream), 0 client errors. A proxy session stays on its lcore
      under a lease until it ends (doc/guides/proxy.md, "Retire"), so the sessions here
      are shorter than --shutdown-timeout: a longer one would be closed at it.

Loopback only; every loop is bounded in count and time. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from lifecycle_test import (App, Failure, STDERR_TAILS, check, lcore_counter, log,
                            read_http_response_head)

SKIP = 77
TEST_TIMEOUT = 200


def resize(app, n):
    r = app.telemetry("/pool/resize,%d" % n)
    check("error" not in json.dumps(r), "resize to %d: %r" % (n, r))


def cycles(app, n, pause, before_retire=None):
    """n times 2 -> 1 -> 2, each step waited for (lcore 1 OFFLINE, then RUNNING);
    before_retire(i) first in each, if given. Returns the connections lcore 0 took from
    lcore 1 in each cycle."""
    per_cycle = []
    for i in range(n):
        if before_retire is not None:
            before_retire(i)
        before = lcore_counter(app, 0, "net_moved_in")
        resize(app, 1)
        app.wait_state(1, "OFFLINE")
        time.sleep(pause)
        per_cycle.append(lcore_counter(app, 0, "net_moved_in") - before)
        resize(app, 2)
        app.wait_state(1, "RUNNING")
        time.sleep(pause)
    return per_cycle


# ---- HTTPS keep-alive ----

def make_cert(d):
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode == 0, "openssl req: %r" % r.stdout)
    os.chmod(key, 0o600)
    return cert, key


class HttpsApp(App):
    """cr-http with a TLS listener beside the plain one (its ready line follows)."""

    def __init__(self, build, driver, cert, key):
        super().__init__(build, "cr-http", driver,
                         ["--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key])
        deadline = time.monotonic() + 10.0
        m = None
        while m is None:
            m = re.search(r"listening on (\S+):(\d+) \(https\)", self._line(deadline))
        self.https = (m.group(1), int(m.group(2)))


class TlsClient(threading.Thread):
    """One TLS connection for the whole run: a request, an idle pause of 0-30 ms, again.
    Any EOF, reset, TLS error or non-200 answer, or an answer that says close, fails."""

    def __init__(self, addr, ctx, stop, rng):
        super().__init__(daemon=True)
        self.addr, self.ctx, self.stop, self.rng = addr, ctx, stop, rng
        self.ok = 0
        self.error = None
        self.port = None
        self.same_port = True
        self.resumed = None

    def run(self):
        try:
            with socket.create_connection(self.addr, timeout=5.0) as raw:
                self.port = raw.getsockname()[1]
                with self.ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    self.resumed = s.session_reused
                    buf = b""
                    deadline = time.monotonic() + TEST_TIMEOUT / 2
                    while not self.stop.is_set() and time.monotonic() < deadline:
                        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
                        status, buf, head = read_http_response_head(s, buf)
                        if status != 200 or re.search(rb"(?i)\r\nconnection:\s*close", head):
                            raise Failure("status %d, head %r" % (status, head))
                        self.ok += 1
                        time.sleep(self.rng.random() * 0.03)
                    self.same_port = s.getsockname()[1] == self.port
        except (OSError, EOFError, Failure, ssl.SSLError) as e:
            self.error = "%s after %d answers: %r" % (type(e).__name__, self.ok, e)


def t_https_keepalive(build, driver, args):
    d = tempfile.mkdtemp(prefix="cr-move.")
    try:
        cert, key = make_cert(d)
        app = HttpsApp(build, driver, cert, key)
        try:
            ctx = ssl.create_default_context(cafile=cert)
            stop = threading.Event()
            rng = random.Random(args.seed)
            clients = []

            def more(_):
                """New connections land on both lcores: the retire has some to move."""
                for _ in range(args.clients):
                    c = TlsClient(app.https, ctx, stop, random.Random(rng.random()))
                    clients.append(c)
                    c.start()
                time.sleep(0.4)

            try:
                per_cycle = cycles(app, args.cycles, args.pause, more)
            finally:
                stop.set()
                for c in clients:
                    c.join(15)
            errors = [c.error for c in clients if c.error]
            tls = app.telemetry("/tls")["/tls"]
            log("https keep-alive (%s): %d TLS connections, %d cycles 2->1->2, %d answers, "
                "moved by each retire %s, %d handshakes"
                % (driver, len(clients), args.cycles, sum(c.ok for c in clients),
                   per_cycle, tls["handshakes"]))
            check(not errors, "%d of %d TLS connections failed: %s"
                  % (len(errors), len(clients), errors[:3]))
            check(all(c.ok > 0 for c in clients), "a connection got no answer")
            check(all(c.same_port for c in clients), "a client reconnected")
            # One handshake per client, none after a move: the sessions went on.
            check(tls["handshakes"] == len(clients), "handshakes %d for %d clients"
                  % (tls["handshakes"], len(clients)))
            check(sum(1 for m in per_cycle if m > 0) * 2 >= len(per_cycle),
                  "most retires moved nothing: %r" % per_cycle)
            app.stop()
        finally:
            app.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


# ---- cr-kv over TLS ----

def resp(s, buf, *args):
    """One RESP command on @p s; (the reply's first line or bulk body, rest of buf)."""
    s.sendall(b"*%d\r\n" % len(args) +
              b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    while b"\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("EOF before a reply")
        buf += chunk
    line, rest = buf.split(b"\r\n", 1)
    if line[:1] != b"$" or line == b"$-1":
        return line, rest
    n = int(line[1:])
    while len(rest) < n + 2:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("EOF in a bulk reply")
        rest += chunk
    return rest[:n], rest[n + 2:]


class KvTlsApp(App):
    def __init__(self, build, driver, cert, key):
        super().__init__(build, "cr-kv", driver,
                         ["--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key])
        deadline = time.monotonic() + 10.0
        m = None
        while m is None:
            m = re.search(r"listening on (\S+):(\d+) \(resp over tls\)", self._line(deadline))
        self.tls = (m.group(1), int(m.group(2)))


def t_kv_tls(build, driver, args):
    d = tempfile.mkdtemp(prefix="cr-move.")
    try:
        cert, key = make_cert(d)
        app = KvTlsApp(build, driver, cert, key)
        try:
            ctx = ssl.create_default_context(cafile=cert)
            clients = []
            counts = {"ok": 0, "unavailable": 0}

            def step(tag):
                for i, (s, buf) in enumerate(clients):
                    k, v = b"move:%d" % i, b"%s:%d" % (tag, i)
                    r, buf = resp(s, buf, b"SET", k, v)
                    if r == b"+OK":
                        r, buf = resp(s, buf, b"GET", k)
                        check(r == v, "client %d: GET %r, set %r" % (i, r, v))
                        counts["ok"] += 1
                    else:
                        check(b"unavailable" in r, "client %d: SET answered %r" % (i, r))
                        counts["unavailable"] += 1
                    clients[i] = (s, buf)

            def more(c):
                for _ in range(args.clients):
                    raw = socket.create_connection(app.tls, timeout=5.0)
                    clients.append((ctx.wrap_socket(raw, server_hostname="localhost"), b""))
                time.sleep(0.2)
                step(b"before%d" % c)

            per_cycle = []
            try:
                for c in range(args.cycles):
                    per_cycle += cycles(app, 1, args.pause, lambda _: more(c))
                    step(b"after%d" % c)
            except (OSError, EOFError, ssl.SSLError) as e:
                raise Failure("a TLS client failed after %r: %r" % (counts, e)) from None
            tls = app.telemetry("/tls")["/tls"]
            log("kv over TLS (%s): %d clients, %d cycles 2->1->2, %r, moved by each retire "
                "%s, %d handshakes" % (driver, len(clients), args.cycles, counts, per_cycle,
                                       tls["handshakes"]))
            check(tls["handshakes"] == len(clients), "handshakes %d for %d clients"
                  % (tls["handshakes"], len(clients)))
            check(sum(1 for m in per_cycle if m > 0) * 2 >= len(per_cycle),
                  "most retires moved nothing: %r" % per_cycle)
            for s, _ in clients:
                s.close()
            app.stop()
        finally:
            app.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


# ---- wrk, plain keep-alive ----

def wrk_result(out):
    n = re.search(r"(\d+) requests in", out)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), "
                     r"timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return (int(n.group(1)) if n else None, errs.group(0) if errs else None,
            non2xx.group(0) if non2xx else None)


def t_wrk_http(build, driver, args):
    """One wrk run per cycle (its connections spread over both lcores, so each retire has
    some to move), lasting through the retire and the start."""
    if not shutil.which("wrk"):
        log("SKIP: no wrk")
        return SKIP
    app = App(build, "cr-http", driver)
    runs = []
    try:
        url = "http://%s:%d/plaintext" % app.addr
        secs = 3
        conns = max(args.clients, 2)

        def open_conns():
            return sum(lcore_counter(app, lc, "net_connections") for lc in (0, 1))

        def start_wrk(_):
            if runs:
                finish(runs[-1])
            # wrk is not what MALLOC_PERTURB_ (meson's) checks; under it, it starts slowly.
            env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
            w = subprocess.Popen(["wrk", "-t1", "-c%d" % conns, "-d%ds" % secs,
                                  "--timeout", "5s", url], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            runs.append([w, None])
            # Its connections all open before the retire (both lcores take some).
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and open_conns() < conns:
                time.sleep(0.02)
            time.sleep(0.2)

        def finish(run):
            if run[1] is None:
                run[1], _ = run[0].communicate(timeout=secs + 30)

        try:
            per_cycle = cycles(app, args.cycles, args.pause, start_wrk)
            finish(runs[-1])
        finally:
            for w, _ in runs:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        results = [wrk_result(out) for _, out in runs]
        log("wrk keep-alive (%s), %d cycles 2->1->2, one wrk -c%d each: requests %s, "
            "moved by each retire %s" % (driver, args.cycles, conns,
                                         [r[0] for r in results], per_cycle))
        for (w, out), (n, errs, non2xx) in zip(runs, results):
            check(w.returncode == 0 and n is not None and n > 100, "wrk did not run: %s" % out)
            check(errs is None, "wrk: %s" % errs)
            check(non2xx is None, "wrk: %s" % non2xx)
        check(sum(1 for m in per_cycle if m > 0) * 2 >= len(per_cycle),
              "most retires moved nothing: %r" % per_cycle)
        app.stop()
    finally:
        app.close()
    return 0


# ---- cr-proxy, bulk transfers ----

def seeded(n, seed):
    return random.Random(seed).randbytes(n)


class BulkBackend:
    """Reads "N SEED\\n", answers N seeded bytes; again, until the EOF."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(256)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _serve(c):
        buf = b""
        try:
            with c:
                while True:
                    while b"\n" not in buf:
                        chunk = c.recv(4096)
                        if not chunk:
                            return
                        buf += chunk
                    line, buf = buf.split(b"\n", 1)
                    n, seed = (int(x) for x in line.split())
                    c.sendall(seeded(n, seed))
        except OSError:
            return

    def close(self):
        self.ls.close()


class BulkClient(threading.Thread):
    """Sessions of 1-4 transfers of 1 KiB - 1 MiB each, one after another; each transfer's
    SHA-256 against the seeded stream's."""

    def __init__(self, addr, stop, seed):
        super().__init__(daemon=True)
        self.addr, self.stop, self.rng = addr, stop, random.Random(seed)
        self.sessions = self.transfers = self.bytes = 0
        self.error = None

    def run(self):
        deadline = time.monotonic() + TEST_TIMEOUT / 2
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                with socket.create_connection(self.addr, timeout=10.0) as s:
                    for _ in range(self.rng.randint(1, 4)):
                        n = self.rng.randint(1024, 1 << 20)
                        seed = self.rng.getrandbits(32)
                        s.sendall(b"%d %d\n" % (n, seed))
                        h, got = hashlib.sha256(), 0
                        while got < n:
                            chunk = s.recv(min(1 << 16, n - got))
                            if not chunk:
                                raise EOFError("EOF after %d of %d bytes" % (got, n))
                            h.update(chunk)
                            got += len(chunk)
                        if h.digest() != hashlib.sha256(seeded(n, seed)).digest():
                            raise Failure("transfer of %d bytes (seed %d) differs" % (n, seed))
                        self.transfers += 1
                        self.bytes += n
                self.sessions += 1
        except (OSError, EOFError, Failure) as e:
            self.error = "%s after %d sessions: %r" % (type(e).__name__, self.sessions, e)


def t_proxy_bulk(build, driver, args):
    backend = BulkBackend()
    app = App(build, "cr-proxy", driver, ["--backend", backend.addr])
    try:
        stop = threading.Event()
        clients = [BulkClient(app.addr, stop, args.seed * 100 + i) for i in range(args.clients)]
        for c in clients:
            c.start()
        try:
            time.sleep(0.3)
            cycles(app, args.cycles, args.pause)
        finally:
            stop.set()
            for c in clients:
                c.join(30)
        errors = [c.error for c in clients if c.error]
        log("proxy bulk (%s): %d clients, %d cycles 2->1->2: %d sessions, %d transfers, "
            "%.1f MiB, all SHA-256 checked"
            % (driver, len(clients), args.cycles, sum(c.sessions for c in clients),
               sum(c.transfers for c in clients),
               sum(c.bytes for c in clients) / (1 << 20)))
        check(not errors, "%d of %d clients failed: %s" % (len(errors), len(clients),
                                                           errors[:3]))
        check(all(c.transfers > 0 for c in clients), "a client made no transfer")
        app.stop()
    finally:
        app.close()
        backend.close()
    return 0


TESTS = {
    "https_keepalive": t_https_keepalive,
    "kv_tls": t_kv_tls,
    "wrk_http": t_wrk_http,
    "proxy_bulk": t_proxy_bulk,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="the build directory")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    ap.add_argument("--cycles", type=int, default=10, help="2->1->2 cycles (default 10)")
    ap.add_argument("--clients", type=int, default=8, help="clients (default 8)")
    ap.add_argument("--pause", type=float, default=0.15,
                    help="seconds after each resize step (default 0.15)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        log("SKIP: needs 2 CPUs")
        return SKIP
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failure("timed out")))
    signal.alarm(TEST_TIMEOUT)
    try:
        rc = TESTS[a.test](a.build, a.driver, a)
    except Failure as e:
        log("FAIL: %s" % e)
        for name, tail in STDERR_TAILS:
            if tail:
                log("%s's stderr (last %d lines):\n  %s" % (name, len(tail), "\n  ".join(tail)))
        return 1
    log("PASS %s (%s)" % (a.test, a.driver))
    return rc


if __name__ == "__main__":
    sys.exit(main())
