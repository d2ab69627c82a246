#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hostile and greedy clients of app/cr-proxy (issue 14 item 5), on loopback.

  hostile_proxy_test.py CR_PROXY TEST [--driver uring|epoll]

nonreaders: a backend floods every connection it gets; 500 clients (4 KiB receive
  buffers) never read. Then 10 probe clients each read 2 MiB through the same proxy:
  none may be reset or stall, whatever proxy_nobufs says, and a probe that starts while
  the non-readers hold their buffers is still served. The proxy's fds come back to what
  they were once everybody left, and its RSS stays within the pool it sized at start.
blackhole_retire: a backend that never answers a SYN, and lcore 1 retired while 8 clients
  wait on connects to it: with the default --connect-timeout (2 s) the connects give up,
  the clients get an EOF, and the lcore is OFFLINE within a few seconds, not the kernel's
  two minutes of SYN retries.
Exit 0 pass, 1 fail, 77 skip (driver refused).
"""
import os
import selectors
import socket
import sys
import threading
import time

import proxy_test
from apptest import fds_of, rss_kib
from proxy_test import Env, LOOP, Proxy, blackhole, check, log, recv_all, wait_for

BLOCK = b"x" * 65536


class Flood:
    """A backend that sends BLOCK after BLOCK to every connection, never reading, on one
    thread (a selector): as many connections as the proxy opens."""

    def __init__(self):
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((LOOP, 0))
        self.ls.listen(1024)
        self.ls.setblocking(False)
        self.port = self.ls.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.ls, selectors.EVENT_READ)
        self.sent = 0
        self.conns = 0
        self.stopping = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def addr(self):
        return "%s:%d" % (LOOP, self.port)

    def run(self):
        while not self.stopping:
            for key, _ in self.sel.select(0.1):
                if key.fileobj is self.ls:
                    try:
                        c, _ = self.ls.accept()
                    except OSError:
                        continue
                    c.setblocking(False)
                    self.conns += 1
                    self.sel.register(c, selectors.EVENT_WRITE)
                    continue
                try:
                    self.sent += key.fileobj.send(BLOCK)
                except BlockingIOError:
                    pass
                except OSError:
                    self.sel.unregister(key.fileobj)
                    key.fileobj.close()

    def close(self):
        self.stopping = True
        self.t.join()
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def nonreader(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(addr)
    return s


def probe(addr, want, deadline, out, i):
    """Read @p want bytes through the proxy; out[i] = (bytes, how it ended, seconds)."""
    t0 = time.monotonic()
    got, how = 0, "ok"
    try:
        with socket.create_connection(addr, timeout=10) as s:
            while got < want:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                d = s.recv(65536)
                if not d:
                    how = "eof"
                    break
                got += len(d)
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        how = "stalled"
    except OSError as e:
        how = str(e)
    out[i] = (got, how, time.monotonic() - t0)


def nobufs(p):
    return p.telemetry("/stats")["/stats"]["total"]["app"]["proxy_nobufs"]


def t_nonreaders(exe, driver):
    """N clients (500; $HOSTILE_NONREADERS, e.g. 1000 by hand) that never read, on one
    lcore, from a backend that floods: 10 readers are served meanwhile, the proxy's RSS
    stays within its pool and the receive buffers the relay holds, its fds come back."""
    n = int(os.environ.get("HOSTILE_NONREADERS", "500"))
    env = Env()
    held = []
    try:
        flood = env.add(Flood())
        # One lcore: every session shares one pool, the worst case.
        p = env.add(Proxy(exe, driver, ["--backend", flood.addr(), "--maxconn", str(n + 100),
                                        "--check-interval", "0", "--client-timeout", "0",
                                        "--server-timeout", "0"], lcores="0"))
        pid = p.proc.pid
        fds0, rss0 = fds_of(pid), rss_kib(pid)
        for _ in range(n):
            held.append(nonreader(p.addr))
        wait_for(lambda: flood.conns >= n, 30, "%d backend connections (have %d)"
                 % (n, flood.conns))
        # Let the flood fill what the non-readers may hold, until it stops moving.
        last, still = -1, 0
        deadline = time.monotonic() + 20
        while still < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            still = still + 1 if flood.sent == last else 0
            last = flood.sent
        log("%d non-readers: the backend got %d bytes into the proxy; proxy_nobufs %s"
            % (n, flood.sent, nobufs(p)))
        out = [None] * 10
        deadline = time.monotonic() + 40
        ts = [threading.Thread(target=probe, args=(p.addr, 2 << 20, deadline, out, i))
              for i in range(10)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        bad = [(i, r) for i, r in enumerate(out) if r is None or r[1] != "ok"]
        log("10 probes: %s; proxy_nobufs %s"
            % (", ".join("%d B %s %.1f s" % r for r in out if r), nobufs(p)))
        if bad:  # what the proxy logged, for the failure's reader
            p.kill()
            log(p.proc.stderr.read().decode(errors="replace")[-3000:])
        check(not bad, "probe clients not served while %d did not read: %r" % (n, bad))
        rss1 = rss_kib(pid)
        for s in held:
            s.close()
        held = []
        wait_for(lambda: fds_of(pid) <= fds0, 30, "the proxy's fds back to %d (now %d)"
                 % (fds0, fds_of(pid)))
        # The pool sized from --maxconn (6 chunks of 16 KiB per session and 256 more, and a
        # third more for lib/net's reserve: about 80 MiB for 600), plus the receive buffers
        # the relay holds (one of 4 KiB per direction at most, two pages each: it need not
        # start on one), plus 16 MiB for the rest.
        pool = (256 + 6 * (n + 100)) * 4 // 3 * 16
        bound = pool + n * 2 * 8 + 16 * 1024
        log("proxy fds %d before, %d after; RSS %d KiB before, %d under the attack (bound "
            "+%d KiB)" % (fds0, fds_of(pid), rss0, rss1, bound))
        check(rss1 < rss0 + bound, "RSS grew from %d to %d KiB" % (rss0, rss1))
        p.stop()
    finally:
        for s in held:
            s.close()
        env.close()


def t_blackhole_retire(exe, driver):
    env = Env()
    clients = []
    try:
        keep, hole = blackhole()
        env.add(keep[0])
        for f in keep[1]:
            env.add(f)
        p = env.add(Proxy(exe, driver, ["--backend", hole, "--check-interval", "0",
                                        "--retries", "0"], lcores="0-1"))
        on1 = lambda: {l["lcore"]: l for l in p.telemetry("/stats")["/stats"]["lcores"]}[1]
        while len(clients) < 64 and on1()["net_connections"] < 8:
            clients.append(p.connect())
            time.sleep(0.01)
        check(on1()["net_connections"] >= 8, "no session landed on lcore 1")
        t0 = time.monotonic()
        p.telemetry("/lcore/retire,1")
        state = lambda: {l["lcore"]: l["state"] for l in p.telemetry("/lcores")["/lcores"]}[1]
        wait_for(lambda: state() == "OFFLINE", 20, "lcore 1 OFFLINE (is %s)" % state(),
                 step=0.05)
        took = time.monotonic() - t0
        check(took < 2 + 8, "the retire took %.1f s" % took)
        for s in clients:
            s.settimeout(10)
            data, how = recv_all(s)
            check(data == b"" and how == "eof", "a client got %r %s" % (data, how))
        log("lcore 1 retired %.1f s after the request, with connects to a blackhole "
            "(default --connect-timeout 2 s); %d clients got an EOF" % (took, len(clients)))
        p.stop()
    finally:
        for s in clients:
            s.close()
        env.close()


TESTS = {"nonreaders": t_nonreaders, "blackhole_retire": t_blackhole_retire}


if __name__ == "__main__":
    sys.exit(proxy_test.main(TESTS, __doc__))
