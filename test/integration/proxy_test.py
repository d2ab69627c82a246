#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Fault and behaviour tests of app/cr-proxy with real clients and backends on loopback.

  proxy_test.py CR_PROXY TEST [--driver uring|epoll]

Each test starts its own cr-proxy and Python backends on ephemeral ports of 127.0.0.1, is
bounded in time, kills what it started on the way out, and exits 0 (pass) or 1 (fail).
"""
import argparse
import hashlib
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import apptest
from started import Failure, check, wait_for

TEST_TIMEOUT = 100  # seconds; meson's own timeout is above this
LOOP = "127.0.0.1"


def log(msg):
    print(msg, flush=True)


def recv_all(s, limit=1 << 30):
    """Read until EOF; a reset ends it too. Returns (bytes, 'eof'|'reset')."""
    buf = bytearray()
    while len(buf) < limit:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            return bytes(buf), "reset"
        if not d:
            return bytes(buf), "eof"
        buf += d
    return bytes(buf), "limit"


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(min(65536, n - len(buf)))
        if not d:
            break
        buf += d
    return bytes(buf)


def reset_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


# ---- backends ----

class Backend:
    """A threaded TCP server on 127.0.0.1; handler(conn, backend) runs per connection.
    Each accepted connection is recorded as [accept time, bytes received so far]."""

    def __init__(self, handler, name="b", port=0, backlog=128):
        self.handler = handler
        self.name = name
        self.accepted = []  # (monotonic time, record dict)
        self.lock = threading.Lock()
        self.stopping = False
        self.lsock = None
        self.port = port
        self.conns = []
        self.backlog = backlog
        self.listen()

    def listen(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((LOOP, self.port))
        ls.listen(self.backlog)
        ls.settimeout(0.05)
        self.port = ls.getsockname()[1]
        self.lsock = ls
        self.stopping = False
        self.thread = threading.Thread(target=self._accept_loop, args=(ls,), daemon=True)
        self.thread.start()

    def addr(self):
        return "%s:%d" % (LOOP, self.port)

    def _accept_loop(self, ls):
        while True:
            stopping = self.stopping
            if stopping:
                # Take what the backlog holds, then close at once: a connection the
                # kernel completed after the last accept would be reset, so keep that
                # window to the next two system calls.
                ls.setblocking(False)
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            except (BlockingIOError, OSError):
                break
            self._take(c)
        ls.close()

    def _take(self, c):
        rec = {"t": time.monotonic(), "bytes": 0, "first_data": None, "end": None,
               "how": None}
        with self.lock:
            self.accepted.append(rec)
            self.conns.append(c)
        c.setblocking(True)
        c.settimeout(30)
        threading.Thread(target=self._serve, args=(c, rec), daemon=True).start()

    def _serve(self, c, rec):
        try:
            self.handler(c, rec, self)
        except OSError:
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def unlisten(self):
        """Stop listening (new connects are refused); live connections go on."""
        self.stopping = True
        self.thread.join()

    def close(self):
        if not self.stopping:
            self.unlisten()
        with self.lock:
            for c in self.conns:
                try:
                    c.close()
                except OSError:
                    pass


def note_recv(c, rec, n=65536):
    d = c.recv(n)
    if d:
        if rec["first_data"] is None:
            rec["first_data"] = time.monotonic()
        rec["bytes"] += len(d)
    return d


def h_echo(c, rec, b):
    while True:
        d = note_recv(c, rec)
        if not d:
            break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR)


def h_name(c, rec, b):
    """Read up to a newline, answer with the backend's name and a newline, close."""
    buf = b""
    while b"\n" not in buf:
        d = note_recv(c, rec)
        if not d:
            return
        buf += d
    c.sendall(b.name.encode() + b"\n")


def h_silent(c, rec, b):
    """Read, never answer; note how the connection ended."""
    try:
        while True:
            d = note_recv(c, rec)
            if not d:
                rec["how"] = "eof"
                break
    except ConnectionResetError:
        rec["how"] = "reset"
    except socket.timeout:
        rec["how"] = "timeout"
    rec["end"] = time.monotonic()


def closed_port():
    """A bound socket that does not listen: connects to its port are refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((LOOP, 0))
    return s, "%s:%d" % (LOOP, s.getsockname()[1])


def blackhole():
    """A listener whose accept queue is full and never drained: SYNs to it are dropped,
    so a connect never completes. Returns (keep-alive objects, address)."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind((LOOP, 0))
    ls.listen(0)
    addr = ls.getsockname()
    fillers = []
    for _ in range(8):
        f = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        f.setblocking(False)
        try:
            f.connect(addr)
        except BlockingIOError:
            pass
        fillers.append(f)
    # Check: a further connect must not complete.
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(0.3)
    try:
        probe.connect(addr)
        raise Failure("blackhole: a connect to a full accept queue completed")
    except socket.timeout:
        pass
    finally:
        probe.close()
    return (ls, fillers), "%s:%d" % addr


# ---- the proxy ----

class Proxy:
    def __init__(self, exe, driver, args, lcores=None, stdout_file=True):
        self.tmp = tempfile.mkdtemp(prefix="crproxy-")
        self.tel = os.path.join(self.tmp, "tel.sock")
        self.args = [exe, "--io-driver", driver, "--telemetry", self.tel] + list(args)
        if "--listen" not in self.args and not any(a.startswith("--config") for a in args):
            self.args += ["--listen", LOOP + ":0"]
        if lcores is not None:
            self.args[1:1] = ["-l", lcores]
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "exitcode=23")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)
        self.out = b""
        self.lines = []
        deadline = time.monotonic() + 10
        line = ""
        while "listening on" not in line:
            line = self._line(deadline)
        m = re.search(r"listening on (\S+):(\d+),", line)
        check(m is not None, "ready line: %r" % line)
        self.addr = (m.group(1), int(m.group(2)))
        self.ready_line = line
        # Keep reading stdout so the proxy never blocks on a full pipe.
        self.reader = threading.Thread(target=self._drain_stdout, daemon=True)
        self.reader.start()

    def _line(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.kill()
                raise Failure("cr-proxy not ready: out=%r err=%r rc=%r"
                              % (self.out, self.proc.stderr.read(), self.proc.returncode))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        self.lines.append(line.decode())
        return line.decode()

    def _drain_stdout(self):
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk
            while b"\n" in self.out:
                line, self.out = self.out.split(b"\n", 1)
                self.lines.append(line.decode())

    def connect(self, timeout=10.0):
        return socket.create_connection(self.addr, timeout=timeout)

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
        return json.loads(buf)

    def backends(self):
        return {b["address"]: b for b in self.telemetry("/backends")["/backends"]["backends"]}

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=20.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure("cr-proxy did not stop within %.0f s of SIGTERM" % timeout)
        err = self.proc.stderr.read().decode(errors="replace")
        check("ERROR: AddressSanitizer" not in err and "runtime error:" not in err
              and "LeakSanitizer" not in err and "ThreadSanitizer" not in err,
              "sanitizer report:\n" + err)
        check(rc == 0, "cr-proxy exited with %d; stderr:\n%s" % (rc, err))
        return err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def ask(proxy, msg=b"hi\n", timeout=10.0):
    """One request through the proxy to h_name backends: returns the name that answered."""
    s = proxy.connect(timeout)
    try:
        s.sendall(msg)
        data, how = recv_all(s)
    finally:
        s.close()
    return data.decode().strip(), how


class Env:
    """What a test started, stopped in reverse order."""

    def __init__(self):
        self.things = []

    def add(self, x):
        self.things.append(x)
        return x

    def close(self):
        for x in reversed(self.things):
            try:
                if isinstance(x, Proxy):
                    x.kill()
                elif hasattr(x, "close"):
                    x.close()
            except Exception:
                pass


def h_hold(c, rec, b):
    """Answer the first line with the name, then echo until EOF."""
    buf = b""
    while b"\n" not in buf:
        d = note_recv(c, rec)
        if not d:
            return
        buf += d
    c.sendall(b.name.encode() + b"\n")
    h_echo(c, rec, b)


def hold(proxy):
    """A client that stays connected: returns (socket, name of its backend)."""
    s = proxy.connect()
    s.sendall(b"hold\n")
    line = b""
    while not line.endswith(b"\n"):
        d = s.recv(1)
        check(d != b"", "held connection closed before its answer")
        line += d
    return s, line.decode().strip()


def echo_check(s, what):
    s.sendall(b"ping")
    check(recv_exact(s, 4) == b"ping", "%s: no echo" % what)


# ---- cli ----

def t_cli(exe, driver):
    def run(*args):
        return subprocess.run([exe] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=10)

    r = run("--help")
    check(r.returncode == 0, "--help exit %d" % r.returncode)
    for opt in ("--listen", "--backend", "--balance", "--config", "--connect-timeout",
                "--retries", "--check-interval", "--rise", "--fall", "--client-timeout",
                "--server-timeout", "--maxconn", "--buffers", "--shutdown-timeout"):
        check(opt in r.stdout, "--help lacks %s" % opt)
    L = ["--listen", "127.0.0.1:0"]
    B = ["--backend", "127.0.0.1:9"]
    bad = [
        (L + ["--backend", "foo"], "--backend foo"),
        (L + ["--backend", "127.0.0.1:0"], "--backend 127.0.0.1:0"),
        (L + ["--backend", "127.0.0.1:80,weight=999"], "--backend 127.0.0.1:80,weight=999"),
        (L + B + ["--balance", "random"], "--balance random"),
        (L + B + ["--connect-timeout", "-1"], "--connect-timeout -1"),
        (L + B + ["--retries", "x"], "--retries x"),
        (L + B + ["--rise", "0"], "--rise 0"),
        (L + B + ["--maxconn", "0"], "--maxconn 0"),
        (L, "--backend"),
        (B, "--listen"),
    ]
    for args, named in bad:
        r = run(*args)
        check(r.returncode == 2, "%s: exit %d, want 2" % (args, r.returncode))
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and named in lines[0] and "accepted" in lines[0],
              "%s: want one line naming %r with what is accepted, got %r"
              % (args, named, r.stderr))
    tmp = tempfile.mkdtemp(prefix="crproxy-")
    confs = [
        ("listen 127.0.0.1:0\nbackend 127.0.0.1:9 weight 900\n", ":2: weight 900"),
        ("listen 127.0.0.1:0\n\n# c\nbalance fastest\n", ":4: balance fastest"),
        ("listen 127.0.0.1:0\nbogus 1\n", ":2: bogus"),
        ("listen\n", ":1: listen"),
    ]
    for text, named in confs:
        path = os.path.join(tmp, "bad.conf")
        with open(path, "w") as f:
            f.write(text)
        r = run("--config", path)
        check(r.returncode == 2, "config %r: exit %d, want 2" % (text, r.returncode))
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and (path + named) in lines[0],
              "config %r: want one line naming %r, got %r" % (text, path + named, r.stderr))
    r = run("--config", os.path.join(tmp, "missing.conf"))
    check(r.returncode == 2 and "missing.conf" in r.stderr, "missing config: %r" % r.stderr)
    # A directory: said as such, not as a read error.
    r = run("--config", tmp)
    check(r.returncode == 2 and r.stderr == "cr-proxy: --config %s: Is a directory\n" % tmp,
          "config a directory: %d %r" % (r.returncode, r.stderr))
    log("cli: help, %d bad options and %d bad config files OK" % (len(bad), len(confs) + 1))


# ---- relay ----

def t_basic(exe, driver):
    env = Env()
    try:
        b1 = env.add(Backend(h_name, "one"))
        b2 = env.add(Backend(h_name, "two"))
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--backend", b2.addr()]))
        names = [ask(p)[0] for _ in range(20)]
        check(set(names) == {"one", "two"}, "round robin over two backends: %r" % names)
        bs = p.backends()
        check(bs[b1.addr()]["state"] == "up" and bs[b2.addr()]["state"] == "up",
              "telemetry: %r" % bs)
        conns = bs[b1.addr()]["connections"] + bs[b2.addr()]["connections"]
        check(conns == 20, "telemetry counts %d connections, want 20" % conns)
        check(bs[b1.addr()]["bytes_out"] > 0 and bs[b1.addr()]["bytes_in"] > 0,
              "telemetry bytes: %r" % bs[b1.addr()])
        log("20 requests over two backends: %d / %d; %s" % (
            names.count("one"), names.count("two"), p.ready_line))
        p.stop()
    finally:
        env.close()


def t_refuse(exe, driver):
    env = Env()
    try:
        keep, dead = closed_port()
        env.add(keep)
        good = env.add(Backend(h_name, "good"))
        p = env.add(Proxy(exe, driver, ["--backend", dead, "--backend", good.addr(),
                                        "--check-interval", "0"]))
        for i in range(20):
            name, how = ask(p)
            check(name == "good" and how == "eof", "request %d: %r %s" % (i, name, how))
        bs = p.backends()
        check(bs[dead]["failures"] >= 1, "refusals not counted: %r" % bs[dead])
        log("20 requests answered with a refusing backend first in line (%d refusals)"
            % bs[dead]["failures"])
        p.stop()
    finally:
        env.close()


def t_alldown(exe, driver):
    env = Env()
    try:
        k1, d1 = closed_port()
        k2, d2 = closed_port()
        env.add(k1)
        env.add(k2)
        p = env.add(Proxy(exe, driver, ["--backend", d1, "--backend", d2]))
        for i in range(5):
            t0 = time.monotonic()
            s = p.connect()
            s.sendall(b"hi\n")
            data, how = recv_all(s)
            dt = time.monotonic() - t0
            s.close()
            check(data == b"" and dt < 1.0, "client %d: %r %s after %.3f s" % (i, data, how, dt))
        bs = p.backends()
        check(bs[d1]["state"] == "down" and bs[d2]["state"] == "down",
              "refusing backends not marked down: %r" % bs)
        log("all backends down: 5 clients closed promptly (last in %.1f ms)" % (dt * 1000))
        p.stop()
    finally:
        env.close()


def t_blackhole(exe, driver):
    env = Env()
    try:
        keep, hole = blackhole()
        env.add(keep[0])
        for f in keep[1]:
            env.add(f)
        good = env.add(Backend(h_name, "good"))
        # One lcore: its round robin starts with the first backend, the blackhole.
        p = env.add(Proxy(exe, driver, ["--backend", hole, "--backend", good.addr(),
                                        "--connect-timeout", "0.3", "--check-interval", "0"],
                          lcores="0"))
        times = []
        for i in range(4):
            t0 = time.monotonic()
            name, how = ask(p)
            times.append(time.monotonic() - t0)
            check(name == "good", "request %d: %r %s" % (i, name, how))
        check(times[0] >= 0.25 and times[0] < 5.0,
              "first request should wait one connect timeout: %.3f s" % times[0])
        bs = p.backends()
        check(bs[hole]["failures"] >= 1, "blackhole timeouts not counted: %r" % bs[hole])
        log("blackholed backend: requests took %s s (connect timeout 0.3 s)"
            % ", ".join("%.2f" % t for t in times))
        p.stop()
        # With checks (timing out after 0.1 s) the blackhole is marked down and skipped:
        # no request waits the 1 s connect timeout any more.
        p = env.add(Proxy(exe, driver, ["--backend", hole, "--backend", good.addr(),
                                        "--connect-timeout", "1", "--check-interval", "0.1",
                                        "--fall", "2"], lcores="0"))
        wait_for(lambda: p.backends()[hole]["state"] == "down", 5, "blackhole marked down")
        for i in range(4):
            t0 = time.monotonic()
            name, how = ask(p)
            dt = time.monotonic() - t0
            check(name == "good" and dt < 0.8, "request %d after mark-down: %r in %.3f s"
                  % (i, name, dt))
        log("checks marked the blackhole down; requests then skip it")
        p.stop()
    finally:
        env.close()


def t_idle(exe, driver):
    env = Env()
    try:
        silent = env.add(Backend(h_silent, "silent"))
        p = env.add(Proxy(exe, driver, ["--backend", silent.addr(), "--server-timeout", "0.5",
                                        "--client-timeout", "20"]))
        s = p.connect()
        t0 = time.monotonic()
        s.sendall(b"hello?\n")
        data, how = recv_all(s)
        dt = time.monotonic() - t0
        s.close()
        check(data == b"" and 0.4 <= dt < 3.0, "client side: %r %s after %.2f s" % (data, how, dt))
        rec = wait_for(lambda: silent.accepted and silent.accepted[0]["end"] and
                       silent.accepted[0], 3, "backend side closed")
        check(rec["bytes"] == 7, "backend got %d bytes, want 7" % rec["bytes"])
        log("silent backend: client closed after %.2f s (%s), backend side closed (%s)"
            % (dt, how, rec["how"]))
        # The client side's own idle timeout, too.
        p.stop()
        p = env.add(Proxy(exe, driver, ["--backend", silent.addr(), "--server-timeout", "20",
                                        "--client-timeout", "0.5"]))
        s = p.connect()
        t0 = time.monotonic()
        data, how = recv_all(s)
        dt = time.monotonic() - t0
        s.close()
        check(data == b"" and 0.4 <= dt < 3.0, "idle client: %s after %.2f s" % (how, dt))
        rec = wait_for(lambda: len(silent.accepted) == 2 and silent.accepted[1]["end"] and
                       silent.accepted[1], 3, "backend side closed after client timeout")
        log("idle client closed after %.2f s, backend side closed (%s)" % (dt, rec["how"]))
        p.stop()
    finally:
        env.close()


def t_client_abort(exe, driver):
    env = Env()
    try:
        sink = env.add(Backend(h_silent, "sink"))
        p = env.add(Proxy(exe, driver, ["--backend", sink.addr()]))
        s = p.connect()
        chunk = os.urandom(65536)
        for _ in range(16):
            s.sendall(chunk)
        wait_for(lambda: sink.accepted and sink.accepted[0]["bytes"] > 0, 5, "upload started")
        reset_close(s)
        rec = wait_for(lambda: sink.accepted[0]["end"] and sink.accepted[0], 3,
                       "backend side closed after the client's reset")
        log("client reset mid-upload (%d bytes in): backend side %s" % (rec["bytes"], rec["how"]))
        wait_for(lambda: p.backends()[sink.addr()]["active"] == 0, 3, "no active connection")
        p.stop()
    finally:
        env.close()


def t_backend_rst(exe, driver):
    def h_rst(c, rec, b):
        note_recv(c, rec)
        # Queue as much as the kernel takes without blocking, then reset: the client is
        # not reading yet, so the reset comes with most of it still on its way.
        c.setblocking(False)
        blob = os.urandom(65536)
        sent = 0
        try:
            while sent < (16 << 20):
                sent += c.send(blob)
        except BlockingIOError:
            pass
        rec["sent"] = sent
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        rec["end"] = time.monotonic()

    env = Env()
    try:
        b = env.add(Backend(h_rst, "rst"))
        p = env.add(Proxy(exe, driver, ["--backend", b.addr()]))
        s = p.connect()
        s.sendall(b"get\n")
        wait_for(lambda: b.accepted and b.accepted[0]["end"], 5, "backend reset")
        time.sleep(0.3)
        data, how = recv_all(s)
        t_end = time.monotonic()
        s.close()
        sent = b.accepted[0]["sent"]
        check(how == "reset", "client saw %s after %d of %d bytes, want a reset"
              % (how, len(data), sent))
        check(len(data) < sent, "client got all %d bytes: the reset was not mid-download"
              % sent)
        check(t_end - b.accepted[0]["end"] < 3, "client not closed promptly")
        log("backend reset mid-download: client saw a reset after %d of %d bytes"
            % (len(data), sent))
        p.stop()
    finally:
        env.close()


def t_halfclose(exe, driver):
    def h_upload(c, rec, b):
        h = hashlib.sha256()
        while True:
            d = note_recv(c, rec)
            if not d:
                break
            h.update(d)
        time.sleep(0.1)
        c.sendall(h.hexdigest().encode() + b"\n")
        blob = bytes(range(256)) * 2048
        c.sendall(blob)
        c.shutdown(socket.SHUT_WR)

    def h_first(c, rec, b):
        c.sendall(b"hello" + b"x" * 300000)
        c.shutdown(socket.SHUT_WR)
        h = hashlib.sha256()
        while True:
            d = note_recv(c, rec)
            if not d:
                break
            h.update(d)
        rec["hash"] = h.hexdigest()
        rec["end"] = time.monotonic()

    env = Env()
    try:
        up = env.add(Backend(h_upload, "up"))
        p = env.add(Proxy(exe, driver, ["--backend", up.addr()]))
        s = p.connect()
        payload = os.urandom(2 << 20)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data, how = recv_all(s)
        s.close()
        want = hashlib.sha256(payload).hexdigest().encode() + b"\n" + bytes(range(256)) * 2048
        check(data == want and how == "eof",
              "client half-closed: got %d bytes (%s), want %d" % (len(data), how, len(want)))
        log("client shut its side after 2 MiB: the backend's answer still came back whole")
        p.stop()

        first = env.add(Backend(h_first, "first"))
        p = env.add(Proxy(exe, driver, ["--backend", first.addr()]))
        s = p.connect()
        data, how = recv_all(s)
        check(data == b"hello" + b"x" * 300000 and how == "eof",
              "backend half-closed: client got %d bytes (%s)" % (len(data), how))
        payload = os.urandom(2 << 20)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        rest, how = recv_all(s)
        s.close()
        rec = wait_for(lambda: first.accepted[0]["end"] and first.accepted[0], 5,
                       "backend got the client's EOF")
        check(rec["hash"] == hashlib.sha256(payload).hexdigest(),
              "backend shut its side: client's 2 MiB after it arrived as %d bytes" % rec["bytes"])
        log("backend shut its side first: the client's 2 MiB still went through")
        p.stop()
    finally:
        env.close()


def t_sha256(exe, driver):
    env = Env()
    try:
        echo = env.add(Backend(h_echo, "echo"))
        p = env.add(Proxy(exe, driver, ["--backend", echo.addr()]))
        total = 100 * 1000 * 1000
        s = p.connect(timeout=30)
        sent_hash = hashlib.sha256()
        errors = []

        def sender():
            try:
                block = os.urandom(1 << 20)
                left = total
                i = 0
                while left > 0:
                    # Vary the bytes so a reordered or repeated block shows.
                    b = struct.pack("<Q", i) + block[8:min(len(block), left)]
                    sent_hash.update(b)
                    s.sendall(b)
                    left -= len(b)
                    i += 1
                s.shutdown(socket.SHUT_WR)
            except OSError as e:
                errors.append(e)

        t0 = time.monotonic()
        th = threading.Thread(target=sender, daemon=True)
        th.start()
        got_hash = hashlib.sha256()
        got = 0
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got_hash.update(d)
            got += len(d)
        th.join(30)
        dt = time.monotonic() - t0
        s.close()
        check(not errors, "sender: %r" % errors)
        check(got == total, "received %d bytes, want %d" % (got, total))
        check(got_hash.hexdigest() == sent_hash.hexdigest(), "sha256 differs")
        log("100 MB through cr-proxy and back, byte-identical in %.2f s (sha256 %s)"
            % (dt, got_hash.hexdigest()[:16]))
        p.stop()
    finally:
        env.close()


# ---- health ----

def t_flap(exe, driver):
    """Backend two goes away and comes back, three times, while clients keep asking.
    While the proxy reports it down, it must get no proxied connection: any connection
    that reached it carrying data at time t, followed by a /backends reply (asked after
    t) that still says down, is a violation. The state only rises in that window, so
    such a reply proves the proxy chose it while it was down."""
    env = Env()
    stop = threading.Event()
    results = {"ok": 0, "err": 0}

    def load():
        while not stop.is_set():
            try:
                name, how = ask(p, timeout=5)
                results["ok" if name in ("one", "two") else "err"] += 1
            except OSError:
                results["err"] += 1

    try:
        b1 = env.add(Backend(h_name, "one"))
        b2 = env.add(Backend(h_name, "two"))
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--backend", b2.addr(),
                                        "--check-interval", "0.05", "--rise", "4",
                                        "--fall", "2", "--connect-timeout", "0.5"]))
        threads = [threading.Thread(target=load, daemon=True) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        violations = []
        polls_down = 0
        for cycle in range(3):
            b2.unlisten()
            wait_for(lambda: p.backends()[b2.addr()]["state"] == "down", 5, "two marked down")
            time.sleep(0.2)
            n_before = len(b2.accepted)
            b2.listen()
            polls = []
            while True:
                t_sent = time.monotonic()
                st = p.backends()[b2.addr()]["state"]
                polls.append((t_sent, st))
                if st == "up":
                    break
                check(time.monotonic() - polls[0][0] < 5, "two never came back up")
                time.sleep(0.005)
            last_down = max(t for t, st in polls if st == "down") if any(
                st == "down" for _, st in polls) else None
            polls_down += sum(1 for _, st in polls if st == "down")
            time.sleep(0.1)  # let data land on connections accepted just before "up"
            with b2.lock:
                window = list(b2.accepted[n_before:])
            for rec in window:
                if rec["first_data"] is not None and last_down is not None \
                        and rec["t"] < last_down:
                    violations.append((cycle, rec["t"], last_down))
            time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(10)
        check(not violations, "proxied connections reached a backend marked down: %r"
              % violations)
        used = sum(1 for rec in b2.accepted if rec["first_data"] is not None)
        bs = p.backends()
        check(used > 0, "backend two never served a client")
        check(bs[b2.addr()]["transitions"] >= 6, "transitions: %r" % bs[b2.addr()])
        check(results["ok"] > 50, "too little load: %r" % results)
        # A connection the backend had accepted when it closed its listener is reset by
        # the kernel; nothing else may fail.
        check(results["err"] <= 3, "client errors under flapping: %r" % results)
        log("3 flaps under load: %d requests (%d failed), backend two served %d, "
            "%d down-polls while it listened again, no connection while down"
            % (results["ok"] + results["err"], results["err"], used, polls_down))
        p.stop()
    finally:
        stop.set()
        env.close()


# ---- balancing, weights, config ----

def t_balance(exe, driver):
    env = Env()
    try:
        b1 = env.add(Backend(h_hold, "one"))
        b2 = env.add(Backend(h_hold, "two"))
        # Weights, one lcore: smooth weighted round robin gives exactly 3:1.
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr() + ",weight=3",
                                        "--backend", b2.addr()], lcores="0"))
        names = []
        for _ in range(40):
            s, n = hold(p)
            s.close()
            names.append(n)
        check(names.count("one") == 30 and names.count("two") == 10,
              "weights 3:1 over 40: %d / %d" % (names.count("one"), names.count("two")))
        check(names[:4].count("two") == 1, "smooth order: %r" % names[:8])
        p.stop()
        log("weights 3:1: 30 / 10")

        # leastconn: new connections go where fewest are open.
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--backend", b2.addr(),
                                        "--balance", "leastconn"]))
        held = [hold(p) for _ in range(4)]
        per = {n: sum(1 for _, m in held if m == n) for n in ("one", "two")}
        check(per == {"one": 2, "two": 2}, "leastconn spread of 4: %r" % per)
        for s, n in held:
            if n == "one":
                s.close()
        wait_for(lambda: p.backends()[b1.addr()]["active"] == 0, 3, "one's connections gone")
        more = [hold(p) for _ in range(2)]
        check([n for _, n in more] == ["one", "one"], "leastconn after closing: %r"
              % [n for _, n in more])
        for s, _ in held + more:
            s.close()
        p.stop()
        log("leastconn: 2/2, then both new ones to the emptied backend")

        # source: a client address keeps its backend; addresses spread over both.
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--backend", b2.addr(),
                                        "--balance", "source"]))
        seen = {}
        for i in range(2, 22):
            src = "127.0.0.%d" % i
            for _ in range(3):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(10)
                s.bind((src, 0))
                s.connect(p.addr)
                s.sendall(b"x\n")
                n = recv_exact(s, 4).decode().strip()
                s.close()
                seen.setdefault(src, set()).add(n)
        check(all(len(v) == 1 for v in seen.values()), "source moved: %r" % seen)
        used = {next(iter(v)) for v in seen.values()}
        check(used == {"one", "two"}, "20 sources all on %r" % used)
        p.stop()
        log("source: 20 client addresses each kept one backend, both used")

        # The same settings from a config file.
        tmp = tempfile.mkdtemp(prefix="crproxy-")
        conf = os.path.join(tmp, "proxy.conf")
        with open(conf, "w") as f:
            f.write("# cr-proxy test config\nlisten 127.0.0.1:0\nbalance roundrobin\n"
                    "backend %s weight 1\nbackend %s weight 0   # drained\n"
                    "connect-timeout 0.5\nretries 1\ncheck-interval 1\nrise 2\nfall 2\n"
                    "client-timeout 30\nserver-timeout 30\nmaxconn 100\n"
                    % (b1.addr(), b2.addr()))
        p = env.add(Proxy(exe, driver, ["--config", conf]))
        check("2 backends (roundrobin)" in p.ready_line, p.ready_line)
        names = set()
        for _ in range(6):
            s, n = hold(p)
            s.close()
            names.add(n)
        check(names == {"one"}, "weight 0 backend got clients: %r" % names)
        p.stop()
        log("config file: listen, balance, weights (0 drains), timeouts: OK")
    finally:
        env.close()


# ---- reload, drain, maxconn ----

def t_reload(exe, driver):
    env = Env()
    try:
        b1 = env.add(Backend(h_hold, "one"))
        b2 = env.add(Backend(h_hold, "two"))
        tmp = tempfile.mkdtemp(prefix="crproxy-")
        conf = os.path.join(tmp, "proxy.conf")
        with open(conf, "w") as f:
            f.write("listen 127.0.0.1:0\nbackend %s\n" % b1.addr())
        p = env.add(Proxy(exe, driver, ["--config", conf]))
        s1, n = hold(p)
        check(n == "one", "before reload: %s" % n)
        with open(conf, "w") as f:
            f.write("listen 127.0.0.1:0\nbackend %s\n" % b2.addr())
        p.signal(signal.SIGHUP)
        wait_for(lambda: any("reloaded" in l for l in p.lines), 5, "reload line")
        for _ in range(6):
            s, n = hold(p)
            s.close()
            check(n == "two", "after reload: %s" % n)
        echo_check(s1, "connection from before the reload")
        bs = p.backends()
        check(not bs[b1.addr()]["in_config"] and bs[b1.addr()]["active"] == 1,
              "old backend: %r" % bs[b1.addr()])
        with open(conf, "w") as f:
            f.write("listen 127.0.0.1:0\nbackend nowhere\n")
        p.signal(signal.SIGHUP)
        wait_for(lambda: any("failed" in l for l in p.lines), 5, "failed reload line")
        s, n = hold(p)
        s.close()
        check(n == "two", "a bad reload changed the backends: %s" % n)
        echo_check(s1, "connection from before both reloads")
        s1.close()
        log("SIGHUP: new backends used at once, live connection kept, bad file refused")
        p.stop()
    finally:
        env.close()


def t_drain(exe, driver):
    env = Env()
    try:
        b1 = env.add(Backend(h_hold, "one"))
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--shutdown-timeout", "20"]))
        s1, _ = hold(p)
        p.signal(signal.SIGTERM)
        wait_for(lambda: any("draining" in l for l in p.lines), 5, "draining line")

        def refused():
            try:
                c = socket.create_connection(p.addr, timeout=2)
            except ConnectionRefusedError:
                return True
            c.close()
            return False

        check(refused(), "new connections accepted while draining")
        time.sleep(0.5)
        echo_check(s1, "live session while draining")
        check(p.proc.poll() is None, "exited with a live session")
        t0 = time.monotonic()
        s1.close()
        p.stop(timeout=10)
        log("SIGTERM: stopped accepting, live session kept working, exit %.2f s after it "
            "closed" % (time.monotonic() - t0))

        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--shutdown-timeout", "1"]))
        s1, _ = hold(p)
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        data, how = recv_all(s1)
        s1.close()
        p.stop(timeout=10)
        dt = time.monotonic() - t0
        check(dt < 5, "shutdown timeout 1 s took %.2f s" % dt)
        log("SIGTERM with --shutdown-timeout 1: idle session closed (%s), exit after %.2f s"
            % (how, dt))
    finally:
        env.close()


def t_maxconn(exe, driver):
    env = Env()
    try:
        b1 = env.add(Backend(h_hold, "one"))
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--maxconn", "2"]))
        a, _ = hold(p)
        b, _ = hold(p)
        c = p.connect()
        c.sendall(b"third\n")
        c.settimeout(0.5)
        try:
            d = c.recv(10)
            raise Failure("third client served over --maxconn 2: %r" % d)
        except socket.timeout:
            pass
        check(len(b1.accepted) == 2, "backend saw %d connections" % len(b1.accepted))
        a.close()
        c.settimeout(5)
        check(recv_exact(c, 4) == b"one\n", "waiting client not served after a slot freed")
        echo_check(b, "second client")
        for s in (b, c):
            s.close()
        log("--maxconn 2: third client waited, served once a session ended")
        p.stop()
    finally:
        env.close()


def t_retire(exe, driver):
    """Retiring an lcore: its sessions finish (a lease holds it), new clients go to the
    other lcore; it goes offline when its last session ends, or after
    --shutdown-timeout."""
    env = Env()

    def lcores(p):
        return {l["lcore"]: l for l in p.telemetry("/stats")["/stats"]["lcores"]}

    def held_on_1(p, n=16):
        held = [hold(p) for _ in range(n)]
        on1 = lcores(p)[1]["net_connections"]
        check(on1 > 0, "none of %d sessions landed on lcore 1" % n)
        return held, on1

    try:
        b1 = env.add(Backend(h_hold, "one"))
        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--shutdown-timeout", "20"],
                          lcores="0-1"))
        held, on1 = held_on_1(p)
        r = p.telemetry("/lcore/retire,1")
        check("error" not in r, "retire: %r" % r)
        time.sleep(0.5)
        check(lcores(p)[1]["state"] == "RETIRING",
              "lcore 1 with %d connections: %r" % (on1, lcores(p)[1]["state"]))
        for s, _ in held:
            echo_check(s, "session on a retiring lcore")
        for _ in range(8):
            s, n = hold(p)
            s.close()
            check(n == "one", "new client while lcore 1 retires")
        check(lcores(p)[1]["state"] == "RETIRING", "lcore 1 left before its sessions ended")
        for s, _ in held:
            s.close()
        wait_for(lambda: lcores(p)[1]["state"] == "OFFLINE", 5,
                 "lcore 1 offline once its sessions ended")
        r = p.telemetry("/lcore/start,1")
        wait_for(lambda: lcores(p)[1]["state"] == "RUNNING", 5, "lcore 1 running again")
        held, _ = held_on_1(p)
        for s, _ in held:
            s.close()
        log("retire: %d connections on lcore 1 kept working until their clients closed; "
            "then offline, and back" % on1)
        p.stop()

        p = env.add(Proxy(exe, driver, ["--backend", b1.addr(), "--shutdown-timeout", "1"],
                          lcores="0-1"))
        held, on1 = held_on_1(p)
        t0 = time.monotonic()
        p.telemetry("/lcore/retire,1")
        wait_for(lambda: lcores(p)[1]["state"] == "OFFLINE", 8,
                 "lcore 1 offline after --shutdown-timeout")
        dt = time.monotonic() - t0
        check(dt >= 0.8, "lcore 1 went offline after %.2f s with sessions open" % dt)
        closed = alive = 0
        for s, _ in held:
            s.settimeout(2)
            try:
                s.sendall(b"ping")
                got = recv_exact(s, 4)
            except OSError:
                got = b""
            if got == b"ping":
                alive += 1
            else:
                closed += 1
            s.close()
        check(closed == on1 // 2 and alive == len(held) - closed,
              "after the timeout: %d closed, %d alive; lcore 1 had %d connections"
              % (closed, alive, on1))
        log("retire with --shutdown-timeout 1: offline after %.2f s, its %d sessions closed, "
            "the other %d alive" % (dt, closed, alive))
        p.stop()
    finally:
        env.close()


TESTS = {
    "cli": t_cli,
    "basic": t_basic,
    "refuse": t_refuse,
    "alldown": t_alldown,
    "blackhole": t_blackhole,
    "idle": t_idle,
    "client_abort": t_client_abort,
    "backend_rst": t_backend_rst,
    "halfclose": t_halfclose,
    "sha256": t_sha256,
    "flap": t_flap,
    "balance": t_balance,
    "reload": t_reload,
    "drain": t_drain,
    "maxconn": t_maxconn,
    "retire": t_retire,
}


def main(tests=None, doc=None):
    """Run the test the command line names, of @p tests (default TESTS; another file's,
    with its @p doc): exit status 0 pass, 1 fail, 77 skip."""
    tests = TESTS if tests is None else tests
    ap = argparse.ArgumentParser(description=(doc or __doc__).splitlines()[0])
    ap.add_argument("exe", help="path of cr-proxy")
    ap.add_argument("test", choices=sorted(tests))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if a.test != "cli" and apptest.skip_if_refused(a.exe, a.driver, log):
        return apptest.SKIP
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failure("timed out")))
    signal.alarm(TEST_TIMEOUT)
    try:
        tests[a.test](a.exe, a.driver)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
