#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Resize and shutdown under load, for every app, counting what clients see (issue 12).

  lifecycle_test.py BUILD_DIR TEST [--driver uring|epoll] [--cycles N] [--seed S]

TEST is one of:
  resize_http, resize_proxy, resize_kv  short requests (one connection each) while the pool
      goes 2 -> 1 -> 2 over and over: every request gets its answer (cr-kv may answer a key
      of a retired shard with its documented "unavailable" error; a disconnect counts);
  sigterm_echo, sigterm_http, sigterm_proxy, sigterm_kv  clients in send/receive loops,
      then SIGTERM: every request sent before the signal is answered, none is reset, and
      the app exits 0 within its --shutdown-timeout;
  resize_pending  cr-http: a resize asked while an lcore still retires (held by requests
      half-read) is carried out once it is OFFLINE, not acknowledged and dropped;
  keepalive_http  cr-http: keep-alive connections, idle between requests, while the pool
      goes 2 -> 1 -> 2: none sees an EOF or an error (the retiring lcore moves them);
  unread_http  cr-http: clients that do not read a response a little longer than what
      the kernel takes of it (measured first), its tail left in lib/net's queue, then
      /lcore/retire,1: lcore 1 OFFLINE within lib/net's 2 s without progress plus its
      2 s linger (before: such a connection was never quiet enough to move, and lcore 1
      stayed RETIRING for ever);
  cycles  cr-echo: N retire/start cycles (default 100; 1000 by hand) leave its descriptors
      and its RSS where they were.

Loopback only; every loop is bounded in count and time. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
TEST_TIMEOUT = 240


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def log(msg):
    print(msg, flush=True)


STDERR_TAILS = []


class App:
    """An app child on an ephemeral port of 127.0.0.1, with its own telemetry socket."""

    def __init__(self, build, name, driver, extra=(), lcores="0,1"):
        self.name = name
        self.rt = tempfile.mkdtemp(prefix="cr-life.")
        os.chmod(self.rt, 0o700)
        exe = os.path.join(build, "app", name, name)
        self.args = [exe, "-l", lcores, "--io-driver", driver, "--listen", "127.0.0.1:0"]
        self.args += list(extra)
        if os.environ.get("CR_LIFE_LOG"):
            self.args += ["--log-level", os.environ["CR_LIFE_LOG"]]
        env = dict(os.environ, XDG_RUNTIME_DIR=self.rt)
        env.setdefault("ASAN_OPTIONS", "exitcode=23")
        # stderr to a file (a pipe nobody reads could fill up and block the app's logs):
        # shown when a check fails.
        self.errpath = os.path.join(self.rt, "stderr")
        self.errf = open(self.errpath, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=self.errf, env=env)
        self.out = b""
        deadline = time.monotonic() + 15.0
        while True:
            line = self._line(deadline)
            m = re.search(r"listening on (\S+?)[ ,]", line + " ")
            if m:
                break
        host, port = m.group(1).rsplit(":", 1)
        self.addr = (host, int(port))
        self.tpath = os.path.join(self.rt, "coreact", "%s.%d.sock" % (name, self.proc.pid))

    def _line(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.kill()
                raise Failure("%s did not become ready: %r %r" % (self.name, self.out,
                                                                  self.stderr_text()))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if chunk:
                    self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        return line.decode(errors="replace")

    def telemetry(self, cmd, timeout=5.0):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.tpath)
            s.sendall(cmd.encode() + b"\n")
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])

    def state(self, lcore):
        for lc in self.telemetry("/lcores")["/lcores"]:
            if lc["lcore"] == lcore:
                return lc["state"]
        return None

    def wait_state(self, lcore, state, limit=15.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.state(lcore) == state:
                return
            time.sleep(0.01)
        raise Failure("%s: lcore %d not %s within %.0f s (it is %s)"
                      % (self.name, lcore, state, limit, self.state(lcore)))

    def fds(self):
        """Open descriptors, once settled: the telemetry socket of the request just
        answered may still be closing. The lowest of a few samples 20 ms apart."""
        n = []
        for _ in range(5):
            n.append(len(os.listdir("/proc/%d/fd" % self.proc.pid)))
            time.sleep(0.02)
        return min(n)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stderr_text(self):
        try:
            with open(self.errpath, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def wait_exit(self, timeout):
        """The exit status after a signal: must be 0, stderr free of sanitizer reports."""
        try:
            self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure("%s did not exit within %.0f s" % (self.name, timeout))
        text = self.stderr_text()
        if os.environ.get("CR_LIFE_LOG"):
            sys.stderr.write(text)
        check("Sanitizer" not in text and "runtime error:" not in text,
              "sanitizer report:\n" + text)
        check(self.proc.returncode == 0, "%s exited with %d:\n%s"
              % (self.name, self.proc.returncode, text[-2000:]))

    def stop(self, timeout=20.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        self.wait_exit(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.kill()
        self.errf.close()
        # Kept for main() to show should a check have failed.
        lines = self.stderr_text().splitlines()
        STDERR_TAILS.append((self.name, lines[-40:]))
        shutil.rmtree(self.rt, ignore_errors=True)


class Backend:
    """A threaded HTTP/1.1 backend for cr-proxy: answers every request, keep-alive."""

    def __init__(self):
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1024)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _serve(c):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                close = b"connection: close" in head.lower()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%s\r\nok"
                          % (b"Connection: close\r\n" if close else b""))
                if close:
                    return
        except OSError:
            return
        finally:
            c.close()

    def close(self):
        self.stopped = True
        self.ls.close()


# ---- clients ----

def read_http_response(s, buf=b""):
    """One response (head + Content-Length body). Returns (status, rest) or raises."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("EOF before the response head")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("EOF inside the response body")
        rest += chunk
    return status, rest[n:]


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}
        self.samples = {}

    def add(self, what, detail=None):
        with self.lock:
            self.c[what] = self.c.get(what, 0) + 1
            if detail is not None and what not in self.samples:
                self.samples[what] = detail

    def get(self, what):
        return self.c.get(what, 0)

    def failures(self, ok=("ok", "unavailable", "late")):
        return {k: v for k, v in self.c.items() if k not in ok}


def classify(exc):
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "reset"
    if isinstance(exc, socket.timeout):
        return "timeout"
    if isinstance(exc, EOFError):
        return "eof"
    return "error"


def one_request(proto, addr):
    """One short request on its own connection; what the client saw."""
    try:
        s = socket.create_connection(addr, timeout=5.0)
    except OSError as e:
        return classify(e), repr(e)
    try:
        s.settimeout(5.0)
        if proto == "http":
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            status, _ = read_http_response(s)
            return ("ok" if status == 200 else "status_%d" % status), None
        if proto == "proxy":
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            status, _ = read_http_response(s)
            return ("ok" if status == 200 else "status_%d" % status), None
        # kv: a GET of a random key lands on either shard
        key = b"k%d" % random.randrange(1 << 30)
        s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key))
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                raise EOFError("EOF before the reply")
            buf += chunk
        if buf.startswith(b"$-1\r\n") or buf.startswith(b"$"):
            return "ok", None
        if buf.startswith(b"-") and b"unavailable" in buf.lower():
            return "unavailable", None
        return "bad_reply", buf[:80]
    except Exception as e:  # noqa: BLE001 - classified and counted
        return classify(e), repr(e)
    finally:
        s.close()


def storm(proto, addr, stop, counts, rng_seed):
    random.seed(rng_seed)
    while not stop.is_set():
        what, detail = one_request(proto, addr)
        counts.add(what, detail)


def resize_cycles(app, cycles, pause):
    """/pool/resize,1 then ,2, each answered OK (or pending); bounded."""
    replies = []
    for _ in range(cycles):
        for n in (1, 2):
            r = app.telemetry("/pool/resize,%d" % n)
            check("error" not in json.dumps(r), "resize to %d refused: %r" % (n, r))
            replies.append(r)
            time.sleep(pause)
    return replies


def t_resize(build, driver, args, proto):
    name = {"http": "cr-http", "proxy": "cr-proxy", "kv": "cr-kv"}[proto]
    backend = Backend() if proto == "proxy" else None
    extra = ["--backend", backend.addr] if backend else []
    app = App(build, name, driver, extra)
    try:
        stop = threading.Event()
        counts = Counts()
        threads = [threading.Thread(target=storm, args=(proto, app.addr, stop, counts,
                                                        args.seed * 100 + i))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.3)
            replies = resize_cycles(app, args.cycles, args.pause)
            time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join(15)
        app.wait_state(1, "RUNNING")
        pending = sum(1 for r in replies if "pending" in json.dumps(r))
        log("resize storm %s (%s): %d cycles of 2->1->2 (%d answered pending): %r"
            % (name, driver, args.cycles, pending, counts.c))
        for k, v in counts.samples.items():
            log("  first %s: %s" % (k, v))
        check(counts.get("ok") > 50, "too few requests to mean anything: %r" % counts.c)
        check(not counts.failures(), "client errors during the resizes: %r"
              % counts.failures())
        app.stop()
    finally:
        app.close()
        if backend:
            backend.close()
    return 0


# ---- SIGTERM under load ----

class LoopClient(threading.Thread):
    """Requests back to back, on one connection or (short) one connection each;
    remembers when its last one was sent."""

    def __init__(self, proto, addr, counts, kill_at, stop, mode):
        super().__init__(daemon=True)
        self.proto, self.addr, self.counts = proto, addr, counts
        self.kill_at, self.stop = kill_at, stop
        self.short, self.bulk = mode == "short", mode == "bulk"
        self.sent = None

    def request(self, s, buf):
        if self.proto == "echo":
            # Eight messages at once (64 KiB from a bulk client): some are still in the
            # server's kernel at any time.
            msg = os.urandom(65536 if self.bulk else 256)
            s.sendall(msg)
            t = self.sent = time.monotonic()
            got = b""
            while len(got) < len(msg):
                chunk = s.recv(len(msg) - len(got))
                if not chunk:
                    raise EOFError("EOF before the echo")
                got += chunk
            if got != msg:
                return t, "corrupt", buf
            return t, "ok", buf
        if self.proto in ("http", "proxy"):
            # Two pipelined: the second is often still in the server's kernel.
            req = b"GET /plaintext HTTP/1.1\r\nHost: t\r\n%s\r\n" % (
                b"Connection: close\r\n" if self.short else b"")
            n = 1 if self.short else 8 if self.bulk else 2
            s.sendall(req * n)
            t = self.sent = time.monotonic()
            what = "ok"
            for _ in range(n):
                status, buf = read_http_response(s, buf)
                if status != 200:
                    what = "status_%d" % status
            return t, what, buf
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        t = self.sent = time.monotonic()
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                raise EOFError("EOF before the reply")
            buf += chunk
        line, buf = buf.split(b"\r\n", 1)
        return t, ("ok" if line == b"+PONG" else "bad_reply"), buf

    def failed(self, e):
        """A request met an error: a failure unless it was sent after the signal."""
        kill_at = self.kill_at[0]
        if kill_at is not None and (self.sent is None or self.sent > kill_at):
            self.counts.add("late")  # may meet the close (or a refused connect)
        else:
            self.counts.add("unanswered_" + classify(e), repr(e))

    def run(self):
        s = None
        buf = b""
        try:
            while not self.stop.is_set():
                # When the last send returned: the request was in the server's kernel
                # then (loopback delivers within the send). None: not sent at all.
                self.sent = None
                try:
                    if s is None:
                        s = socket.create_connection(self.addr, timeout=10.0)
                        s.settimeout(10.0)
                        buf = b""
                    _, what, buf = self.request(s, buf)
                except Exception as e:  # noqa: BLE001 - classified in failed()
                    self.failed(e)
                    return
                self.counts.add(what)
                if what != "ok":
                    return
                if self.short:
                    s.close()
                    s = None
        finally:
            if s is not None:
                s.close()


def sigterm_round(build, driver, args, proto, name, backend):
    # cr-proxy waits for live sessions up to its --shutdown-timeout, then lets them go:
    # a short one keeps the run short (what is answered before the signal is the point).
    extra = ["--shutdown-timeout", "2" if backend else "10"]
    extra += ["--backend", backend.addr] if backend else []
    app = App(build, name, driver, extra)
    try:
        counts = Counts()
        kill_at = [None]
        stop = threading.Event()
        # Kept-open connections (pipelining a little), bulk ones (a lot), and one
        # connection a request.
        modes = ["keep", "keep", "bulk", "short"]
        clients = [LoopClient(proto, app.addr, counts, kill_at, stop, modes[i % 4])
                   for i in range(args.clients)]
        for c in clients:
            c.start()
        time.sleep(1.0)
        before = dict(counts.c)
        # Taken before the signal: a request whose send returned earlier reached the
        # server's kernel before the stop began (loopback delivers within the send).
        kill_at[0] = time.monotonic()
        t0 = time.monotonic()
        app.proc.send_signal(signal.SIGTERM)
        app.wait_exit(15)
        took = time.monotonic() - t0
        stop.set()
        for c in clients:
            c.join(15)
        log("SIGTERM %s (%s): %d clients, %d answered before the signal; after it: %r; "
            "exit 0 in %.2f s" % (name, driver, args.clients, before.get("ok", 0), counts.c,
                                   took))
        for k, v in counts.samples.items():
            log("  first %s: %s" % (k, v))
        check(before.get("ok", 0) > 20, "too few requests before the signal: %r" % before)
        check(not counts.failures(), "requests sent before SIGTERM went unanswered: %r"
              % counts.failures())
    finally:
        app.close()


def sigterm_wrk(build, driver):
    """wrk, one connection a request, and SIGTERM a second in: no read error (an EOF or
    reset where an answer was due). Connects refused after the stop, which wrk counts as
    connect or write errors, are allowed."""
    app = App(build, "cr-http", driver, ["--shutdown-timeout", "10"])
    try:
        # Not under meson's MALLOC_PERTURB_ (it checks our app, not wrk): with it wrk
        # takes 1-2 s to open its first connection, after the SIGTERM below.
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
        w = subprocess.Popen(["wrk", "-t1", "-c32", "-d3s", "-H", "Connection: close",
                              "http://%s:%d/plaintext" % app.addr], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)
        app.proc.send_signal(signal.SIGTERM)
        app.wait_exit(15)
        out, _ = w.communicate(timeout=30)
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                      out)
        n = re.search(r"(\d+) requests in", out)
        log("SIGTERM cr-http under wrk -c32 Connection: close (%s): %s requests, %s"
            % (driver, n.group(1) if n else "?", m.group(0) if m else "no socket errors"))
        check(n is not None and int(n.group(1)) > 100, "wrk did not run: %s" % out)
        if m:
            check(m.group(2) == "0" and m.group(4) == "0",
                  "answers lost at SIGTERM: %s" % m.group(0))
    finally:
        app.close()


def t_sigterm(build, driver, args, proto):
    name = {"echo": "cr-echo", "http": "cr-http", "proxy": "cr-proxy", "kv": "cr-kv"}[proto]
    backend = Backend() if proto == "proxy" else None
    try:
        for _ in range(args.rounds):
            sigterm_round(build, driver, args, proto, name, backend)
            if proto == "http" and shutil.which("wrk"):
                sigterm_wrk(build, driver)
    finally:
        if backend:
            backend.close()
    return 0


# ---- a resize asked while an lcore is still retiring ----

def t_resize_pending(build, driver, args):
    app = App(build, "cr-http", driver)
    try:
        held = []
        for _ in range(20):
            s = socket.create_connection(app.addr, timeout=5.0)
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n")  # the head is not done
            held.append(s)
        time.sleep(0.2)
        r1 = app.telemetry("/pool/resize,1")
        check("error" not in json.dumps(r1), "resize 1: %r" % r1)
        time.sleep(0.5)
        state = app.state(1)
        check(state == "RETIRING", "lcore 1 is %s with requests half-read on it" % state)
        r2 = app.telemetry("/pool/resize,2")
        check("error" not in json.dumps(r2), "resize 2: %r" % r2)
        check("pending" in json.dumps(r2), "a resize meeting a RETIRING lcore is not said "
              "to be pending: %r" % r2)
        # The requests finish: answered, the lcore retires, and the resize is carried out.
        answered = 0
        for s in held:
            s.settimeout(5.0)
            s.sendall(b"\r\n")
            status, _ = read_http_response(s)
            answered += status == 200
            s.close()
        check(answered == 20, "%d of 20 held requests answered" % answered)
        app.wait_state(1, "RUNNING", limit=15)
        running = app.telemetry("/info")["/info"]["running"]
        check(running == 2, "%d lcores running after the pending resize" % running)
        log("resize while retiring (%s): acknowledged as pending (%s), carried out once "
            "lcore 1 was OFFLINE; 20/20 held requests answered"
            % (driver, r2["/pool/resize"].get("pending", "")[:40] if "/pool/resize" in r2
               else r2))
        app.stop()
    finally:
        app.close()
    return 0


# ---- retire/start cycles leave nothing behind ----

def t_cycles(build, driver, args):
    app = App(build, "cr-echo", driver)
    try:
        for _ in range(5):  # warm up: allocations a first cycle makes once
            app.telemetry("/pool/resize,1")
            app.wait_state(1, "OFFLINE")
            app.telemetry("/pool/resize,2")
            app.wait_state(1, "RUNNING")
        fds0, rss0 = app.fds(), app.rss_kib()
        for _ in range(args.cycles):
            app.telemetry("/pool/resize,1")
            app.wait_state(1, "OFFLINE")
            app.telemetry("/pool/resize,2")
            app.wait_state(1, "RUNNING")
        fds1, rss1 = app.fds(), app.rss_kib()
        for _ in range(8):  # served, whichever lcore takes it
            s = socket.create_connection(app.addr, timeout=5.0)
            s.sendall(b"y")
            check(s.recv(1) == b"y", "no echo after the cycles")
            s.close()
        log("cycles (%s): %d retire/start cycles: fds %d -> %d, RSS %d -> %d KiB"
            % (driver, args.cycles, fds0, fds1, rss0, rss1))
        check(fds1 == fds0, "descriptors grew from %d to %d" % (fds0, fds1))
        # RSS moves by the allocator's page reuse; a leaked ring per cycle would be
        # ~40 KiB each (4 MiB per 100 cycles). A sanitizer build's RSS holds what ASan
        # keeps in quarantine: its leaks are LeakSanitizer's report at exit instead.
        libs = subprocess.run(["ldd", app.args[0]], capture_output=True, timeout=10).stdout
        if b"libasan" in libs or b"libtsan" in libs:
            log("a sanitizer build: RSS not compared")
        else:
            check(rss1 - rss0 < 1024 + args.cycles,
                  "RSS grew from %d to %d KiB" % (rss0, rss1))
        app.stop()
    finally:
        app.close()
    return 0


# ---- keep-alive connections across resizes (issue 17: connections move) ----

class KeepAliveClient(threading.Thread):
    """One keep-alive connection for the whole run: a request, an idle pause of 0-30 ms
    (the connection sits between requests, where a retire finds most of them), again.
    Any EOF, reset, timeout or non-200 answer, or an answer that says close, is a failure."""

    def __init__(self, addr, stop, rng):
        super().__init__(daemon=True)
        self.addr, self.stop, self.rng = addr, stop, rng
        self.ok = 0
        self.error = None

    def run(self):
        try:
            with socket.create_connection(self.addr, timeout=5.0) as s:
                buf = b""
                deadline = time.monotonic() + TEST_TIMEOUT / 2
                while not self.stop.is_set() and time.monotonic() < deadline:
                    s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
                    status, buf, head = read_http_response_head(s, buf)
                    if status != 200 or re.search(rb"(?i)\r\nconnection:\s*close", head):
                        raise Failure("status %d, head %r" % (status, head))
                    self.ok += 1
                    time.sleep(self.rng.random() * 0.03)
        except (OSError, EOFError, Failure) as e:
            self.error = "%s after %d answers: %r" % (type(e).__name__, self.ok, e)


def read_http_response_head(s, buf):
    """As read_http_response, with the head too."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("EOF before the response head")
        buf += chunk
    head = buf.split(b"\r\n\r\n", 1)[0]
    status, rest = read_http_response(s, buf)
    return status, rest, head


def lcore_counter(app, lcore, name):
    for lc in app.telemetry("/stats,%d" % lcore)["/stats"]["lcores"]:
        if lc["lcore"] == lcore:
            return lc[name]
    raise Failure("no lcore %d in /stats" % lcore)


def t_keepalive_http(build, driver, args):
    """Keep-alive connections stay up across 2->1->2 resizes: each retire moves the
    retiring lcore's connections to the one that stays (net_moved_out), none sees an EOF."""
    app = App(build, "cr-http", driver)
    try:
        stop = threading.Event()
        rng = random.Random(args.seed)
        clients = [KeepAliveClient(app.addr, stop, random.Random(rng.random()))
                   for _ in range(args.clients)]
        for c in clients:
            c.start()
        try:
            time.sleep(0.3)
            for _ in range(args.cycles):
                check("error" not in json.dumps(app.telemetry("/pool/resize,1")), "resize 1")
                app.wait_state(1, "OFFLINE")
                time.sleep(args.pause)
                check("error" not in json.dumps(app.telemetry("/pool/resize,2")), "resize 2")
                app.wait_state(1, "RUNNING")
                time.sleep(args.pause)
        finally:
            stop.set()
            for c in clients:
                c.join(15)
        errors = [c.error for c in clients if c.error]
        check(not errors, "%d of %d keep-alive connections failed: %s"
              % (len(errors), len(clients), errors[:3]))
        moved = lcore_counter(app, 1, "net_moved_out")
        log("keep-alive (%s): %d connections, %d cycles 2->1->2, %d answers, "
            "lcore 1 moved out %d (its incarnation now), lcore 0 moved in %d"
            % (driver, len(clients), args.cycles, sum(c.ok for c in clients), moved,
               lcore_counter(app, 0, "net_moved_in")))
        check(all(c.ok > 0 for c in clients), "a connection got no answer")
        check(lcore_counter(app, 0, "net_moved_in") > 0, "no connection was moved")
        app.stop()
    finally:
        app.close()
    return 0


def t_unread_http(build, driver, args):
    root = tempfile.mkdtemp(prefix="cr-life-www.")
    big = 8 << 20
    with open(os.path.join(root, "probe.bin"), "wb") as f:
        f.write(b"p" * big)
    app = App(build, "cr-http", driver, ["--root", root, "--splice-min", "0"])
    conns = []
    try:
        def sent():
            return sum(lc["net_bytes_out"]
                       for lc in app.telemetry("/stats")["/stats"]["lcores"])

        def nonreader(path):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(5.0)
            s.connect(app.addr)
            s.sendall(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
            conns.append(s)

        # What the kernel takes of a response nobody reads (its send buffer's worth).
        b0 = sent()
        nonreader("probe.bin")
        took, deadline = 0, time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.2)
            n = sent() - b0
            if n == took:
                break
            took = n
        check(0 < took < big, "the kernel took %d bytes of a response not read" % took)
        conns.pop().close()
        head = 200  # about the response head: the body's tail stays in lib/net's queue
        for d in (2048, 8192, 16384):
            with open(os.path.join(root, "f%d.bin" % d), "wb") as f:
                f.write(b"b" * (took - head + d))
        for d in (2048, 8192, 16384):
            for _ in range(3):  # some land on lcore 1
                nonreader("f%d.bin" % d)
        time.sleep(0.5)
        check("error" not in json.dumps(app.telemetry("/lcore/retire,1")), "retire")
        t0 = time.monotonic()
        app.wait_state(1, "OFFLINE", limit=10)
        took_s = time.monotonic() - t0
        log("unread responses (%s): the kernel takes %d bytes; lcore 1 OFFLINE %.1f s after "
            "the retire" % (driver, took, took_s))
        check(took_s < 2 + 2 + 1.5, "lcore 1 OFFLINE only after %.1f s" % took_s)
        for s in conns:
            s.close()
        app.stop()
    finally:
        app.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


TESTS = {
    "keepalive_http": t_keepalive_http,
    "unread_http": t_unread_http,
    "resize_http": lambda b, d, a: t_resize(b, d, a, "http"),
    "resize_proxy": lambda b, d, a: t_resize(b, d, a, "proxy"),
    "resize_kv": lambda b, d, a: t_resize(b, d, a, "kv"),
    "sigterm_echo": lambda b, d, a: t_sigterm(b, d, a, "echo"),
    "sigterm_http": lambda b, d, a: t_sigterm(b, d, a, "http"),
    "sigterm_proxy": lambda b, d, a: t_sigterm(b, d, a, "proxy"),
    "sigterm_kv": lambda b, d, a: t_sigterm(b, d, a, "kv"),
    "resize_pending": t_resize_pending,
    "cycles": t_cycles,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="the build directory")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    ap.add_argument("--cycles", type=int, default=None,
                    help="resize cycles (resize_*: default 10) or retire/start cycles "
                    "(cycles: default 100)")
    ap.add_argument("--clients", type=int, default=None,
                    help="client threads (resize_*: default 6, sigterm_*: default 32)")
    ap.add_argument("--pause", type=float, default=0.15,
                    help="seconds between two resize requests (default 0.15)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="sigterm_*: apps started, loaded and stopped in turn (default 2)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.cycles is None:
        a.cycles = 100 if a.test == "cycles" else 10
    if a.clients is None:
        a.clients = 32 if a.test.startswith("sigterm") else 6
    if len(os.sched_getaffinity(0)) < 2:
        log("SKIP: needs 2 CPUs")
        return SKIP
    random.seed(a.seed)
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
