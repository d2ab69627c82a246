#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-proxy --session-log: the line of real sessions (normal, client timeout, connect
failure), its byte counts against what the client sent and received, and SIGUSR1 reopening
(sessionlog); the termination causes a test can provoke: retire (an lcore retired with
sessions open), shutdown (SIGTERM with one open), reset (a client's RST), nobufs (the
output pool spent by clients that do not read).

One line per session, at its end:
  CLIENT [DD/Mon/YYYY:HH:MM:SS.mmm] FRONTEND BACKEND Tw/Tc/Tt C2S S2C CAUSE
"""
import calendar
import fcntl
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time

import apptest
import hostile_proxy_test
import proxy_test
from proxy_test import (Backend, Env, LOOP, Proxy, check, closed_port, h_echo, log, note_recv,
                        recv_all)
from proxy_test import wait_for

LINE = re.compile(r"^(\S+):(\d+) \[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d)\.(\d{3})\] "
                  r"(\S+) (\S+) (-?\d+)/(-?\d+)/(-?\d+) (\d+) (\d+) (\w+)$")


def lines_of(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    except FileNotFoundError:
        return []


def parse(line):
    m = LINE.match(line)
    check(m is not None, "session log line of an unknown shape: %r" % line)
    g = m.groups()
    return {"client": "%s:%s" % (g[0], g[1]), "port": int(g[1]),
            "when": time.strptime("%s/%s/%s:%s:%s:%s" % g[2:8], "%d/%b/%Y:%H:%M:%S"),
            "front": g[9], "backend": g[10], "tw": int(g[11]), "tc": int(g[12]),
            "tt": int(g[13]), "c2s": int(g[14]), "s2c": int(g[15]), "cause": g[16]}


def wait_line(path, n, what):
    return wait_for(lambda: len(lines_of(path)) >= n and lines_of(path), 10, what)


def t_sessionlog(exe, driver):
    env = Env()
    try:
        echo = env.add(Backend(h_echo, "echo"))
        keep, dead = closed_port()
        env.add(keep)
        tmp = tempfile.TemporaryDirectory()
        env.add(tmp.cleanup and tmp)
        path = os.path.join(tmp.name, "sessions.log")
        p = env.add(Proxy(exe, driver, ["--backend", echo.addr(), "--session-log", path,
                                        "--client-timeout", "0.5", "--check-interval", "0",
                                        "--retries", "0"]))
        front = "%s:%d" % p.addr
        t0 = time.time()
        # 1. A normal session: the client sends 3000 bytes, reads the echo, closes.
        s = p.connect()
        me = s.getsockname()
        s.sendall(b"x" * 3000)
        got = b""
        while len(got) < 3000:
            d = s.recv(65536)
            check(d != b"", "echo cut short at %d bytes" % len(got))
            got += d
        s.shutdown(1)
        rest, how = recv_all(s)
        s.close()
        sent, received = 3000, len(got) + len(rest)
        ls = wait_line(path, 1, "the normal session's line")
        e = parse(ls[0])
        check(e["client"] == "%s:%d" % me, "client %s, want %s:%d" % (e["client"], *me))
        check(e["front"] == front, "frontend %s, want %s" % (e["front"], front))
        check(e["backend"] == echo.addr(), "backend %s, want %s" % (e["backend"], echo.addr()))
        check(e["c2s"] == sent and e["s2c"] == received,
              "bytes %d/%d, the client sent %d and received %d"
              % (e["c2s"], e["s2c"], sent, received))
        check(e["cause"] == "client_closed", "cause %s, want client_closed" % e["cause"])
        check(0 <= e["tw"] <= e["tt"] and 0 <= e["tc"] <= e["tt"] < 10000,
              "timers %d/%d/%d" % (e["tw"], e["tc"], e["tt"]))
        check(abs(calendar.timegm(e["when"]) - t0) < 5,
              "accept time %r is not now (UTC)" % (e["when"],))
        log("normal: %s" % ls[0])
        # 2. A client that sends 5 bytes and then idles: closed by --client-timeout.
        s = p.connect()
        s.sendall(b"hello")
        echoed = b""
        while len(echoed) < 5:
            d = s.recv(100)
            check(d != b"", "no echo before the timeout")
            echoed += d
        rest, how = recv_all(s)
        s.close()
        ls = wait_line(path, 2, "the idle session's line")
        e = parse(ls[1])
        check(e["cause"] == "client_timeout", "cause %s, want client_timeout" % e["cause"])
        check(e["c2s"] == 5 and e["s2c"] == len(echoed) + len(rest),
              "bytes %d/%d, want 5/%d" % (e["c2s"], e["s2c"], len(echoed) + len(rest)))
        check(400 <= e["tt"] < 5000, "idle session lasted %d ms" % e["tt"])
        log("client timeout: %s" % ls[1])
        p.stop()
        # 3. A backend that refuses: connect failed, no bytes, Tc -1.
        p = env.add(Proxy(exe, driver, ["--backend", dead, "--session-log", path,
                                        "--check-interval", "0", "--retries", "0"]))
        s = p.connect()
        s.sendall(b"lost")
        data, how = recv_all(s)
        s.close()
        ls = wait_line(path, 3, "the failed session's line")
        e = parse(ls[2])
        check(e["cause"] == "connect_failed", "cause %s, want connect_failed" % e["cause"])
        check(e["backend"] == dead and e["tc"] == -1 and e["c2s"] == 0 and e["s2c"] == 0,
              "failed session: %r" % e)
        log("connect failure: %s" % ls[2])
        # 4. SIGUSR1 reopens: after a rename, the next line goes to a new file at the path.
        os.rename(path, path + ".1")
        p.signal(signal.SIGUSR1)
        wait_for(lambda: os.path.exists(path), 10, "the session log reopened")
        s = p.connect()
        recv_all(s)
        s.close()
        ls = wait_line(path, 1, "a line in the reopened file")
        check(len(lines_of(path + ".1")) == 3, "the rotated file changed")
        log("reopened on SIGUSR1: %s" % ls[0])
        p.stop()
    finally:
        env.close()


# ---- termination causes ----

def logged_proxy(env, exe, driver, backend, extra=(), lcores=None):
    """A proxy with --session-log in a directory of its own: (proxy, log path)."""
    tmp = tempfile.TemporaryDirectory()
    env.add(Closer(tmp.cleanup))
    path = os.path.join(tmp.name, "sessions.log")
    p = env.add(Proxy(exe, driver, ["--backend", backend, "--session-log", path,
                                    "--check-interval", "0", "--retries", "0"] + list(extra),
                      lcores=lcores))
    return p, path


class Closer:
    def __init__(self, fn):
        self.close = fn


def echoed(s, data=b"ping"):
    """Send @p data and read its echo: the session is established through the proxy."""
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        check(d != b"", "the echo was cut after %d bytes" % len(got))
        got += d
    return len(data)


def by_client(path):
    return {e["client"]: e for e in map(parse, lines_of(path))}


def client_of(s):
    return "%s:%d" % s.getsockname()[:2]


def gone(s):
    """True if the proxy closed @p s (EOF or reset), False if it is open (within 1 s)."""
    s.settimeout(1)
    try:
        return s.recv(100) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def t_retire(exe, driver):
    """Sessions of an lcore retired over telemetry while they are open: closed after
    --shutdown-timeout, each logged with cause retire; the other lcore's are not."""
    env = Env()
    try:
        echo = env.add(Backend(h_echo, "echo"))
        p, path = logged_proxy(env, exe, driver, echo.addr(), ["--shutdown-timeout", "1"],
                               lcores="0-1")
        on1 = lambda: {l["lcore"]: l for l in p.telemetry("/stats")["/stats"]["lcores"]}[1]
        held = []
        while len(held) < 32 and (len(held) < 8 or on1()["net_connections"] < 2):
            s = env.add(p.connect())
            echoed(s)
            held.append(s)
        check(on1()["net_connections"] >= 2, "no session landed on lcore 1")
        p.telemetry("/lcore/retire,1")
        state = lambda: {l["lcore"]: l["state"] for l in p.telemetry("/lcores")["/lcores"]}[1]
        wait_for(lambda: state() == "OFFLINE", 15, "lcore 1 OFFLINE (is %s)" % state())
        closed = [s for s in held if gone(s)]
        kept = [s for s in held if s not in closed]
        check(closed and kept, "%d sessions closed by the retire, %d kept" %
              (len(closed), len(kept)))
        lines = wait_for(lambda: len(lines_of(path)) >= len(closed) and by_client(path), 10,
                         "a line for each of %d retired sessions" % len(closed))
        for s in closed:
            e = lines.get(client_of(s))
            check(e is not None, "no line for %s: %r" % (client_of(s), lines))
            check(e["cause"] == "retire" and e["c2s"] == 4 and e["s2c"] == 4,
                  "retired session: %r" % e)
        names = {client_of(s) for s in kept}
        for s in kept:
            check(client_of(s) not in lines, "a session of lcore 0 logged: %r"
                  % lines.get(client_of(s)))
            s.close()
        wait_line(path, len(held), "every session's line")
        causes = {e["cause"] for c, e in by_client(path).items() if c in names}
        check(causes == {"client_closed"}, "lcore 0's sessions: %r" % causes)
        log("retire: %d sessions of lcore 1 logged 'retire', %d of lcore 0 'client_closed'"
            % (len(closed), len(kept)))
        p.stop()
    finally:
        env.close()


def t_shutdown(exe, driver):
    """SIGTERM with a session open: after --shutdown-timeout it is closed, and its line,
    cause shutdown, is in the file when the process has exited."""
    env = Env()
    try:
        echo = env.add(Backend(h_echo, "echo"))
        p, path = logged_proxy(env, exe, driver, echo.addr(), ["--shutdown-timeout", "1"])
        s = env.add(p.connect())
        n = echoed(s, b"x" * 1000)
        t0 = time.monotonic()
        p.stop()
        dt = time.monotonic() - t0
        check(gone(s), "the session is open after the proxy exited")
        ls = lines_of(path)
        check(len(ls) == 1, "lines at exit: %r" % ls)
        e = parse(ls[0])
        check(e["cause"] == "shutdown" and e["client"] == client_of(s) and e["c2s"] == n
              and e["s2c"] == n, "session closed by the shutdown: %r" % e)
        check(0.8 <= dt and e["tt"] >= 800, "closed %.2f s after SIGTERM, Tt %d ms"
              % (dt, e["tt"]))
        log("shutdown: %s" % ls[0])
    finally:
        env.close()


def t_reset(exe, driver):
    """A client that resets its connection (SO_LINGER 0): cause client_reset, with the
    bytes that went each way before."""
    env = Env()
    try:
        echo = env.add(Backend(h_echo, "echo"))
        p, path = logged_proxy(env, exe, driver, echo.addr())
        s = p.connect()
        me = client_of(s)
        n = echoed(s, b"y" * 2000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        e = parse(wait_line(path, 1, "the reset session's line")[0])
        check(e["client"] == me and e["cause"] == "client_reset" and e["c2s"] == n
              and e["s2c"] == n, "reset session: %r" % e)
        log("reset: %r" % e)
        p.stop()
    finally:
        env.close()


NONREADERS = 200


def demand(p, probes):
    """A new session that reads a little and closes: it needs chunks of the pool, which
    is what makes the proxy take them back from the non-readers. Without it the pool is
    not short of anything once every non-reader is paused (nothing is read, nothing needs
    a chunk): whether the last non-readers fill up more than PX_STALL_NS after the first
    ones did (and are reset for their bytes) was timing alone. Returns the client address."""
    with socket.create_connection(p.addr, timeout=5) as s:
        me = client_of(s)
        probes.append(me)
        try:
            s.recv(4096)
        except OSError:
            pass
    return me


def t_nobufs(exe, driver):
    """Clients that never read from a backend that floods, on one lcore with the smallest
    pool: once they are all paused, new sessions that read need the pool, and the proxy
    resets the biggest non-readers to refill it; once the resets stop, the sessions that
    ended are those, each logged nobufs_reset, as many as proxy_nobufs counts (with the
    readers that stopped reading long enough to be chosen too)."""
    env = Env()
    held, probes = [], []
    try:
        flood = env.add(hostile_proxy_test.Flood())
        # The output pool's evictions concern copied bytes: a spliced direction takes
        # nothing from the pool, and one waiting to switch stops reading below its share,
        # so whether the smallest pool runs out would depend on timing. Copy only here.
        p, path = logged_proxy(env, exe, driver, flood.addr(),
                               ["--buffers", "350", "--client-timeout", "0",
                                "--server-timeout", "0", "--splice-threshold", "off"],
                               lcores="0")
        nobufs = lambda: hostile_proxy_test.nobufs(p)
        for _ in range(NONREADERS):
            held.append(env.add(hostile_proxy_test.nonreader(p.addr)))
        mine = {client_of(s) for s in held}
        # Every non-reader has had its first bytes relayed before a reader comes: a reader
        # takes chunks too, and a non-reader whose first bytes found the pool spent would
        # be reset before it sent any (the fallback when no session may be taken back yet).
        unread = lambda s: struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD,
                                                          b"\0" * 4))[0]
        wait_for(lambda: all(unread(s) > 0 for s in held), 30,
                 "bytes relayed to every non-reader")
        # Each non-reader first fills the kernel's send buffer to it (autotuned up to
        # tcp_wmem's 4 MiB: about 560 MB for 200 of them), then its queue; readers come
        # every 0.2 s until the pool was taken back for them.
        deadline = time.monotonic() + 60
        while nobufs() == 0 and time.monotonic() < deadline:
            demand(p, probes)
            time.sleep(0.2)
        check(nobufs() > 0, "the pool never taken back (proxy_nobufs 0) after %d readers"
              % len(probes))
        # Until the resets stop (the sessions left hold their share), with every client
        # still there: the sessions that ended are the ones reset.
        last, still = -1, 0
        deadline = time.monotonic() + 20
        while still < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            n = nobufs()
            still, last = (still + 1 if n == last else 0), n
        # A reader reads 4 KiB and closes: until it has, it waits for its reader too, and
        # under load may be the one reset (it is then counted, and logged, like the others).
        resets = lambda: [c for c, e in by_client(path).items() if e["cause"] == "nobufs_reset"]
        try:
            wait_for(lambda: len(resets()) >= last - len(probes), 10,
                 "%d nobufs_reset lines" % (last - len(probes)))
        except proxy_test.Failure as e:
            es = by_client(path)
            causes = {}
            for c, e2 in es.items():
                k = ("probe " if c in probes else "nonreader ") + e2["cause"]
                causes[k] = causes.get(k, 0) + 1
            raise proxy_test.Failure("%s; proxy_nobufs %d, lines by cause %r, %d probes"
                                     % (e, nobufs(), causes, len(probes))) from None
        es = by_client(path)
        check(set(es) <= mine | set(probes), "lines of other clients: %r"
              % (set(es) - mine - set(probes)))
        probes_reset = [c for c in resets() if c in probes]
        # A reader may also be counted while its line gives the cause it ended with first
        # (its close): at most one count per reader beyond the lines.
        check(len(resets()) <= nobufs() <= len(resets()) + len(probes),
              "%d lines say nobufs_reset, proxy_nobufs %d, %d readers"
              % (len(resets()), nobufs(), len(probes)))
        es = {c: e for c, e in es.items() if c in mine}
        reset = [e for e in es.values() if e["cause"] == "nobufs_reset"]
        check(len(reset) == len(es), "%d lines of non-readers, %d say nobufs_reset: %r"
              % (len(es), len(reset), [e for e in es.values() if e not in reset]))
        for s in held:
            s.close()
        wait_for(lambda: len(by_client(path).keys() & mine) >= len(held), 20,
                 "a line per session")
        check(all(e["s2c"] > 0 for e in reset), "a reset session had sent nothing: %r"
              % reset)
        log("nobufs: %d of %d non-readers reset to refill the pool for %d readers (%d of "
            "them reset too), each logged" % (len(reset), len(held), len(probes),
                                              len(probes_reset)))
        p.stop()
    finally:
        env.close()


# ---- against HAProxy's tcplog ----

HAPROXY_CFG = """global
    log stdout format raw local0 info
defaults
    mode tcp
    log global
    option tcplog
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:%d
    default_backend be
backend be
    server s1 %s
"""
# %ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq
TCPLOG = re.compile(r"^(\S+):(\d+) \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (\S+) "
                    r"(\S+)/(\S+) (-?\d+)/(-?\d+)/(-?\d+) (\d+) (\S\S) ")


def h_answer(c, rec, b):
    """Read 3000 bytes, answer 1234 and close: the two directions differ."""
    got = 0
    while got < 3000:
        d = note_recv(c, rec)
        if not d:
            return
        got += len(d)
    c.sendall(b"a" * 1234)
    c.shutdown(socket.SHUT_WR)


def session(addr):
    """The same session for both proxies: 3000 bytes up, read what comes, close."""
    s = socket.create_connection(addr, timeout=10)
    me = client_of(s)
    s.sendall(b"u" * 3000)
    data, how = recv_all(s)
    s.close()
    check(len(data) == 1234, "the client got %d bytes (%s)" % (len(data), how))
    return me


def t_haproxy(exe, driver):
    """One session through haproxy (option tcplog) and through cr-proxy: the fields both
    lines have come in the same order (client, accept time, frontend, backend, Tw/Tc/Tt,
    bytes backend to client), and agree where they must."""
    if shutil.which("haproxy") is None:
        log("SKIP: no haproxy (Debian package haproxy)")
        sys.exit(77)
    env = Env()
    try:
        b = env.add(Backend(h_answer, "answer"))
        tmp = tempfile.TemporaryDirectory()
        env.add(Closer(tmp.cleanup))
        cfg = os.path.join(tmp.name, "haproxy.cfg")
        port = apptest.free_port()
        with open(cfg, "w") as f:
            f.write(HAPROXY_CFG % (port, b.addr()))
        out = open(os.path.join(tmp.name, "haproxy.out"), "w+")
        hap = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=out,
                               stderr=subprocess.STDOUT)
        env.add(Closer(lambda: (hap.kill(), hap.wait())))
        wait_for(lambda: connectable((LOOP, port)), 10, "haproxy listening on %d" % port)
        theirs_client = session((LOOP, port))
        p, path = logged_proxy(env, exe, driver, b.addr())
        ours_client = session(p.addr)
        ours = wait_line(path, 1, "cr-proxy's line")[0]
        theirs = wait_for(lambda: [l for l in open(out.name).read().splitlines()
                                   if l.startswith(theirs_client + " ")
                                   and TCPLOG.match(l)], 10, "haproxy's tcplog line")[0]
        e, m = parse(ours), TCPLOG.match(theirs).groups()
        log("cr-proxy: %s" % ours)
        log("haproxy:  %s" % theirs)
        # 1. client: each the address the client had.
        check(e["client"] == ours_client and "%s:%s" % m[:2] == theirs_client,
              "clients %s / %s:%s" % (e["client"], m[0], m[1]))
        # 2. accept time: the same format, the same moment (this machine's local time is
        # what haproxy writes; ours is UTC: equal when TZ is UTC).
        t_ours = calendar.timegm(e["when"])
        t_theirs = time.mktime(time.strptime(m[2].split(".")[0], "%d/%b/%Y:%H:%M:%S"))
        check(abs(t_ours - t_theirs) < 10, "accept times %r / %r" % (e["when"], m[2]))
        # 3, 4. frontend and backend: both there (names in haproxy, addresses here).
        check(e["front"] == "%s:%d" % p.addr and m[3] == "fe", "frontends %s / %s"
              % (e["front"], m[3]))
        check(e["backend"] == b.addr() and (m[4], m[5]) == ("be", "s1"), "backends %s / %s/%s"
              % (e["backend"], m[4], m[5]))
        # 5. Tw/Tc/Tt: three times in ms, each side's own (haproxy rounds each apart and
        # counts Tw from the accept, so its Tw may exceed a Tt of 0); ours add up.
        check(0 <= e["tw"] <= e["tt"] and 0 <= e["tc"] <= e["tt"] < 10000,
              "our timers %d/%d/%d" % (e["tw"], e["tc"], e["tt"]))
        check(all(0 <= int(t) < 10000 for t in m[6:9]), "haproxy's timers %s/%s/%s" % m[6:9])
        # 6. bytes from the backend to the client: haproxy's %B is our S2C (C2S, which
        # haproxy does not log, comes just before it).
        check(e["s2c"] == int(m[9]) == 1234 and e["c2s"] == 3000,
              "bytes: ours %d/%d, haproxy %%B %s" % (e["c2s"], e["s2c"], m[9]))
        check(e["cause"] == "server_closed" and m[10] == "--",
              "causes %s / %s" % (e["cause"], m[10]))
        p.stop()
    finally:
        env.close()


def connectable(addr):
    try:
        socket.create_connection(addr, timeout=1).close()
        return True
    except OSError:
        return False


TESTS = {"sessionlog": t_sessionlog, "haproxy": t_haproxy, "retire": t_retire, "shutdown": t_shutdown,
         "reset": t_reset, "nobufs": t_nobufs}

if __name__ == "__main__":
    sys.exit(proxy_test.main(TESTS, __doc__))
