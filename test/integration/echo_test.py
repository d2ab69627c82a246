#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of app/cr-echo with real clients on loopback.

  echo_test.py CR_ECHO TEST [--driver uring|epoll]

TEST is one of: cli, config, restart, basic, socat, sockperf, payload, emfile, idlefull,
greedy, faults, storm. Each starts its own
cr-echo on an ephemeral port of 127.0.0.1 / ::1, is bounded in time, kills the server on
the way out, and exits 0 (pass), 1 (fail) or 77 (skip: a client tool is missing).
"""
import argparse
import hashlib
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import apptest

TEST_TIMEOUT = 50  # seconds; meson's own timeout is above this
SKIP = 77


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def log(msg):
    print(msg, flush=True)


class Server:
    """A cr-echo child on an ephemeral port; stop() checks its exit status."""

    def __init__(self, exe, driver, listen="127.0.0.1:0", extra=(), lcores=None,
                 nofile=None):
        self.args = [exe, "--io-driver", driver, "--listen", listen] + list(extra)
        if lcores is not None:
            self.args[1:1] = ["-l", lcores]
        env = dict(os.environ)
        # A sanitizer report makes the exit status non-zero, which stop() checks.
        env.setdefault("ASAN_OPTIONS", "exitcode=23")
        pre = None
        if nofile is not None:
            def pre():
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, preexec_fn=pre)
        self.out = b""
        self.err = b""
        deadline = time.monotonic() + 10.0
        line = ""
        while "listening on" not in line:  # "telemetry on ..." may come first
            line = self._read_ready(deadline - time.monotonic())
        m = re.search(r"listening on (\S+) ", line)
        check(m is not None, "no address in ready line: %r" % line)
        addr = m.group(1)
        if addr.startswith("["):
            host, port = addr[1:].split("]:")
            self.family = socket.AF_INET6
        else:
            host, port = addr.rsplit(":", 1)
            self.family = socket.AF_INET
        self.addr = (host, int(port))
        self.ready_line = line

    def _read_ready(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.kill()
                raise Failure("cr-echo did not become ready: out=%r err=%r rc=%r"
                              % (self.out, self.proc.stderr.read(), self.proc.returncode))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        return line.decode()

    @property
    def pid(self):
        return self.proc.pid

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self, timeout=20.0):
        """SIGINT, then wait: the exit status must be 0 and stderr free of sanitizer
        reports. Returns the totals line."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure("cr-echo did not stop within %.0f s of SIGINT" % timeout)
        self.out += out
        self.err += err
        text = self.err.decode(errors="replace")
        check("ERROR: AddressSanitizer" not in text and "runtime error:" not in text
              and "LeakSanitizer" not in text, "sanitizer report:\n" + text)
        check(self.proc.returncode == 0,
              "cr-echo exited with %d (signal? %s); stderr:\n%s"
              % (self.proc.returncode, self.proc.returncode < 0, text))
        return self.out.decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def connect(self, timeout=5.0):
        s = socket.socket(self.family, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.addr)
        return s


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(min(65536, n - len(buf)))
        if not d:
            break
        buf += d
    return bytes(buf)


def echo_once(srv, payload):
    s = srv.connect()
    try:
        s.sendall(payload)
        got = recv_exact(s, len(payload))
    finally:
        s.close()
    check(got == payload, "echo of %d bytes came back as %d bytes%s"
          % (len(payload), len(got), "" if len(got) != len(payload) else " (different)"))


def stats_of(totals):
    m = re.search(r"stopped: (\d+) connections \((\d+) refused, (\d+) accept back-offs, "
                  r"(\d+) closed to make room\)"
                  r", (\d+) bytes in, (\d+) out \((\d+) short sends\); (\d+) datagrams in, "
                  r"(\d+) out, (\d+) dropped", totals)
    check(m is not None, "no totals line in %r" % totals)
    keys = ["accepted", "refused", "backoffs", "reclaimed", "bytes_in", "bytes_out", "short_sends",
            "dgram_in", "dgram_out", "dgram_drops"]
    return dict(zip(keys, map(int, m.groups())))


# ---- cli ----

def t_cli(exe, driver):
    def run(*args):
        return subprocess.run([exe] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=10)

    r = run("--help")
    check(r.returncode == 0, "--help exit %d" % r.returncode)
    for opt in ("--listen", "--udp", "--max-connections", "--idle-timeout",
                "--single-acceptor", "--sockperf", "--io-driver", "--corelist CORELIST"):
        check(opt in r.stdout, "--help lacks %s" % opt)
    bad = [
        (["--listen", "foo"], "--listen foo"),
        (["--listen", "::1:80"], "--listen ::1:80"),
        (["--listen", "127.0.0.1:65536"], "--listen 127.0.0.1:65536"),
        (["--listen", "127.0.0.1:0", "--max-connections", "0"], "--max-connections 0"),
        (["--listen", "127.0.0.1:0", "--idle-timeout", "-1"], "--idle-timeout -1"),
        (["--listen", "127.0.0.1:0", "--io-driver", "foo"], "--io-driver foo"),
        (["--listen", "127.0.0.1:0", "--bogus"], "--bogus"),
        (["--listen", "127.0.0.1:0", "extra"], "extra"),
        ([], "--listen"),
    ]
    for args, named in bad:
        r = run(*args)
        check(r.returncode == 2, "%s: exit %d, want 2" % (args, r.returncode))
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and named in lines[0] and "accepted" in lines[0],
              "%s: want one line naming %r with what is accepted, got %r"
              % (args, named, r.stderr))
    log("cli: help and %d bad values OK" % len(bad))


# ---- basic ----

def t_basic(exe, driver):
    srv = Server(exe, driver, extra=["--udp"])
    try:
        for n in (1, 100, 4096, 70000, 1 << 20):
            echo_once(srv, os.urandom(n))
        log("tcp v4 echo OK (%s)" % srv.ready_line)
        # Half-close: everything sent before our FIN comes back, then EOF.
        s = srv.connect()
        data = os.urandom(300000)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = recv_exact(s, len(data) + 1)
        s.close()
        check(got == data, "half-close: %d of %d bytes, then EOF" % (len(got), len(data)))
        log("half-close OK")
        # Many at once, interleaved.
        socks = [srv.connect() for _ in range(64)]
        msgs = [os.urandom(1000 + i) for i in range(len(socks))]
        for s, m in zip(socks, msgs):
            s.sendall(m)
        for s, m in zip(socks, msgs):
            check(recv_exact(s, len(m)) == m, "concurrent echo mismatch")
            s.close()
        log("64 concurrent connections OK")
        # UDP on the same port.
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        for n in (1, 1400, 9000, 65507):
            d = os.urandom(n)
            u.sendto(d, srv.addr)
            got, frm = u.recvfrom(70000)
            check(got == d and frm == srv.addr, "udp echo of %d bytes" % n)
        u.close()
        log("udp v4 echo OK")
        # Graceful stop with a connection open: it is closed, the process exits 0.
        idle = srv.connect()
        idle.sendall(b"pending")
        check(recv_exact(idle, 7) == b"pending", "echo before stop")
        srv.proc.send_signal(signal.SIGINT)
        check(recv_exact(idle, 1) == b"", "open connection not shut at stop")
        idle.close()
        totals = srv.stop()
        st = stats_of(totals)
        check(st["accepted"] >= 70 and st["dgram_in"] == 4, "totals: %r" % st)
        log("graceful stop OK: " + totals.strip())
    finally:
        srv.kill()

    srv = Server(exe, driver, listen="[::1]:0", extra=["--udp"])
    try:
        check(srv.family == socket.AF_INET6, "v6 ready line: " + srv.ready_line)
        echo_once(srv, os.urandom(100000))
        u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u.settimeout(5)
        u.sendto(b"six", srv.addr)
        check(u.recvfrom(100)[0] == b"six", "udp v6 echo")
        u.close()
        srv.stop()
        log("ipv6 tcp+udp OK")
    finally:
        srv.kill()

    srv = Server(exe, driver, extra=["--single-acceptor"])
    try:
        socks = [srv.connect() for _ in range(16)]
        for i, s in enumerate(socks):
            s.sendall(b"x%d" % i)
        for i, s in enumerate(socks):
            check(recv_exact(s, len(b"x%d" % i)) == b"x%d" % i, "single acceptor echo")
            s.close()
        srv.stop()
        log("single acceptor OK")
    finally:
        srv.kill()

    srv = Server(exe, driver, extra=["--idle-timeout", "0.3"])
    try:
        busy = srv.connect()
        quiet = srv.connect()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            busy.sendall(b"k")
            check(recv_exact(busy, 1) == b"k", "busy connection echo")
            time.sleep(0.05)
        quiet.settimeout(3)
        try:
            eof = quiet.recv(1) == b""
        except ConnectionResetError:
            eof = True
        check(eof, "idle connection not closed")
        check(time.monotonic() - t0 < 2.5, "idle timeout took too long")
        busy.sendall(b"z")
        check(recv_exact(busy, 1) == b"z", "busy connection closed by the idle timeout")
        busy.close()
        quiet.close()
        srv.stop()
        log("idle timeout OK")
    finally:
        srv.kill()


# ---- socat ----

def t_socat(exe, driver):
    if shutil.which("socat") is None:
        log("socat not installed: skip")
        return SKIP
    srv = Server(exe, driver, extra=["--udp"])
    srv6 = Server(exe, driver, listen="[::1]:0")
    try:
        data = os.urandom(2 << 20)
        for proto, addr in (("TCP4", "127.0.0.1:%d" % srv.addr[1]),
                            ("TCP6", "[::1]:%d" % srv6.addr[1])):
            r = subprocess.run(["socat", "-t", "5", "-T", "10", "-", "%s:%s" % (proto, addr)],
                               input=data, stdout=subprocess.PIPE, timeout=30)
            check(r.returncode == 0 and r.stdout == data,
                  "socat %s: rc %d, %d of %d bytes" % (proto, r.returncode, len(r.stdout),
                                                      len(data)))
            log("socat %s: 2 MiB echoed" % proto)
        r = subprocess.run(["socat", "-t", "2", "-", "UDP4:127.0.0.1:%d" % srv.addr[1]],
                           input=b"datagram\n", stdout=subprocess.PIPE, timeout=10)
        check(r.stdout == b"datagram\n", "socat UDP4: %r" % r.stdout)
        log("socat UDP4 OK")
        srv.stop()
        srv6.stop()
    finally:
        srv.kill()
        srv6.kill()


# ---- sockperf ----

def sockperf(args, timeout=30):
    r = subprocess.run(["sockperf"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout


def t_sockperf(exe, driver):
    if shutil.which("sockperf") is None:
        log("sockperf not installed: skip")
        return SKIP
    srv = Server(exe, driver, extra=["--udp", "--sockperf"])
    try:
        host, port = "127.0.0.1", str(srv.addr[1])
        for proto in (["--tcp"], []):
            name = "TCP" if proto else "UDP"
            rc, out = sockperf(["ping-pong", "-i", host, "-p", port, "-t", "1"] + proto)
            m = re.search(r"SentMessages=(\d+); ReceivedMessages=(\d+)", out)
            lat = re.search(r"percentile 50.000 =\s+([\d.]+)", out)
            check(rc == 0 and m and int(m.group(2)) > 100 and lat,
                  "sockperf ping-pong %s: rc %d\n%s" % (name, rc, out))
            check(int(m.group(1)) - int(m.group(2)) <= 1, "%s: replies lost: %s"
                  % (name, m.group(0)))
            log("sockperf ping-pong %s: %s messages, median latency %s us"
                % (name, m.group(2), lat.group(1)))
            rc, out = sockperf(["throughput", "-i", host, "-p", port, "-t", "1", "-m", "1400"]
                               + proto)
            m = re.search(r"Message Rate is (\d+)", out)
            check(rc == 0 and m and int(m.group(1)) > 0,
                  "sockperf throughput %s: rc %d\n%s" % (name, rc, out))
            log("sockperf throughput %s: %s msg/s of 1400 bytes" % (name, m.group(1)))
        log(srv.stop().strip())
    finally:
        srv.kill()


# ---- 100 MB payload ----

def t_payload(exe, driver, extra=()):
    size = 100 * 1000 * 1000
    srv = Server(exe, driver, extra=extra)
    try:
        s = srv.connect(timeout=30)
        rnd = random.Random(20240601)
        sent = hashlib.sha256()
        recvd = hashlib.sha256()
        nrecv = [0]
        err = []

        def reader():
            try:
                while True:
                    d = s.recv(1 << 20)
                    if not d:
                        break
                    recvd.update(d)
                    nrecv[0] += len(d)
            except Exception as e:  # reported by the main thread
                err.append(e)

        t = threading.Thread(target=reader)
        t.start()
        left = size
        t0 = time.monotonic()
        while left > 0:
            chunk = rnd.randbytes(min(1 << 20, left))
            sent.update(chunk)
            s.sendall(chunk)
            left -= len(chunk)
        s.shutdown(socket.SHUT_WR)
        t.join(TEST_TIMEOUT)
        dt = time.monotonic() - t0
        check(not t.is_alive(), "reader stuck after %d bytes" % nrecv[0])
        check(not err, "reader: %r" % err)
        s.close()
        check(nrecv[0] == size, "got %d of %d bytes" % (nrecv[0], size))
        check(sent.hexdigest() == recvd.hexdigest(), "sha256 differs")
        log("100 MB echoed byte-identical in %.2f s (%.0f MB/s), sha256 %s"
            % (dt, size / dt / 1e6, sent.hexdigest()[:16]))
        srv.stop()
    finally:
        srv.kill()


def t_payload_zc(exe, driver):
    """--zero-copy: 100 MB echoed from the held receive buffers, byte-identical; and
    it is refused beside --sockperf with exit 2."""
    p = subprocess.run([exe, "--io-driver", driver, "--listen", "127.0.0.1:0",
                        "--zero-copy", "--sockperf"], capture_output=True, timeout=10)
    check(p.returncode == 2 and b"--zero-copy" in p.stderr,
          "--zero-copy --sockperf: rc %d, %r" % (p.returncode, p.stderr))
    t_payload(exe, driver, extra=["--zero-copy"])


def t_zc_forced(exe, driver):
    """--zero-copy, a client that sends and never reads, then a stop forced by the
    shutdown timeout: the echoes queued as held receive buffers go when lib/net drops
    the connection's queue, before lib/io's driver is torn down (modules stop in the
    reverse of their dependency order). Before, in the static binaries lib/io stopped
    first (constructor order): the buffers were still held when its pool went, and the
    driver kept the memory and said so."""
    srv = Server(exe, driver, lcores="0", extra=["--zero-copy", "--shutdown-timeout", "0.5"])
    try:
        s = socket.socket(srv.family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(srv.addr)
        s.setblocking(False)
        sent, deadline = 0, time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                sent += s.send(b"z" * 65536)
            except BlockingIOError:
                time.sleep(0.01)
        srv.stop()
        s.close()
        text = srv.err.decode(errors="replace")
        for bad in ("held at stop", "lent at fini", "released but not lent",
                    "receive buffers held"):
            check(bad not in text, "%r at the forced stop:\n%s" % (bad, text))
        log("zc_forced: %d bytes sent, never read; stopped clean" % sent)
    finally:
        srv.kill()


# ---- EMFILE / ENFILE ----

def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def t_emfile(exe, driver):
    # The limit is set when the server starts (ulimit -n): io_uring's accept does not see
    # a limit lowered later with prlimit(2) on kernel 6.x, the epoll driver does.
    probe = Server(exe, driver)
    try:
        limit = open_fds(probe.pid) + 6
        probe.stop()
    finally:
        probe.kill()
    srv = Server(exe, driver, nofile=limit)
    log("server started with ulimit -n %d" % limit)
    flood = []
    try:
        live = srv.connect()
        live.sendall(b"before")
        check(recv_exact(live, 6) == b"before", "live connection")
        # Busy while the flood comes and goes: its echo is queued (it does not read yet;
        # 32 MiB is more than the kernel's socket buffers hold), so it is not idle and
        # never closed to make room; the flood's idle ones are. It reads only once the
        # flood is gone: an idle connection is closed to make room like any other (the
        # least recently active first), and under a flood that keeps coming a talking
        # client that pauses is the least recently active one.
        payload = os.urandom(32 << 20)
        sender = threading.Thread(target=live.sendall, args=(payload,), daemon=True)
        sender.start()
        time.sleep(0.3)
        for _ in range(200):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(srv.addr)
            flood.append(c)
        time.sleep(0.5)
        cpu0, t0 = srv.cpu_seconds(), time.monotonic()
        time.sleep(2.0)
        cpu = (srv.cpu_seconds() - cpu0) / (time.monotonic() - t0)
        log("CPU while out of descriptors: %.1f%% of one CPU" % (cpu * 100))
        check(cpu < 0.25, "busy loop while out of descriptors: %.0f%% CPU" % (cpu * 100))
        for c in flood:
            c.close()
        flood = []
        deadline = time.monotonic() + 10
        while True:
            try:
                echo_once(srv, b"after")
                break
            except (OSError, Failure):
                check(time.monotonic() < deadline, "accepting did not resume")
                time.sleep(0.1)
        log("accepting resumed")
        # The flood's last connections may still be in the backlog or closing: each one
        # accepted takes a descriptor, and one more EMFILE closes an idle connection to
        # make room, which the live one is between its echo's end and its next message.
        # Its echo is read once the server holds only it (and what it held at start).
        deadline = time.monotonic() + 10
        while open_fds(srv.pid) > limit - 5:
            check(time.monotonic() < deadline, "the flood's descriptors were not closed: "
                  "%d open, limit %d" % (open_fds(srv.pid), limit))
            time.sleep(0.05)
        got = recv_exact(live, len(payload))
        sender.join(10)
        check(got == payload, "live connection hurt by EMFILE: %d of %d bytes back"
              % (len(got), len(payload)))
        live.sendall(b"during")
        check(recv_exact(live, 6) == b"during", "live connection hurt by EMFILE")
        log("live connection unaffected")
        live.close()
        st = stats_of(srv.stop())
        check(st["backoffs"] > 0, "no accept back-off counted: %r" % st)
        log("accept back-offs: %d" % st["backoffs"])
    finally:
        for c in flood:
            c.close()
        srv.kill()


def idle_clients(srv, n):
    """n connections that connect and then say nothing (the kernel completes each
    handshake, accepted or not)."""
    out = []
    for _ in range(n):
        c = socket.socket(srv.family, socket.SOCK_STREAM)
        c.setblocking(False)
        c.connect_ex(srv.addr)
        out.append(c)
    return out


def closed_by_server(conns):
    """How many of conns the server has closed (EOF or reset readable), without blocking."""
    n = 0
    for c in conns:
        try:
            if c.recv(1, socket.MSG_DONTWAIT) == b"":
                n += 1
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def full_of_idle(exe, driver, extra):
    """More idle clients than the server has room for (slots or descriptors), then fresh
    clients: each is served, because the least recently active idle connections are closed
    to make room; a connection that keeps talking is not among them."""
    nofile = 400
    # One lcore: making room is per lcore (each closes its own least recently active),
    # and with two, the one that meets EMFILE more often could run out of the old idle
    # clients it got and take the live one, older than its share of the flood.
    srv = Server(exe, driver, extra=list(extra), nofile=nofile, lcores="0")
    old, flood = [], []
    try:
        old = idle_clients(srv, 300)
        time.sleep(1.0)  # accepted, and now the least recently active
        live = srv.connect()
        live.sendall(b"live")
        check(recv_exact(live, 4) == b"live", "live connection")
        # It keeps talking (every 100 ms, as a client in a conversation does) while the
        # flood arrives and the probes make room: never the least recently active one.
        talking, live_error = threading.Event(), []

        def talk():
            while not talking.wait(0.1):
                try:
                    live.sendall(b"still")
                    if recv_exact(live, 5) != b"still":
                        raise OSError("wrong echo")
                except OSError as e:
                    live_error.append(e)
                    return
        talker = threading.Thread(target=talk)
        talker.start()
        try:
            flood = idle_clients(srv, 300)
            time.sleep(0.5)
            for i in range(5):
                t0 = time.monotonic()
                try:
                    echo_once(srv, b"probe %d" % i)
                except OSError as e:
                    raise Failure("probe %d: %s after %.1f s (every slot held by idle "
                                  "clients?)" % (i, e, time.monotonic() - t0))
                log("probe %d served in %.0f ms" % (i, (time.monotonic() - t0) * 1000))
        finally:
            talking.set()
            talker.join(10)
        check(not live_error, "the live connection was closed: %s" % live_error[:1])
        fds = open_fds(srv.pid)
        check(fds <= nofile, "%d descriptors open, limit %d" % (fds, nofile))
        gone_old, gone_new = closed_by_server(old), closed_by_server(flood)
        log("closed to make room: %d of the 300 oldest, %d of the 300 newer; %d fds open"
            % (gone_old, gone_new, fds))
        check(gone_old > 0, "no idle connection was closed")
        live.close()
        st = stats_of(srv.stop())
        check(st["reclaimed"] >= gone_old + gone_new,
              "reclaimed %d, but %d closed" % (st["reclaimed"], gone_old + gone_new))
        return st
    finally:
        for c in old + flood:
            c.close()
        srv.kill()


def t_idlefull(exe, driver):
    # The default slot count fits the descriptor limit: the slots run out first (the
    # sockets accepted while full wait with descriptors of their own, so accept(2) may
    # also meet EMFILE; either way idle connections make room).
    full_of_idle(exe, driver, ["--idle-timeout", "0"])
    # More slots than descriptors: accept(2) fails with EMFILE first.
    st = full_of_idle(exe, driver, ["--idle-timeout", "0", "--max-connections", "4096"])
    check(st["backoffs"] > 0, "never out of descriptors: %r" % st)


def t_greedy(exe, driver):
    """Clients that send far more than they read (slow readers: whenever their echo
    drains, the kernel hands the server all they sent meanwhile) take the output pool
    down to the share kept for the others: they are the ones refused (and reset), never
    a client that reads its echo."""
    srv = Server(exe, driver, lcores="0")
    greedy = []
    try:
        blob = b"g" * (1 << 20)
        for _ in range(60):
            g = socket.socket(srv.family, socket.SOCK_STREAM)
            g.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            g.connect(srv.addr)
            g.setblocking(False)
            greedy.append(g)
        deadline = time.monotonic() + 8
        served = 0
        while time.monotonic() < deadline:
            for g in greedy:  # write all they can, read a little: slow readers
                try:
                    g.send(blob)
                except (BlockingIOError, OSError):
                    pass
                try:
                    g.recv(4096)
                except (BlockingIOError, OSError):
                    pass
            echo_once(srv, b"innocent %d" % served)
            served += 1
        log("%d innocent echoes served while 60 clients sent without reading" % served)
        check(served > 20, "only %d innocent echoes" % served)
    finally:
        for g in greedy:
            g.close()
        srv.kill()


# ---- faults: peer reset mid-send, EPIPE, short sends ----

def t_faults(exe, driver):
    srv = Server(exe, driver)
    try:
        for i in range(5):
            s = srv.connect()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                # Never read: the echo backs up into the server's queue and it stops
                # reading; then a reset lands in the middle of its sends.
                s.settimeout(0.5)
                blob = os.urandom(1 << 20)
                for _ in range(8):
                    s.send(blob)
            except (socket.timeout, BlockingIOError):
                pass
            if i % 2 == 0:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # RST (linger 0) or FIN with unread data (RST too, then EPIPE)
        time.sleep(0.3)
        echo_once(srv, b"still alive")
        check(srv.proc.poll() is None, "server died (SIGPIPE?)")
        log("peer resets mid-send: server alive, no SIGPIPE")

        # Short sends: a tiny receive window and a slow reader force partial sends; the
        # bytes must still come back complete and in order.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.settimeout(20)
        s.connect(srv.addr)
        data = os.urandom(4 << 20)
        got = bytearray()

        def reader():
            while len(got) < len(data):
                d = s.recv(3000)
                if not d:
                    break
                got.extend(d)
                if len(got) < 256 * 1024:
                    time.sleep(0.0005)

        t = threading.Thread(target=reader)
        t.start()
        s.sendall(data)
        t.join(30)
        s.close()
        check(bytes(got) == data, "short sends: %d of %d bytes, %s" % (
            len(got), len(data), "in order" if data.startswith(bytes(got)) else "reordered"))
        st = stats_of(srv.stop())
        log("4 MiB intact through a slow reader; short sends resumed in order: %d"
            % st["short_sends"])
    finally:
        srv.kill()


# ---- retirement under a connection storm ----

def telemetry(path, cmd, timeout=5.0):
    """One telemetry request; the decoded JSON reply."""
    import json
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(cmd.encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])


def lcore_state(path, lcore):
    for lc in telemetry(path, "/lcores")["/lcores"]:
        if lc["lcore"] == lcore:
            return lc["state"]
    return None


def wait_state(path, lcore, state, limit=10.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if lcore_state(path, lcore) == state:
            return time.monotonic()
        time.sleep(0.005)
    raise Failure("lcore %d not %s within %.0f s" % (lcore, state, limit))


def storm_client(srv, stop, counts, lock):
    """Short connections back to back: connect, 32 bytes, their echo, close."""
    payload = os.urandom(32)
    while not stop.is_set():
        try:
            s = srv.connect(timeout=5.0)
        except ConnectionRefusedError:
            what = "refused"
        except ConnectionResetError:
            what = "reset"
        except OSError:
            what = "connect_error"
        else:
            try:
                s.sendall(payload)
                got = recv_exact(s, len(payload))
                what = "ok" if got == payload else ("eof" if len(got) < len(payload)
                                                    else "corrupt")
            except ConnectionResetError:
                what = "reset"
            except BrokenPipeError:
                what = "reset"
            except socket.timeout:
                what = "timeout"
            finally:
                s.close()
        with lock:
            counts[what] = counts.get(what, 0) + 1


def t_storm(exe, driver):
    """Retire lcore 1 and start it again, twice, under a storm of short connections:
    the clients count no reset and no refusal, and lcore 1 accepts again after each
    start. A connection live on lcore 1 when it retires is closed gracefully (EOF,
    never RST): counted as eof, reported, not a failure."""
    if len(os.sched_getaffinity(0)) < 2:
        log("SKIP: needs 2 CPUs")
        return SKIP
    rt = tempfile.mkdtemp(prefix="cr-storm.")
    os.chmod(rt, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = rt
    srv = Server(exe, driver, lcores="0,1")
    try:
        tpath = os.path.join(rt, "coreact", "cr-echo.%d.sock" % srv.pid)
        stop = threading.Event()
        counts, lock = {}, threading.Lock()
        threads = [threading.Thread(target=storm_client, args=(srv, stop, counts, lock))
                   for _ in range(6)]
        for t in threads:
            t.start()
        accepted_after = []
        try:
            for cycle in range(2):
                time.sleep(0.4)
                t0 = time.monotonic()
                r = telemetry(tpath, "/lcore/retire,1")
                check("error" not in json_text(r), "retire refused: %r" % r)
                t1 = wait_state(tpath, 1, "OFFLINE")
                log("cycle %d: /lcore/retire,1 -> OFFLINE in %.1f ms" % (cycle, (t1 - t0) * 1e3))
                time.sleep(0.3)
                r = telemetry(tpath, "/lcore/start,1")
                check("error" not in json_text(r), "start refused: %r" % r)
                wait_state(tpath, 1, "RUNNING")
                time.sleep(0.4)
                st = telemetry(tpath, "/stats")["/stats"]["lcores"]
                accepted_after.append([lc["net_accepted"] for lc in st if lc["lcore"] == 1][0])
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        log("storm (%s): %r; lcore 1 accepted after each restart: %r"
            % (driver, counts, accepted_after))
        check(counts.get("ok", 0) > 100, "too few exchanges to mean anything: %r" % counts)
        for bad in ("reset", "refused", "connect_error", "corrupt", "timeout"):
            check(counts.get(bad, 0) == 0, "%d %s during retirement: %r"
                  % (counts.get(bad, 0), bad, counts))
        check(all(n > 0 for n in accepted_after),
              "lcore 1 accepted nothing after a restart: %r" % accepted_after)
    finally:
        srv.stop()
        shutil.rmtree(rt, ignore_errors=True)
    return 0


def json_text(obj):
    import json
    return json.dumps(obj)


# ---- lib/app: --config, per-lcore duties after a restart, SIGUSR1 ----

def udp_sockets(port):
    """UDP sockets bound to @p port (IPv4), from /proc/net/udp."""
    n = 0
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            local = line.split()[1]
            if int(local.split(":")[1], 16) == port:
                n += 1
    return n


def wait_udp_sockets(port, want, limit=10.0):
    """UDP sockets on @p port, once there are @p want of them or @p limit seconds passed."""
    deadline = time.monotonic() + limit
    while udp_sockets(port) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return udp_sockets(port)


def t_config(exe, driver):
    """--config FILE: every long option is a key, the command line overrides the file,
    and a bad line is one error naming FILE:LINE (exit 2)."""
    tmp = tempfile.mkdtemp(prefix="cr-echo-conf.")
    try:
        config_checks(exe, driver, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log("--config: settings applied, command line first, bad lines named")


def config_checks(exe, driver, tmp):
    conf = os.path.join(tmp, "echo.conf")
    with open(conf, "w") as f:
        f.write("# cr-echo from a file\nlisten 127.0.0.1:1\nudp\n"
                "max-connections 64   # per lcore\nio-driver %s\n" % driver)
    # The command line's --listen overrides the file's (port 1 would be refused).
    srv = Server(exe, driver, extra=["--config", conf])
    try:
        check("(tcp, udp)" in srv.ready_line and "io driver %s" % driver in srv.ready_line,
              "settings from the file not applied: %r" % srv.ready_line)
        echo_once(srv, b"from a config file")
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        u.sendto(b"udp from the file", srv.addr)
        check(u.recvfrom(100)[0] == b"udp from the file", "no UDP echo")
        u.close()
        srv.stop()
    finally:
        srv.kill()
    bad = os.path.join(tmp, "bad.conf")
    for text, named in (("listen 127.0.0.1:0\nmax-connections 0\n", ":2: max-connections 0"),
                        ("udp yes\n", ":1: udp yes"),
                        ("listen 127.0.0.1:0\nbogus 1\n", ":2: bogus")):
        with open(bad, "w") as f:
            f.write(text)
        r = subprocess.run([exe, "--config", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=10)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and (bad + named) in lines[0]
              and "accepted" in lines[0],
              "config %r: exit %d, %r" % (text, r.returncode, r.stderr))


def t_restart(exe, driver):
    """An lcore retired and started again gets its per-lcore duties back (its UDP socket,
    bound by lcore_start in every incarnation); SIGUSR1 (log reopen) leaves it serving."""
    if len(os.sched_getaffinity(0)) < 2:
        log("SKIP: needs 2 CPUs")
        return SKIP
    rt = tempfile.mkdtemp(prefix="cr-echo-restart.")
    os.chmod(rt, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = rt
    srv = Server(exe, driver, lcores="0,1", extra=["--udp"])
    try:
        tpath = os.path.join(rt, "coreact", "cr-echo.%d.sock" % srv.pid)
        port = srv.addr[1]
        n = wait_udp_sockets(port, 2)
        check(n == 2, "%d UDP sockets at start, want 2" % n)
        telemetry(tpath, "/lcore/retire,1")
        wait_state(tpath, 1, "OFFLINE")
        n = wait_udp_sockets(port, 1)
        check(n == 1, "%d UDP sockets with lcore 1 offline, want 1" % n)
        telemetry(tpath, "/lcore/start,1")
        wait_state(tpath, 1, "RUNNING")
        # Its first turn binds it (lcore_start): bounded wait, not a sleep.
        n = wait_udp_sockets(port, 2)
        check(n == 2, "%d UDP sockets after lcore 1 started again, want 2" % n)
        srv.proc.send_signal(signal.SIGUSR1)
        time.sleep(0.2)
        check(srv.proc.poll() is None, "SIGUSR1 ended cr-echo")
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        for i in range(20):  # from 20 source ports: the kernel spreads them over both
            v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            v.settimeout(5)
            v.sendto(b"dgram %d" % i, srv.addr)
            check(v.recvfrom(100)[0] == b"dgram %d" % i, "no UDP echo after the restart")
            v.close()
        echo_once(srv, b"tcp after the restart")
        st = stats_of(srv.stop())
        check(st["dgram_in"] == 20, "datagrams in: %r" % st)
    finally:
        srv.kill()
        shutil.rmtree(rt, ignore_errors=True)
    log("restart: lcore 1's UDP socket is back; SIGUSR1 kept it serving")


TESTS = {
    "cli": t_cli,
    "config": t_config,
    "restart": t_restart,
    "basic": t_basic,
    "socat": t_socat,
    "sockperf": t_sockperf,
    "payload": t_payload,
    "payload_zc": t_payload_zc,
    "zc_forced": t_zc_forced,
    "emfile": t_emfile,
    "idlefull": t_idlefull,
    "greedy": t_greedy,
    "faults": t_faults,
    "storm": t_storm,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exe", help="path of cr-echo")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if a.test != "cli" and apptest.skip_if_refused(a.exe, a.driver, log):
        return SKIP
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failure("timed out")))
    signal.alarm(TEST_TIMEOUT)
    try:
        rc = TESTS[a.test](a.exe, a.driver)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
    if rc == SKIP:
        return SKIP
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
