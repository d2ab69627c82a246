#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-proxy --session-log: the line of real sessions (normal, client timeout, connect
failure), its byte counts against what the client sent and received, and SIGUSR1 reopening.

One line per session, at its end:
  CLIENT [DD/Mon/YYYY:HH:MM:SS.mmm] FRONTEND BACKEND Tw/Tc/Tt C2S S2C CAUSE
"""
import calendar
import os
import re
import signal
import sys
import tempfile
import time

import proxy_test
from proxy_test import Backend, Env, LOOP, Proxy, check, closed_port, h_echo, log, recv_all
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


TESTS = {"sessionlog": t_sessionlog}

if __name__ == "__main__":
    sys.exit(proxy_test.main(TESTS, __doc__))
