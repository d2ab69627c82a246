#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-http against hostile and greedy clients (issue 14), on loopback: each attack runs
while a probe client checks that others are still served, and the server's RSS and open
file descriptors are compared before and after.

  hostile_http_test.py CR_HTTP TEST [--driver uring|epoll]

TEST is one of: fifo (non-regular files in the root), pipeflood (pipelined requests behind
a file), slowbody (bodies dribbled a byte at a time), idle (more idle connections than the
file-descriptor limit allows, under prlimit), nonreaders (file requests never read).
The server, clients and helpers are those of http_test.py.
"""
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

import http_test
from http_test import SKIP, Failure, Reader, Server, check, exchange, log

GET = b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n"


def proc_stats(srv):
    """(RSS in KiB, open file descriptors) of the server."""
    pid = srv.proc.pid
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                rss = int(ln.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def probe(srv, path=b"/plaintext", n=3, limit=3.0, want=200):
    """n requests, each on a new connection: each must be answered with want within limit
    seconds. @return the slowest, in seconds."""
    worst = 0.0
    for i in range(n):
        t0 = time.monotonic()
        try:
            s = socket.create_connection(srv.addr, timeout=limit)
            try:
                s.settimeout(limit)
                s.sendall(GET % path)
                resp = Reader(s).response()
            finally:
                s.close()
        except (socket.timeout, OSError, Failure) as e:
            raise Failure("probe %d of %d (%s): not answered within %.1f s: %s"
                          % (i + 1, n, path.decode(), limit, e))
        dt = time.monotonic() - t0
        check(resp.status == want, "probe %s: status %d, want %d"
              % (path.decode(), resp.status, want))
        worst = max(worst, dt)
    return worst


def check_settled(srv, before, what, fd_slack=16, rss_slack_kb=64 * 1024, limit=10.0):
    """The server's fds come back to (about) what they were, its RSS stays bounded."""
    deadline = time.monotonic() + limit
    while True:
        rss, fds = proc_stats(srv)
        if fds <= before[1] + fd_slack or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log("%s: fds %d -> %d, RSS %d -> %d KiB" % (what, before[1], fds, before[0], rss))
    check(fds <= before[1] + fd_slack, "%s: %d fds left open, %d before" % (what, fds,
                                                                            before[1]))
    check(rss <= before[0] + rss_slack_kb, "%s: RSS grew from %d to %d KiB"
          % (what, before[0], rss))


def make_root(big_size=0):
    """(top, root, big): a temporary root with index.html and, with big_size, big.bin
    of that many random bytes (big)."""
    top = tempfile.mkdtemp()
    root = os.path.join(top, "www")
    os.makedirs(root)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<h1>home</h1>\n")
    big = os.urandom(big_size)
    if big_size > 0:
        with open(os.path.join(root, "big.bin"), "wb") as f:
            f.write(big)
    return top, root, big


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


# ---- item 3: a FIFO (or any non-regular file) in the root ----

def t_fifo(exe, driver):
    top, root, _ = make_root()
    os.mkfifo(os.path.join(root, "fifo"))
    sock_path = os.path.join(root, "sock")
    us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    us.bind(sock_path)
    us.listen(1)
    srv = Server(exe, driver, ["--root", root])
    socks = []
    try:
        before = proc_stats(srv)
        # As many FIFO requests as there are helper threads and more, each on its own
        # connection, none of them answered yet when the probe comes.
        for _ in range(8):
            s = srv.connect()
            s.sendall(GET % b"/fifo")
            socks.append(s)
        worst = probe(srv, b"/index.html", n=3, limit=3.0)
        for s in socks:
            s.settimeout(5.0)
            resp = Reader(s).response()
            check(resp.status in (403, 404), "/fifo: status %d, want 403 or 404"
                  % resp.status)
        resp, _ = exchange(srv, GET % b"/sock", wait_close=0)
        check(resp.status in (403, 404), "/sock: status %d, want 403 or 404" % resp.status)
        close_all(socks)
        check_settled(srv, before, "fifo")
        srv.stop()
        log("fifo: 8 FIFO requests refused with 403, a unix socket too; /index.html "
            "answered meanwhile in at most %.3f s" % worst)
    finally:
        close_all(socks)
        us.close()
        srv.kill()
        shutil.rmtree(top)


# ---- item 4: pipelined requests behind a file ----

def t_pipeflood(exe, driver):
    top, root, big = make_root(2 * 1024 * 1024)
    srv = Server(exe, driver, ["--root", root])
    try:
        before = proc_stats(srv)
        for n, path, body in ((100, b"/plaintext", b"Hello, World!"),
                              (2000, b"/plaintext", b"Hello, World!"),
                              (5000, b"/plaintext", b"Hello, World!"),
                              (3000, b"/index.html", b"<h1>home</h1>\n")):
            s = srv.connect(timeout=20)
            reqs = GET % b"/big.bin" + (GET % path) * n
            # Everything is sent before a byte is read: the file's answer fills the
            # socket buffers while the pipelined requests wait behind it.
            sender = threading.Thread(target=s.sendall, args=(reqs,), daemon=True)
            sender.start()
            time.sleep(0.5)
            rd = Reader(s)
            a = rd.response()
            check(a.status == 200 and a.body == big, "pipeflood %d: the file first (%d)"
                  % (n, a.status))
            got, refused = 0, 0
            while got + refused < n:
                try:
                    r = rd.response()
                except Failure:
                    break
                if r.status == 200:
                    check(refused == 0, "pipeflood %d: a 200 after a refusal" % n)
                    check(r.body == body, "pipeflood %d: answer %d" % (n, got))
                    got += 1
                else:
                    check(r.status == 503, "pipeflood %d: status %d, want 200 or 503"
                          % (n, r.status))
                    check(r.h("connection") == "close", "pipeflood %d: 503 keeps it open"
                          % n)
                    refused += 1
                    break
            check(got == n or refused == 1,
                  "pipeflood %d: %d answered, then the connection closed with no status"
                  % (n, got))
            sender.join(10)
            s.close()
            log("pipeflood: a file + %d pipelined GET %s: %d answered in order%s"
                % (n, path.decode(), got, ", then 503 and close" if refused else ""))
            probe(srv, b"/index.html", n=1)
        check_settled(srv, before, "pipeflood")
        srv.stop()
    finally:
        srv.kill()
        shutil.rmtree(top)


# ---- item 1: slow bodies ----

SLOW_HEAD = (b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")


def slowbody(exe, driver, opts, conns=260, timed_out_by=None):
    """conns clients send a body a byte at a time, more than --max-connections 200 takes;
    probes are served meanwhile. With timed_out_by, every slow client has been answered
    408 (or closed) within that many seconds."""
    srv = Server(exe, driver, ["--max-connections", "200"] + list(opts))
    socks = []
    stop = threading.Event()
    try:
        before = proc_stats(srv)
        t0 = time.monotonic()
        for _ in range(conns):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(srv.addr)
            socks.append(s)
        time.sleep(0.3)
        for s in socks:
            try:
                s.send(SLOW_HEAD + b"x")
            except OSError:
                pass

        def dribble():
            while not stop.wait(0.5):
                for s in socks:
                    try:
                        s.send(b"x")
                    except OSError:
                        pass
        th = threading.Thread(target=dribble, daemon=True)
        th.start()
        time.sleep(1.0)
        worst = probe(srv, n=5, limit=2.0)
        log("slowbody: %d slow bodies held; 5 probes answered, the slowest in %.3f s"
            % (conns, worst))
        if timed_out_by is not None:
            open_ = set(range(len(socks)))
            answered = 0
            deadline = t0 + timed_out_by
            while open_ and time.monotonic() < deadline:
                for i in list(open_):
                    try:
                        d = socks[i].recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:
                        open_.discard(i)
                        continue
                    if not d or d.startswith(b"HTTP/1.1 408"):
                        answered += d.startswith(b"HTTP/1.1 408")
                        open_.discard(i)
                time.sleep(0.1)
            check(not open_, "slowbody: %d slow clients still open after %.0f s"
                  % (len(open_), timed_out_by))
            log("slowbody: every slow client gone within %.0f s (%d answered 408)"
                % (timed_out_by, answered))
            probe(srv, n=2, limit=2.0)
        stop.set()
        th.join(5)
        close_all(socks)
        check_settled(srv, before, "slowbody")
        out = srv.stop()
        log(out.strip().splitlines()[-1])
    finally:
        stop.set()
        close_all(socks)
        srv.kill()


def t_slowbody(exe, driver):
    slowbody(exe, driver, ["--body-timeout", "2", "--min-body-rate", "100"],
             timed_out_by=12)


# ---- item 12: idle connections at the fd limit ----

def idle(exe, driver, prl, nofile, opts):
    """nofile + 500 clients each make a request and stay idle (keep-alive) on two lcores
    under prlimit --nofile: every fresh client and probe is served."""
    cpus = sorted(os.sched_getaffinity(0))
    lcores = ",".join(str(c) for c in cpus[:2])
    srv = Server(exe, driver, opts, lcores=lcores,
                 prefix=[prl, "--nofile=%d:%d" % (nofile, nofile)])
    socks = []
    what = "idle %s" % (" ".join(opts) or "(default limits)")
    try:
        before = proc_stats(srv)
        n = nofile + 500
        served, missed = 0, 0
        t0 = time.monotonic()
        # A few fresh clients not served in 2 s each are enough to fail.
        for i in range(n):
            s = socket.socket()
            s.settimeout(2.0)
            socks.append(s)
            try:
                s.connect(srv.addr)
                s.sendall(GET % b"/plaintext")
                r = Reader(s).response()
                served += r.status == 200
            except (OSError, Failure):
                missed += 1
                if missed >= 5:
                    break
        log("%s: %d of %d clients served in %.1f s under --nofile %d"
            % (what, served, n, time.monotonic() - t0, nofile))
        worst = probe(srv, n=5, limit=3.0)
        rss, fds = proc_stats(srv)
        check(fds <= nofile, "%s: %d fds open, the limit is %d" % (what, fds, nofile))
        check(missed == 0, "%s: %d fresh clients not served after %d"
              % (what, missed, served))
        log("%s: %d clients came and stayed idle; 5 fresh probes answered, slowest "
            "%.3f s; %d fds open" % (what, n, worst, fds))
        close_all(socks)
        check_settled(srv, before, what, limit=15.0)
        srv.stop()
    finally:
        close_all(socks)
        srv.kill()


def t_idle(exe, driver):
    prl = shutil.which("prlimit")
    if prl is None:
        log("prlimit not installed")
        return SKIP
    # The default connection limit follows the descriptor limit (cr_app_conns_fit());
    # one set above it is served too: out of descriptors, lib/net ends idle connections
    # (cr-http's are reclaimable).
    idle(exe, driver, prl, 1024, [])
    idle(exe, driver, prl, 1024, ["--max-connections", "4096"])


# ---- item 2: file requests never read ----

def t_nonreaders(exe, driver):
    top, root, big = make_root(4 * 1024 * 1024)
    srv = Server(exe, driver, ["--root", root])
    socks = []
    try:
        before = proc_stats(srv)
        for _ in range(140):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(5.0)
            s.connect(srv.addr)
            s.sendall(GET % b"/big.bin")
            socks.append(s)
        time.sleep(1.5)
        worst = probe(srv, b"/index.html", n=5, limit=3.0)
        # A reader gets the whole big file meanwhile.
        s = srv.connect(timeout=10)
        s.sendall(GET % b"/big.bin")
        r = Reader(s).response()
        check(r.status == 200 and r.body == big, "a reading client: %d, %d bytes"
              % (r.status, len(r.body)))
        s.close()
        rss, fds = proc_stats(srv)
        log("nonreaders: 140 clients not reading /big.bin; 5 file probes answered, slowest "
            "%.3f s, and a reader got all 4 MiB; server RSS %d KiB, %d fds" % (worst, rss,
                                                                                fds))
        close_all(socks)
        check_settled(srv, before, "nonreaders", rss_slack_kb=128 * 1024)
        srv.stop()
    finally:
        close_all(socks)
        srv.kill()
        shutil.rmtree(top)


TESTS = {
    "fifo": t_fifo,
    "pipeflood": t_pipeflood,
    "slowbody": t_slowbody,
    "idle": t_idle,
    "nonreaders": t_nonreaders,
}


if __name__ == "__main__":
    sys.exit(http_test.run(TESTS, __doc__))
