#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A seeded hostile mix against one app: valid clients must see no error and a bounded
latency while hostile ones do their worst (issue: hostile and greedy clients).

  hostile_mix_test.py BUILD APP [--driver uring|epoll] [--seconds S] [--seed N]
                      [--hostile N] [--peer redis] [--roles R,R...] [--app-arg ARG]

APP is echo, http, kv or proxy (cr-proxy in front of a cr-http backend). BUILD is the
build directory. For --seconds (default 5; 20 by hand) N hostile connections (default 200)
each play one seeded role, and play a new one when the server closes them:

  idle      connects and says nothing;
  slow      sends a request one byte every 0.2-1 s and never finishes it (slowloris;
            for HTTP also a body announced and trickled);
  nonread   asks for a lot of output (a big file, a big value, a big echo) and never
            reads it;
  flood     pipelines requests as fast as it can and reads every answer;
  huge      one oversized request (a 64 KiB header, an 8 MiB bulk, 8 MiB to echo).

Meanwhile 4 valid clients make request/response round trips (a new connection every 10
requests) and record each latency. The test fails on any valid-client error, on a p99
latency above 500 ms or a worst one above 3 s, on an app whose RSS grew by more than
--rss-mb (default 600), on descriptors left open after the hostile clients are gone, and
on an unclean stop. Loopback only; every loop is bounded in time.

With --peer redis (kv only) the same seeded mix then runs against redis-server (started
on a free loopback port, persistence off), and cr-kv's p99 must be no worse than
max(500 ms, 1.5 x redis-server's), its worst request under twice that bound (at least
3 s), its RSS growth under max(--rss-mb, 1.25 x redis-server's); the error and
descriptor checks stay cr-kv's own. --roles plays only the
roles named (to find the one that stalls the valid clients); --app-arg passes one more
argument to the app (again for more), e.g. --app-arg=--corelist --app-arg=0.
"""
import argparse
import multiprocessing
import os
import random
import selectors
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apptest  # noqa: E402
import kv_test  # noqa: E402  (its Redis: the peer of --peer redis)
from started import Failure, Started, check  # noqa: E402

SKIP = 77
BIG = 4 << 20  # the big file the non-readers ask for (HTTP), or echo
KV_BIG = 512 << 10  # the big value, GET 16 times by each non-reader: 8 MiB of replies


def log(msg):
    print(msg, flush=True)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


# ---- what each app is asked: (valid request, its reply check) and the hostile bytes ----

class Echo:
    def valid(self, rng):
        msg = b"valid %d\n" % rng.randrange(1 << 30)
        return msg, len(msg), lambda got: got == msg

    def slow_bytes(self, rng):
        return b"x" * 10000  # harmless for an echo: it answers each byte

    def nonread(self):
        return b"n" * BIG  # echoed back into a socket nobody reads

    def flood(self):
        return b"f" * 65536

    def huge(self):
        return b"h" * (8 << 20)


class Http:
    def valid(self, rng):
        return (b"GET /plaintext HTTP/1.1\r\nHost: v\r\n\r\n", None,
                lambda got: got.startswith(b"HTTP/1.1 200") and got.endswith(b"Hello, World!"))

    def slow_bytes(self, rng):
        if rng.random() < 0.5:
            return (b"GET /plaintext HTTP/1.1\r\nHost: s\r\n" + b"X-Slow: " + b"a" * 4000)
        return (b"POST /plaintext HTTP/1.1\r\nHost: s\r\nContent-Length: 100000\r\n\r\n"
                + b"b" * 100000)

    def nonread(self):
        return b"GET /big.bin HTTP/1.1\r\nHost: n\r\n\r\n" * 8

    def flood(self):
        return b"GET /plaintext HTTP/1.1\r\nHost: f\r\n\r\n" * 200

    def huge(self):
        return b"GET /plaintext HTTP/1.1\r\nHost: h\r\nX-Huge: " + b"h" * 65536 + b"\r\n\r\n"


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Kv:
    def valid(self, rng):
        k = b"valid:%d" % rng.randrange(1000)
        v = b"%d" % rng.randrange(1 << 30)
        msg = resp(b"SET", k, v) + resp(b"GET", k)
        want = b"+OK\r\n$%d\r\n%s\r\n" % (len(v), v)
        return msg, len(want), lambda got: got == want

    def slow_bytes(self, rng):
        return b"*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$100000\r\n" + b"s" * 100000

    def nonread(self):
        return resp(b"GET", b"big") * 16

    def flood(self):
        return resp(b"INCR", b"flood") * 500

    def huge(self):
        return b"*3\r\n$3\r\nSET\r\n$4\r\nhuge\r\n$%d\r\n" % (8 << 20) + b"h" * (8 << 20) \
            + b"\r\n"


# ---- the hostile clients: one selector loop, in a process of its own (so that its
# busy loop does not hold the valid clients' interpreter lock) ----

class Hostile(multiprocessing.Process):
    ROLES = ("idle", "slow", "nonread", "flood", "huge")

    def __init__(self, addr, proto, n, seed, until, roles=ROLES):
        super().__init__(daemon=True)
        self.addr, self.proto, self.n, self.until = addr, proto, n, until
        self.pick = roles
        self.seed = seed
        self.results = multiprocessing.Queue()

    def _new(self):
        role = self.rng.choice(self.pick)
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect_ex(self.addr)
        c = {"sock": s, "role": role, "out": b"", "next": time.monotonic(), "step": 1}
        if role == "slow":
            c["out"] = self.proto.slow_bytes(self.rng)
        elif role == "nonread":
            c["out"] = self.proto.nonread()
        elif role == "flood":
            c["out"] = self.proto.flood()
        elif role == "huge":
            c["out"] = self.proto.huge()
        self.roles[role] += 1
        self.conns[s.fileno()] = c
        self.sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    def _drop(self, c, by_server):
        self.sel.unregister(c["sock"])
        del self.conns[c["sock"].fileno()]
        c["sock"].close()
        if by_server:
            self.closed_by_server += 1
        if time.monotonic() < self.until:
            self._new()

    def run(self):
        self.rng = random.Random(self.seed)
        self.sel = selectors.DefaultSelector()
        self.closed_by_server = 0
        self.roles = dict.fromkeys(self.ROLES, 0)
        self.conns = {}
        error = None
        try:
            for _ in range(self.n):
                self._new()
            while time.monotonic() < self.until:
                for key, ev in self.sel.select(0.05):
                    c = key.data
                    s = c["sock"]
                    try:
                        if ev & selectors.EVENT_READ and c["role"] != "nonread":
                            if not s.recv(1 << 16):
                                self._drop(c, True)
                                continue
                        if ev & selectors.EVENT_WRITE:
                            self._write(c)
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        self._drop(c, True)
        except Exception as e:  # reported by the main process
            error = repr(e)
        finally:
            for c in list(self.conns.values()):
                c["sock"].close()
        self.results.put((error, self.roles, self.closed_by_server))

    def _write(self, c):
        now = time.monotonic()
        if not c["out"]:
            if c["role"] == "flood":
                c["out"] = self.proto.flood()  # again and again, reading every answer
            else:
                self.sel.modify(c["sock"], selectors.EVENT_READ, c)
                return
        if c["role"] == "slow":
            if now < c["next"]:
                return
            c["next"] = now + self.rng.uniform(0.2, 1.0)
            n = 1
        else:
            n = len(c["out"])
        sent = c["sock"].send(c["out"][:n])
        c["out"] = c["out"][sent:]


# ---- the valid clients ----

class Valid(threading.Thread):
    def __init__(self, addr, proto, seed, until):
        super().__init__(daemon=True)
        self.addr, self.proto, self.until = addr, proto, until
        self.rng = random.Random(seed)
        self.lat = []
        self.when = []  # when each request began (monotonic)
        self.connect = []  # of each latency, the part spent connecting (0: no connect)
        self.errors = []

    def _reply(self, s, want_len, ok):
        got = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if want_len is not None and len(got) >= want_len:
                break
            if want_len is None and b"\r\n\r\n" in got:
                head, _, body = got.partition(b"\r\n\r\n")
                n = [int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
                     if k.lower() == b"content-length"]
                if n and len(body) >= n[0]:
                    break
            d = s.recv(65536)
            if not d:
                raise OSError("closed by the server")
            got += d
        if not ok(got):
            raise OSError("bad or late reply: %r" % got[:80])

    def run(self):
        s = None
        n = 0
        while time.monotonic() < self.until:
            msg, want_len, ok = self.proto.valid(self.rng)
            t0 = time.monotonic()
            tc = 0.0
            try:
                if s is None or n % 10 == 0:
                    if s is not None:
                        s.close()
                    s = socket.create_connection(self.addr, timeout=5)
                    tc = time.monotonic() - t0
                s.sendall(msg)
                self._reply(s, want_len, ok)
            except OSError as e:
                self.errors.append("%s after %.2f s" % (e, time.monotonic() - t0))
                if s is not None:
                    s.close()
                s = None
            self.lat.append(time.monotonic() - t0)
            self.when.append(t0)
            self.connect.append(tc)
            n += 1
            time.sleep(0.005)
        if s is not None:
            s.close()


# ---- the apps ----

def start_app(build, app, driver, tmp, extra_backend=None, extra=()):
    exe = {"echo": "cr-echo", "http": "cr-http", "kv": "cr-kv", "proxy": "cr-proxy"}[app]
    path = os.path.join(build, "app", exe, exe)
    argv = [path, "--io-driver", driver, "--telemetry", "off", "--listen", "127.0.0.1:0"]
    if app == "http":
        argv += ["--root", tmp]
    if app == "proxy":
        argv += ["--backend", "127.0.0.1:%d" % extra_backend]
    return path, Started(argv + list(extra))


def mix(a, addr, pid, proto, roles, name):
    """The seeded mix against the server at @p addr (process @p pid); its figures."""
    if a.app == "kv":
        with socket.create_connection(addr, timeout=10) as s:
            s.sendall(resp(b"SET", b"big", b"v" * KV_BIG))
            check(s.recv(16) == b"+OK\r\n", "SET big")
    rss0, fds0 = rss_kb(pid), open_fds(pid)
    until = time.monotonic() + a.seconds
    hostile = Hostile(addr, proto, a.hostile, a.seed, until, roles)
    valid = [Valid(addr, proto, a.seed * 100 + i, until) for i in range(4)]
    hostile.start()
    time.sleep(min(1.0, a.seconds / 5))  # the hostile ones get there first
    for v in valid:
        v.start()
    rss_max = rss0
    while time.monotonic() < until:
        rss_max = max(rss_max, rss_kb(pid))
        time.sleep(0.2)
    for v in valid:
        v.join(15)
    error, roles_played, closed = hostile.results.get(timeout=15)
    hostile.join(15)
    check(error is None, "hostile clients: %s" % error)
    t_start = until - a.seconds
    slow = sorted(((x, t - t_start, c) for v in valid
                   for x, t, c in zip(v.lat, v.when, v.connect)), reverse=True)[:5]
    lat = sorted(x for v in valid for x in v.lat)
    errors = [e for v in valid for e in v.errors]
    check(lat, "no valid request was made")
    r = {"n": len(lat), "errors": errors, "p50": lat[len(lat) // 2],
         "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))], "max": lat[-1],
         "rss0": rss0, "rss_max": rss_max, "fds0": fds0}
    log("%s %s/%s seed %d, %.0f s: %d valid requests, %d errors, latency p50 %.1f ms "
        "p99 %.1f ms max %.1f ms; hostile roles %s, %d closed by the server; RSS %d -> "
        "max %d KiB" % (name, a.app, a.driver, a.seed, a.seconds, r["n"], len(errors),
                        r["p50"] * 1e3, r["p99"] * 1e3, r["max"] * 1e3, roles_played, closed,
                        rss0, rss_max))
    log("  slowest: %s" % ", ".join("%.0f ms at %.1f s%s" % (
        x * 1e3, t, " (connect %.0f ms)" % (c * 1e3) if c else "") for x, t, c in slow))
    return r


def fds_back(pid, fds0):
    deadline = time.monotonic() + 15
    while open_fds(pid) > fds0 and time.monotonic() < deadline:
        time.sleep(0.1)
    check(open_fds(pid) <= fds0, "%d descriptors open, %d before" % (open_fds(pid), fds0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("app", choices=["echo", "http", "kv", "proxy"])
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hostile", type=int, default=200)
    ap.add_argument("--rss-mb", type=int, default=600)
    ap.add_argument("--peer", choices=["redis"],
                    help="kv only: the same seeded mix against redis-server after cr-kv; "
                    "cr-kv's p99 must be no worse than max(500 ms, 1.5 x redis-server's)")
    ap.add_argument("--roles", default=",".join(Hostile.ROLES),
                    help="the hostile roles to play, comma-separated (default all)")
    ap.add_argument("--app-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for the app (again for more)")
    a = ap.parse_args()
    roles = tuple(a.roles.split(","))
    bad = [r for r in roles if r not in Hostile.ROLES]
    if bad:
        ap.error("--roles: unknown role %r (one of %s)" % (bad[0], ", ".join(Hostile.ROLES)))
    if a.peer is not None and a.app != "kv":
        ap.error("--peer redis: only with the app kv, not %s" % a.app)
    exe = os.path.join(a.build, "app", "cr-echo", "cr-echo")
    if apptest.skip_if_refused(exe, a.driver, log):
        return SKIP
    if a.peer == "redis" and shutil.which("redis-server") is None:
        log("SKIP: --peer redis: no redis-server on PATH")
        return SKIP
    tmp = "/tmp/hostile-mix-%d" % os.getpid()
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "big.bin"), "wb") as f:
        f.write(os.urandom(BIG))
    backend = None
    try:
        if a.app == "proxy":
            _, backend = start_app(a.build, "http", a.driver, tmp)
            _, srv = start_app(a.build, "proxy", a.driver, tmp, backend.port)
            proto = Http()
        else:
            _, srv = start_app(a.build, a.app, a.driver, tmp, extra=a.app_arg)
            proto = {"echo": Echo(), "http": Http(), "kv": Kv()}[a.app]
        pid = srv.proc.pid
        r = mix(a, ("127.0.0.1", srv.port), pid, proto, roles, "cr-" + a.app)
        check(not r["errors"], "valid clients saw %d errors, first: %s"
              % (len(r["errors"]), r["errors"][:3]))
        fds_back(pid, r["fds0"])
        srv.stop()
        if backend is not None:
            backend.stop()
        bound, rss_bound = 0.5, a.rss_mb * 1024
        if a.peer == "redis":
            peer = kv_test.Redis()
            try:
                theirs = mix(a, ("127.0.0.1", peer.port), peer.proc.pid, proto, roles,
                             "redis-server")
            finally:
                peer.stop()
            bound = max(0.5, 1.5 * theirs["p99"])
            # The non-readers and huge requests are owed as much memory by redis-server.
            rss_bound = max(rss_bound, 1.25 * (theirs["rss_max"] - theirs["rss0"]))
        check(r["rss_max"] - r["rss0"] < rss_bound, "RSS grew by %d MiB (bound %d MiB)"
              % ((r["rss_max"] - r["rss0"]) // 1024, rss_bound // 1024))
        check(r["p99"] < bound, "valid clients' p99 latency %.0f ms (bound %.0f ms)"
              % (r["p99"] * 1e3, bound * 1e3))
        check(r["max"] < max(3.0, 2 * bound), "a valid request took %.1f s" % r["max"])
    except (Failure, kv_test.Failure) as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    log("PASS hostile mix %s (%s)" % (a.app, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
