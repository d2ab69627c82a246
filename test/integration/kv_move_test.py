#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-kv's clients move to the staying lcore when theirs retires (doc/guides/kv.md,
"Clients across a resize"): no client is disconnected, every reply is right.

  stream  40 clients, each a seeded command stream (every type, pipelined batches) over
          its own keys, compared with redis-server fed the same stream, while the pool
          goes 2 -> 1 -> 2 ten times: identical replies, 0 disconnects.
  kinds   clients of every kind on lcore 1 (authenticated with --requirepass, named,
          plain, pipelining, in MULTI with queued commands, WATCHing, subscribed,
          blocked in BLPOP with commands pipelined behind, blocked with a timeout)
          through 10 retire/start cycles of lcore 1; each client's stream is sent to a
          redis-server (same password) too and the replies compared byte for byte; 0
          disconnects; kv_clients_moved_in and kv_blocked_moved_in count exactly the
          clients that were on lcore 1.
  blocked blocked clients placed on lcore 1 before each of 10 retire/start cycles, BLPOP
          after BLPOP over random lists and timeouts (a PING pipelined behind each) while
          a seeded pusher pushes unique elements: every element popped exactly once or
          still in its list, every nil answer after its whole timeout, none closed.
  pubsub  a seeded stream of PUBLISHes from publishers on both lcores (pipelined, to
          channels and a pattern) while lcore 1 retires and starts 10 times, with new
          subscribers placed on lcore 1 before each retire: every subscriber gets every
          message of its channels published while it was subscribed, exactly once, in
          each publisher's order; kv_clients_moved_in counts the moves.
"""
import argparse
import os
import random
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kv_test import (KV, Conn, Failure, Redis, check, compare, log, need,  # noqa: E402
                     on_shard, random_stream, resp, telemetry_cmd)

PASS = "s3cret"


class Run:
    def __init__(self, exe, driver, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="kv-move.")
        self.path = os.path.join(self.tmp, "kv.sock")
        self.kv = KV(exe, 2, ["--telemetry", self.path] + list(extra), driver)

    def tel(self, cmd):
        return telemetry_cmd(self.path, cmd)

    def total(self, name):
        return self.tel("/stats")["/stats"]["total"]["app"][name]

    def counter(self, lcore, name):
        for x in self.tel("/stats,%d" % lcore)["/stats"]["lcores"]:
            if x["lcore"] == lcore:
                return x["app"][name]
        raise Failure("no lcore %d in /stats" % lcore)

    def wait_state(self, lcore, want, timeout=15.0):
        deadline = time.monotonic() + timeout
        states = {}
        while time.monotonic() < deadline:
            states = {x["lcore"]: x["state"] for x in self.tel("/lcores")["/lcores"]}
            if states.get(lcore) == want:
                return
            time.sleep(0.02)
        raise Failure("lcore %d not %s after %.0f s: %r" % (lcore, want, timeout, states))

    def retire(self):
        r = self.tel("/lcore/retire,1")
        check("error" not in r, "retire refused: %r" % r)
        self.wait_state(1, "OFFLINE")

    def start(self):
        r = self.tel("/lcore/start,1")
        check("error" not in r, "start refused: %r" % r)
        self.wait_state(1, "RUNNING")


def lcore_of(c):
    c.send(resp("CLIENT", "INFO"))
    info = c.replies(1)[0]
    return 1 if b"lcore=1" in info else 0


class Pair:
    """One client of cr-kv and its twin on redis-server: the same stream to both."""

    def __init__(self, kvport, rport, auth=True, on1=True):
        for _ in range(64):
            self.k = Conn(kvport, timeout=20)
            if auth:
                self.k.send(resp("AUTH", PASS))
                check(self.k.replies(1) == [b"+OK\r\n"], "AUTH on cr-kv")
            if not on1 or lcore_of(self.k) == 1:
                break
            self.k.s.close()
        else:
            raise Failure("64 connections and none on lcore 1")
        self.r = Conn(rport, timeout=20)
        if auth:
            self.r.send(resp("AUTH", PASS))
            self.r.replies(1)

    def send(self, *cmds):
        data = b"".join(resp(*c) for c in cmds)
        self.k.send(data)
        self.r.send(data)

    def expect(self, n, what, timeout=10.0):
        a = self.r.replies(n, timeout)
        b = self.k.replies(n, timeout)
        check(a == b, "%s: cr-kv %r, redis %r" % (what, b[:4], a[:4]))
        return b

    def cmd(self, *args):
        self.send(args)
        return self.expect(1, " ".join(map(str, args)))[0]

    def silent(self, what):
        """Nothing has come (a blocked client, a subscriber with nothing published)."""
        for c, name in ((self.k, "cr-kv"), (self.r, "redis")):
            try:
                got = c.replies(1, timeout=0.05)
            except (Failure, OSError) as e:
                check("closed" not in str(e), "%s: %s closed: %s" % (what, name, e))
                continue
            raise Failure("%s: %s answered %r" % (what, name, got))

    def close(self):
        self.k.s.close()
        self.r.s.close()


def t_kinds(args):
    need("redis-server")
    red = Redis(["--requirepass", PASS])
    run = Run(args.exe, args.driver, ["--requirepass", PASS])
    rng = random.Random(args.seed)
    keys = iter(on_shard("mv", 0, n=4000))  # every key on the staying lcore's shard
    clients = []  # (kind, pair, state)
    on1 = blocked_on1 = 0
    try:
        for cycle in range(args.cycles):
            made = []
            # a named, authenticated plain client
            p = Pair(run.kv.port, red.port)
            name = "c%d" % cycle
            p.cmd("CLIENT", "SETNAME", name)
            made.append(("plain", p, {"name": name, "key": next(keys)}))
            p = Pair(run.kv.port, red.port)
            made.append(("pipeline", p, {"keys": [next(keys) for _ in range(8)]}))
            p = Pair(run.kv.port, red.port)
            mk = [next(keys) for _ in range(3)]
            p.cmd("MULTI")
            p.cmd("SET", mk[0], "x")
            p.cmd("INCR", mk[1])
            made.append(("multi", p, {"keys": mk, "queued": 2}))
            p = Pair(run.kv.port, red.port)
            wk = next(keys)
            p.cmd("SET", wk, "0")
            p.cmd("WATCH", wk)
            made.append(("watch", p, {"key": wk, "touch": cycle % 2 == 1}))
            p = Pair(run.kv.port, red.port)
            ch = "ch%d" % cycle
            p.send(("SUBSCRIBE", ch, "all"), ("PSUBSCRIBE", "pat%d.*" % cycle))
            p.expect(3, "subscribe")
            made.append(("sub", p, {"ch": ch, "pat": "pat%d.x" % cycle}))
            p = Pair(run.kv.port, red.port)
            lk, gk = next(keys), next(keys)
            p.cmd("SET", gk, "behind")
            p.send(("BLPOP", lk, "0"), ("GET", gk), ("CLIENT", "GETNAME"))
            made.append(("blocked", p, {"list": lk}))
            p = Pair(run.kv.port, red.port)
            tk = next(keys)
            p.send(("BLPOP", tk, "1.5"),)
            made.append(("timeout", p, {"t0": time.monotonic()}))
            on1 += len(made)
            blocked_on1 += 2
            # the others of earlier cycles carry on meanwhile (they are on lcore 0 now)
            time.sleep(0.05)
            run.retire()
            pub = Pair(run.kv.port, red.port, on1=False)
            for kind, p, st in clients + made:
                if kind == "plain":
                    check(p.cmd("CLIENT", "GETNAME") == b"$%d\r\n%s\r\n"
                          % (len(st["name"]), st["name"].encode()), "name kept")
                    p.cmd("INCRBY", st["key"], rng.randrange(100))
                    p.cmd("GET", st["key"])
                    p.k.send(resp("CLIENT", "INFO"))
                    check(b"lcore=0" in p.k.replies(1)[0], "plain client not on lcore 0")
                elif kind == "pipeline":
                    cmds = []
                    for k in st["keys"]:
                        cmds += [("RPUSH", k, str(rng.randrange(1000))), ("LLEN", k),
                                 ("LRANGE", k, "0", "-1")]
                    p.send(*cmds)
                    p.expect(len(cmds), "pipeline")
                elif kind == "multi" and st["queued"] < 40:
                    p.cmd("APPEND", st["keys"][2], "y")
                    st["queued"] += 1
                elif kind == "sub":
                    n = rng.randrange(1, 5)
                    for i in range(n):
                        pub.cmd("PUBLISH", st["ch"], "m%d" % i)
                        pub.cmd("PUBLISH", st["pat"], "p%d" % i)
                    p.expect(2 * n, "subscriber's messages")
                    p.send(("PING", "x"),)
                    p.expect(1, "subscribed PING")
                elif kind == "blocked" and "done" not in st:
                    p.silent("blocked client")
                elif kind == "watch" and "done" not in st:
                    if st["touch"]:
                        pub.cmd("SET", st["key"], "1")
            for kind, p, st in made:
                if kind == "timeout":
                    # blocked across the move with what was left of 1.5 s
                    got = p.expect(1, "BLPOP timeout", timeout=5)
                    took = time.monotonic() - st["t0"]
                    check(1.4 < took < 3.0, "BLPOP 1.5 answered after %.2f s" % took)
                    check(got == [b"*-1\r\n"], "timeout reply %r" % got)
            run.start()
            clients += made
            log("cycle %d: %d clients, %d made on lcore 1 moved" % (cycle, len(clients), len(made)))
        # the end: every transaction and blocked client finishes, compared
        pub = Pair(run.kv.port, red.port, on1=False)
        for kind, p, st in clients:
            if kind == "multi":
                p.cmd("EXEC")
                p.cmd("MGET", *st["keys"])
            elif kind == "watch":
                p.cmd("MULTI")
                p.cmd("INCR", st["key"])
                p.cmd("EXEC")  # nil where another client wrote the key
            elif kind == "blocked":
                pub.cmd("RPUSH", st["list"], "v")
                p.expect(3, "served BLPOP and what waited behind it")
            elif kind == "sub":
                # named: without arguments the order is each server's own
                p.send(("UNSUBSCRIBE", st["ch"], "all"), ("PUNSUBSCRIBE", st["pat"][:-1] + "*"))
                p.expect(3, "unsubscribe")
            elif kind in ("plain", "pipeline"):
                p.cmd("PING")
        moved = run.counter(0, "kv_clients_moved_in")
        bmoved = run.counter(0, "kv_blocked_moved_in")
        log("%d clients over %d cycles: kv_clients_moved_in %d (%d made on lcore 1), "
            "kv_blocked_moved_in %d (%d)" % (len(clients), args.cycles, moved, on1, bmoved,
                                             blocked_on1))
        check(moved == on1, "kv_clients_moved_in %d, %d clients were on lcore 1" % (moved, on1))
        check(bmoved == blocked_on1, "kv_blocked_moved_in %d, %d were blocked on lcore 1"
              % (bmoved, blocked_on1))
        for _, p, _ in clients:
            p.close()
        run.kv.stop()
    finally:
        if run.kv.proc.poll() is None:
            run.kv.proc.kill()
        red.stop()
    return 0


class Publisher(threading.Thread):
    def __init__(self, port, idx, seed, chans, stop):
        super().__init__(daemon=True)
        self.c = Conn(port, timeout=20)
        self.idx, self.rng, self.chans, self.stop = idx, random.Random(seed), chans, stop
        self.sent = []  # (channel, payload) in order
        self.err = None

    def run(self):
        try:
            n = 0
            while not self.stop.is_set():
                burst = []
                for _ in range(self.rng.randrange(1, 16)):
                    ch = self.rng.choice(self.chans)
                    burst.append((ch, "p%d:%d" % (self.idx, n)))
                    n += 1
                self.c.send(b"".join(resp("PUBLISH", ch, m) for ch, m in burst))
                for r in self.c.replies(len(burst), timeout=15):
                    check(r.startswith(b":"), "PUBLISH answered %r" % r)
                self.sent += burst
                time.sleep(0.002 + self.rng.random() * 0.004)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.err = e


class Subscriber:
    def __init__(self, port, chans):
        for _ in range(64):
            self.c = Conn(port, timeout=20)
            if lcore_of(self.c) == 1:
                break
            self.c.s.close()
        else:
            raise Failure("64 connections and none on lcore 1")
        self.chans = chans
        self.c.send(resp("SUBSCRIBE", *chans))
        self.c.replies(len(chans))
        self.got = []

    def drain(self, timeout):
        """Read messages until none comes for @timeout seconds (parsed in bulk: a
        reply at a time would copy the buffer for each)."""
        buf, i = self.c.buf, 0
        self.c.buf = b""
        while True:
            while True:  # whole messages at buf[i:]
                j = buf.find(b"\r\n", i)
                if j < 0:
                    break
                parts, k = [], j + 2
                check(buf[i:j] == b"*3", "not a message: %r" % buf[i:i + 80])
                for _ in range(3):
                    e = buf.find(b"\r\n", k)
                    if e < 0:
                        break
                    n = int(buf[k + 1:e])
                    if len(buf) < e + 2 + n + 2:
                        break
                    parts.append(buf[e + 2:e + 2 + n])
                    k = e + 2 + n + 2
                if len(parts) < 3:
                    break
                check(parts[0] == b"message", "not a message: %r" % parts)
                self.got.append((parts[1].decode(), parts[2].decode()))
                i = k
            buf, i = buf[i:], 0
            self.c.s.settimeout(timeout)
            try:
                d = self.c.s.recv(1 << 20)
            except OSError:
                self.c.buf = buf
                return
            check(d, "subscriber closed")
            buf += d


def t_pubsub(args):
    run = Run(args.exe, args.driver)
    chans = ["c%d" % i for i in range(6)]
    try:
        stop = threading.Event()
        pubs = [Publisher(run.kv.port, i, args.seed * 10 + i, chans, stop) for i in range(4)]
        subs = []
        joined = []  # per subscriber: how many messages each publisher had sent when it
        for p in pubs:  # had subscribed (what comes before is not owed to it)
            p.start()
        rng = random.Random(args.seed)
        for cycle in range(args.cycles):
            for _ in range(3):
                s = Subscriber(run.kv.port, rng.sample(chans, 3))
                subs.append(s)
            time.sleep(0.05 + rng.random() * 0.05)
            t0 = time.monotonic()
            run.retire()
            took = time.monotonic() - t0
            for s in subs:
                s.drain(0.001)
            time.sleep(0.05)
            run.start()
            log("cycle %d: %d subscribers, %d messages published, retired in %.0f ms" % (
                cycle, len(subs), sum(len(p.sent) for p in pubs), took * 1000))
        time.sleep(0.1)
        stop.set()
        for p in pubs:
            p.join(20)
            check(p.err is None, "publisher %d: %s" % (p.idx, p.err))
        for s in subs:
            s.drain(0.5)
        total = 0
        for si, s in enumerate(subs):
            for p in pubs:
                want = [m for ch, m in p.sent if ch in s.chans]
                got = [m for ch, m in s.got if m.startswith("p%d:" % p.idx)]
                # Owed: everything after its subscription; it began during the stream,
                # so it got a suffix of what was published: the suffix must be whole.
                check(got, "subscriber %d got nothing of publisher %d" % (si, p.idx))
                start = want.index(got[0]) if got[0] in want else -1
                check(start >= 0, "subscriber %d got %r, never published" % (si, got[0]))
                check(got == want[start:], "subscriber %d, publisher %d: %d messages from "
                      "the first, %d published since (first difference at %s)"
                      % (si, p.idx, len(got), len(want) - start,
                         next((i for i, (a, b) in enumerate(zip(got, want[start:]))
                               if a != b), min(len(got), len(want) - start))))
                for ch, m in s.got:
                    check(ch in s.chans, "message of channel %s" % ch)
                total += len(got)
        moved = run.counter(0, "kv_clients_moved_in")
        fwd = run.total("kv_pubsub_forwarded")
        log("%d subscribers (all made on lcore 1, moved), %d publishers, %d messages "
            "published, %d received, each in order and once; kv_clients_moved_in %d, "
            "kv_pubsub_forwarded %d" % (len(subs), len(pubs), sum(len(p.sent) for p in pubs),
                                        total, moved, fwd))
        check(moved >= len(subs), "kv_clients_moved_in %d < %d subscribers" % (moved, len(subs)))
        run.kv.stop()
    finally:
        if run.kv.proc.poll() is None:
            run.kv.proc.kill()
    return 0


class Blocker(threading.Thread):
    """BLPOP after BLPOP (a PING pipelined behind each), on lcore 1 when it starts."""

    def __init__(self, port, lists, seed, stop):
        super().__init__(daemon=True)
        for _ in range(64):
            self.c = Conn(port, timeout=30)
            if lcore_of(self.c) == 1:
                break
            self.c.s.close()
        else:
            raise Failure("64 connections and none on lcore 1")
        self.lists, self.rng, self.stop = lists, random.Random(seed), stop
        self.got, self.waits, self.err = [], 0, None

    def run(self):
        try:
            while not self.stop.is_set():
                keys = self.rng.sample(self.lists, self.rng.randrange(1, 4))
                tmo = self.rng.choice(["0", "0.3", "1", "2.5"])
                t0 = time.monotonic()
                self.c.send(resp("BLPOP", *keys, tmo) + resp("PING"))
                r = self.c.replies(1, timeout=60)[0]
                took = time.monotonic() - t0
                self.waits += 1
                if r == b"*-1\r\n":
                    check(tmo != "0", "BLPOP 0 answered nil")
                    check(took >= float(tmo) - 0.02, "BLPOP %s answered nil after %.3f s"
                          % (tmo, took))
                    check(took < float(tmo) + 3.0, "BLPOP %s answered after %.3f s"
                          % (tmo, took))
                else:
                    parts = r.split(b"\r\n")
                    check(parts[0] == b"*2" and parts[2].decode() in keys,
                          "BLPOP %r answered %r" % (keys, r))
                    self.got.append(parts[4].decode())
                check(self.c.replies(1, timeout=10) == [b"+PONG\r\n"], "PING behind BLPOP")
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.err = e


def t_blocked(args):
    """Blocked clients of lcore 1 through retires, a seeded pusher: every element pushed
    is popped once or still in its list, no blocked client answered early or closed."""
    run = Run(args.exe, args.driver)
    lists = on_shard("bl", 0, n=6)
    try:
        stop = threading.Event()
        rng = random.Random(args.seed)
        blockers = []
        pusher = Conn(run.kv.port, timeout=20)
        pushed = []
        n = 0
        for cycle in range(args.cycles):
            for _ in range(4):
                b = Blocker(run.kv.port, lists, rng.random(), stop)
                b.start()
                blockers.append(b)
            time.sleep(0.05)
            for phase in range(2):
                for _ in range(rng.randrange(5, 20)):
                    k = rng.choice(lists)
                    pusher.send(resp("RPUSH", k, "e%d" % n))
                    check(pusher.replies(1)[0].startswith(b":"), "RPUSH")
                    pushed.append("e%d" % n)
                    n += 1
                    time.sleep(rng.random() * 0.01)
                if phase == 0:
                    run.retire()
            run.start()
            log("cycle %d: %d blockers, %d pushed" % (cycle, len(blockers), len(pushed)))
        time.sleep(0.5)
        stop.set()
        # wake whoever still waits: each gets one of these, or its timeout
        for i in range(len(blockers) * 2):
            k = lists[i % len(lists)]
            pusher.send(resp("RPUSH", k, "w%d" % i))
            pusher.replies(1)
            pushed.append("w%d" % i)
        for b in blockers:
            b.join(30)
            check(not b.is_alive(), "a blocker did not finish")
            check(b.err is None, "blocker: %s" % b.err)
        left = []
        for k in lists:
            pusher.send(resp("LRANGE", k, "0", "-1"))
            r = pusher.replies(1)[0].split(b"\r\n")
            left += [x.decode() for x in r[2::2] if x]
        got = [e for b in blockers for e in b.got]
        everything = got + left
        check(len(everything) == len(set(everything)), "%d elements popped twice"
              % (len(everything) - len(set(everything))))
        check(sorted(everything) == sorted(pushed), "%d pushed, %d popped + %d left"
              % (len(pushed), len(got), len(left)))
        moved = run.total("kv_blocked_moved_in")
        log("%d blockers, %d BLPOPs, %d elements pushed: %d popped, %d left, none twice; "
            "kv_blocked_moved_in %d" % (len(blockers), sum(b.waits for b in blockers),
                                        len(pushed), len(got), len(left), moved))
        check(moved > 0, "no blocked client moved")
        run.kv.stop()
    finally:
        if run.kv.proc.poll() is None:
            run.kv.proc.kill()
    return 0


class Streamer(threading.Thread):
    """A seeded command stream over its own keys (a hash tag of the staying lcore's
    shard), pipelined in batches to cr-kv and to redis-server; replies compared."""

    def __init__(self, kvport, rport, idx, seed, stop):
        super().__init__(daemon=True)
        self.k, self.r = Conn(kvport, timeout=30), Conn(rport, timeout=30)
        self.tag = "{%s}" % on_shard("st%d_" % idx, 0)
        self.script = random_stream(seed, 20000)
        self.rng, self.stop = random.Random(seed), stop
        self.done, self.bad, self.err = 0, [], None

    def run(self):
        try:
            i = 0
            while not self.stop.is_set() and i < len(self.script):
                chunk = self.script[i:i + self.rng.randrange(1, 24)]
                i += len(chunk)
                data = b"".join(resp(*[(self.tag + a) if a.startswith("r:") else a
                                       for a in args]) for args, _ in chunk)
                self.k.send(data)
                self.r.send(data)
                ours, theirs = self.k.replies(len(chunk), 30), self.r.replies(len(chunk), 30)
                for (args, mode), x, y in zip(chunk, ours, theirs):
                    if not compare(mode, x, y):
                        self.bad.append("%r: cr-kv %r, redis %r" % (args, x[:100], y[:100]))
                self.done += len(chunk)
                if len(self.bad) > 3:
                    break
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.err = e


def t_stream(args):
    """40 clients, each a seeded command stream over its own keys compared with
    redis-server, while the pool goes 2 -> 1 -> 2 ten times (/pool/resize)."""
    need("redis-server")
    red = Redis()
    run = Run(args.exe, args.driver)
    try:
        stop = threading.Event()
        ss = [Streamer(run.kv.port, red.port, i, args.seed * 100 + i, stop) for i in range(40)]
        on1 = sum(lcore_of(x.k) for x in ss)
        for x in ss:
            x.start()
        rng = random.Random(args.seed)
        for cycle in range(args.cycles):
            time.sleep(0.1 + rng.random() * 0.2)
            r = run.tel("/pool/resize,1")
            check("error" not in str(r), "resize to 1: %r" % r)
            run.wait_state(1, "OFFLINE")
            time.sleep(0.1 + rng.random() * 0.2)
            r = run.tel("/pool/resize,2")
            check("error" not in str(r), "resize to 2: %r" % r)
            run.wait_state(1, "RUNNING")
        time.sleep(0.2)
        stop.set()
        for x in ss:
            x.join(60)
            check(not x.is_alive(), "a client did not finish")
            check(x.err is None, "client %s: %s" % (x.tag, x.err))
            check(not x.bad, "client %s: replies differ:\n  %s" % (x.tag, "\n  ".join(x.bad)))
        moved = run.total("kv_clients_moved_in")
        log("40 clients (%d on lcore 1 at first), %d commands, identical replies, 0 "
            "disconnects over %d resizes 2->1->2; kv_clients_moved_in %d"
            % (on1, sum(x.done for x in ss), args.cycles, moved))
        check(moved >= on1, "kv_clients_moved_in %d < %d clients on lcore 1" % (moved, on1))
        run.kv.stop()
    finally:
        if run.kv.proc.poll() is None:
            run.kv.proc.kill()
        red.stop()
    return 0


TESTS = {"stream": t_stream, "kinds": t_kinds, "pubsub": t_pubsub, "blocked": t_blocked}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exe")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="auto", choices=("auto", "uring", "epoll"))
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        log("SKIP: 2 lcores need 2 CPUs")
        return 77
    try:
        TESTS[args.test](args)
    except Failure as e:
        import traceback
        traceback.print_exc()
        log("FAIL: %s" % e)
        return 1
    log("PASS: %s (%s)" % (args.test, args.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
