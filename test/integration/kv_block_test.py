#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Blocking pops of app/cr-kv against redis-server 7 as the oracle, on loopback.

  kv_block_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

  scenarios  clients block (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX,
             BZMPOP), other clients push, time out, disconnect, pipeline behind them; the
             same steps against cr-kv and redis, every reply compared byte for byte, with
             the keys on one shard and (on two lcores) on two.
  stress     consumers blocking with short timeouts race producers over keys of both
             shards: every element pushed is popped exactly once or still in its list
             (a timeout never loses one, a serve never duplicates one); consumers that
             disconnect while blocked never make one appear twice.
  shutdown   SIGTERM while clients are blocked with no timeout: cr-kv exits 0 promptly.

"Blocked" is observed as redis exposes it, INFO's blocked_clients, on both servers.
Exits 0 (pass), 1 (fail), 77 (skip). Every wait is bounded.
"""
import os
import random
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import (Conn, Failure, check, log, need, on_shard, parse_array, resp,  # noqa: E402
                     telemetry_cmd)


def blocked(port):
    m = re.search(rb"blocked_clients:(\d+)", Conn(port).cmd("INFO", "clients"))
    return int(m.group(1))


def wait_blocked(port, n, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if blocked(port) == n:
            return
        time.sleep(0.01)
    raise Failure("blocked_clients did not reach %d in %.0f s (it is %d)"
                  % (n, timeout, blocked(port)))


class Run:
    """One scenario's steps against one server: what each client was answered."""

    def __init__(self, port):
        self.port = port
        self.c = {}
        self.seen = []

    def cmd(self, who, *args):
        self.seen.append((who, args, self._conn(who).cmd(*args)))

    def send(self, who, *args):
        self._conn(who).send(resp(*args))

    def read(self, who, n=1):
        for r in self._conn(who).replies(n, 15):
            self.seen.append((who, "read", r))

    def blocked(self, n):
        wait_blocked(self.port, n)

    def still(self, n, wait=0.2):
        """Nothing was served: after @wait s, still @n blocked."""
        time.sleep(wait)
        self.blocked(n)

    def close(self, who):
        self.c.pop(who).close()

    def _conn(self, who):
        if who not in self.c:
            self.c[who] = Conn(self.port, timeout=20)
        return self.c[who]

    def done(self):
        for c in self.c.values():
            c.close()


def scenarios(k):
    """(name, fn(run)) over keys k[0..5]."""
    out = []

    def sc(fn):
        out.append((fn.__name__, fn))
        return fn

    @sc
    def push_wakes(r):
        r.send("a", "BLPOP", k[0], k[1], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[1], "x", "y"); r.read("a"); r.cmd("d", "LRANGE", k[1], "0", "-1")

    @sc
    def fifo(r):
        for who in "abc":
            r.send(who, "BLPOP", k[0], "0"); r.blocked(" abc".index(who))
        r.cmd("d", "RPUSH", k[0], "1", "2", "3", "4")
        for who in "abc":
            r.read(who)
        r.cmd("d", "LRANGE", k[0], "0", "-1")

    @sc
    def one_each(r):
        r.send("a", "BRPOP", k[0], "0"); r.blocked(1)
        r.send("b", "BRPOP", k[0], "0"); r.blocked(2)
        r.cmd("d", "RPUSH", k[0], "first"); r.read("a"); r.still(1)
        r.cmd("d", "LPUSH", k[0], "second"); r.read("b"); r.cmd("d", "EXISTS", k[0])

    @sc
    def blmove(r):
        r.send("a", "BLMOVE", k[0], k[1], "LEFT", "RIGHT", "0"); r.blocked(1)
        r.cmd("d", "LPUSH", k[0], "v", "w"); r.read("a")
        r.cmd("d", "LRANGE", k[0], "0", "-1"); r.cmd("d", "LRANGE", k[1], "0", "-1")
        r.send("a", "BRPOPLPUSH", k[2], k[1], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[2], "p", "q"); r.read("a"); r.cmd("d", "LRANGE", k[1], "0", "-1")

    @sc
    def chain(r):
        r.send("a", "BLMOVE", k[0], k[1], "RIGHT", "LEFT", "0"); r.blocked(1)
        r.send("b", "BLPOP", k[1], "0"); r.blocked(2)
        r.cmd("d", "RPUSH", k[0], "v"); r.read("a"); r.read("b"); r.cmd("d", "EXISTS", k[0], k[1])

    @sc
    def zsets(r):
        r.send("a", "BZPOPMIN", k[0], k[1], "0"); r.blocked(1)
        r.cmd("d", "ZADD", k[1], "2", "b", "1", "a"); r.read("a")
        r.send("b", "BZPOPMAX", k[2], "0"); r.blocked(1)
        r.cmd("d", "ZADD", k[2], "5", "x", "-1", "y"); r.read("b")
        r.send("c", "BZMPOP", "0", "2", k[3], k[4], "MAX", "COUNT", "5"); r.blocked(1)
        r.cmd("d", "ZADD", k[4], "1", "a", "2", "b", "3", "c"); r.read("c")
        r.cmd("d", "ZRANGE", k[1], "0", "-1", "WITHSCORES"); r.cmd("d", "EXISTS", k[4])

    @sc
    def blmpop(r):
        r.send("a", "BLMPOP", "0", "2", k[0], k[1], "RIGHT", "COUNT", "2"); r.blocked(1)
        r.cmd("d", "RPUSH", k[1], "1", "2", "3"); r.read("a"); r.cmd("d", "LRANGE", k[1], "0", "-1")

    @sc
    def other_type(r):
        # made as a sorted set: a list waiter stays blocked (Redis 7.0), and the reverse
        r.send("a", "BLPOP", k[0], "0"); r.blocked(1)
        r.cmd("d", "ZADD", k[0], "1", "m"); r.still(1)
        r.cmd("d", "DEL", k[0]); r.cmd("d", "RPUSH", k[0], "x"); r.read("a")
        r.send("b", "BZPOPMIN", k[1], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[1], "l"); r.still(1); r.cmd("d", "DEL", k[1])
        r.cmd("d", "ZADD", k[1], "7", "z"); r.read("b")

    @sc
    def dst_wrong_type(r):
        r.send("a", "BLMOVE", k[0], k[1], "LEFT", "LEFT", "0"); r.blocked(1)
        r.cmd("d", "SET", k[1], "str"); r.cmd("d", "RPUSH", k[0], "v"); r.read("a")
        r.cmd("d", "LRANGE", k[0], "0", "-1"); r.blocked(0)

    @sc
    def made_otherwise(r):
        # RENAME, LMOVE, ZUNIONSTORE, COPY, RPOPLPUSH make the key waited for
        r.send("a", "BLPOP", k[0], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[5], "x"); r.cmd("d", "RENAME", k[5], k[0]); r.read("a")
        r.send("b", "BRPOP", k[1], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[2], "y"); r.cmd("d", "LMOVE", k[2], k[1], "LEFT", "LEFT"); r.read("b")
        r.send("c", "BZPOPMIN", k[3], "0"); r.blocked(1)
        r.cmd("d", "ZADD", k[4], "1", "q"); r.cmd("d", "ZUNIONSTORE", k[3], "1", k[4]); r.read("c")
        r.send("a", "BLPOP", k[0], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[2], "z"); r.cmd("d", "COPY", k[2], k[0]); r.read("a")
        r.send("a", "BLPOP", k[0], "0"); r.blocked(1)
        r.cmd("d", "RPUSH", k[5], "w"); r.cmd("d", "RPOPLPUSH", k[5], k[0]); r.read("a")
        r.cmd("d", "LRANGE", k[2], "0", "-1")

    @sc
    def disconnect(r):
        r.send("a", "BLPOP", k[0], k[1], "0"); r.blocked(1)
        r.close("a"); r.blocked(0)
        r.cmd("d", "RPUSH", k[1], "kept"); r.cmd("d", "LRANGE", k[1], "0", "-1")
        r.send("b", "BLMOVE", k[2], k[3], "LEFT", "LEFT", "0"); r.blocked(1)
        r.close("b"); r.blocked(0)
        r.cmd("d", "RPUSH", k[2], "kept"); r.cmd("d", "EXISTS", k[2], k[3])

    @sc
    def pipelined_behind(r):
        # a blocked client runs nothing else: its SET waits behind its BLPOP
        r.c["a"] = Conn(r.port, timeout=20)
        r.c["a"].send(resp("BLPOP", k[0], "0") + resp("SET", k[2], "after") + resp("GET", k[2]))
        r.blocked(1)
        r.cmd("d", "GET", k[2]); r.cmd("d", "RPUSH", k[0], "x"); r.read("a", 3)
        r.cmd("d", "GET", k[2])

    @sc
    def timeouts(r):
        for args in (("BLPOP", k[0], k[1], "0.2"), ("BRPOP", k[0], "0.05"),
                     ("BZPOPMAX", k[0], k[1], "0.1"), ("BLMOVE", k[0], k[1], "LEFT", "LEFT", "0.1"),
                     ("BRPOPLPUSH", k[0], k[1], "0.1"), ("BLMPOP", "0.1", "2", k[0], k[1], "LEFT"),
                     ("BZMPOP", "0.1", "1", k[0], "MIN", "COUNT", "3")):
            t0 = time.monotonic()
            r.cmd("a", *args)
            took = time.monotonic() - t0
            want = float(args[-1] if args[0] not in ("BLMPOP", "BZMPOP") else args[1])
            check(want * 0.9 <= took < want + 5, "%r answered after %.3f s" % (args, took))
        r.cmd("d", "RPUSH", k[0], "late"); r.cmd("d", "LLEN", k[0]); r.blocked(0)

    @sc
    def several_pushed(r):
        r.send("a", "BLPOP", k[0], "0"); r.blocked(1)
        r.send("b", "BLPOP", k[0], "0"); r.blocked(2)
        r.cmd("d", "RPUSH", k[0], "a", "b", "c"); r.read("a"); r.read("b")
        r.cmd("d", "LRANGE", k[0], "0", "-1")

    return out


def layouts(lcores):
    out = [("one shard", ["{bk}%d" % i for i in range(6)])]
    if lcores > 1:
        out.append(("two shards", [on_shard("bk%d_" % i, i % 2) for i in range(6)]))
    return out


def t_scenarios(o):
    need("redis-server")
    red = o.redis()
    bad = []
    for lname, k in layouts(o.lcores):
        for name, fn in scenarios(k):
            got = []
            for port in (o.kv.port, red.port):
                Conn(port).cmd("DEL", *k)
                r = Run(port)
                try:
                    fn(r)
                finally:
                    r.done()
                wait_blocked(port, 0)
                got.append(r.seen)
            if got[0] != got[1]:
                for x, y in zip(got[0], got[1]):
                    if x != y:
                        bad.append("%s, %s: cr-kv %r, redis %r" % (lname, name, x, y))
                        break
                else:
                    bad.append("%s, %s: %d steps against %d" % (lname, name, len(got[0]),
                                                               len(got[1])))
            log("%s, %s: %d replies" % (lname, name, len(got[0])))
    check(not bad, "%d scenarios differ:\n  " % len(bad) + "\n  ".join(bad))


def t_stress(o):
    """Producers push unique elements onto lists of both shards; consumers pop them with
    every blocking pop and short timeouts; some consumers disconnect while blocked on lists
    of their own. Everything pushed onto the shared lists is popped once or still there."""
    k = [on_shard("st%d_" % i, i % 2) for i in range(4)] if o.lcores > 1 else \
        ["st%d" % i for i in range(4)]
    gone_keys = [on_shard("sg%d_" % i, i % 2) for i in range(2)] if o.lcores > 1 else ["sg0", "sg1"]
    pushed, got, errors = [], [], []
    lock = threading.Lock()
    stop = threading.Event()
    n_prod, per_prod = 4, 400

    def producer(p):
        try:
            c = Conn(o.kv.port, timeout=30)
            rnd = random.Random(p)
            for j in range(per_prod):
                v = "p%d:%d" % (p, j)
                c.cmd(rnd.choice(["RPUSH", "LPUSH"]), rnd.choice(k), v)
                with lock:
                    pushed.append(v)
                if j % 50 == 0:
                    c.cmd("RPUSH", rnd.choice(gone_keys), "g%d:%d" % (p, j))
            c.close()
        except Exception as e:  # noqa: BLE001 (reported)
            errors.append("producer %d: %r" % (p, e))

    def consumer(i):
        rnd = random.Random(100 + i)
        try:
            c = Conn(o.kv.port, timeout=30)
            while not stop.is_set():
                t = rnd.choice(["0.01", "0.02", "0.05", "0.2"])
                pick = rnd.sample(k, rnd.randrange(1, 4))
                op = rnd.randrange(5)
                if op == 0:
                    r = c.cmd("BLPOP", *pick, t)
                elif op == 1:
                    r = c.cmd("BRPOP", *pick, t)
                elif op == 2:
                    r = c.cmd("BLMPOP", t, len(pick), *pick, "LEFT", "COUNT", "3")
                elif op == 3:
                    # moved onto another shared list: still counted there
                    r = c.cmd("BLMOVE", pick[0], rnd.choice(k), "RIGHT", "LEFT", t)
                    check(r == b"*-1\r\n" or r.startswith(b"$"), "BLMOVE: %r" % r)
                    continue
                else:
                    r = c.cmd("BLPOP", *pick, "0.01")
                if r == b"*-1\r\n":
                    continue
                items = parse_array(r)
                vals = parse_array(items[1]) if op == 2 else [items[1]]
                with lock:
                    got.extend(v.split(b"\r\n")[1].decode() for v in vals)
            c.close()
        except Exception as e:  # noqa: BLE001 (reported)
            errors.append("consumer %d: %r" % (i, e))

    def leaver(i):
        rnd = random.Random(200 + i)
        try:
            while not stop.is_set():
                c = Conn(o.kv.port, timeout=30)
                c.send(resp("BLPOP", *gone_keys, "0"))
                time.sleep(rnd.random() * 0.02)
                c.close()
        except Exception as e:  # noqa: BLE001 (reported)
            errors.append("leaver %d: %r" % (i, e))

    cons = [threading.Thread(target=consumer, args=(i,)) for i in range(6)]
    leavers = [threading.Thread(target=leaver, args=(i,)) for i in range(2)]
    prods = [threading.Thread(target=producer, args=(p,)) for p in range(n_prod)]
    for t in cons + leavers + prods:
        t.start()
    for t in prods:
        t.join(90)
    time.sleep(0.5)
    stop.set()
    for t in cons + leavers:
        t.join(60)
    check(not errors, "clients failed: %r" % errors[:3])
    c = Conn(o.kv.port)
    wait_blocked(o.kv.port, 0)
    left = []
    for key in k:
        left += [x.split(b"\r\n")[1].decode() for x in parse_array(c.cmd("LRANGE", key, "0", "-1"))]
    everything = got + left
    dup = len(everything) - len(set(everything))
    check(dup == 0, "%d elements popped twice" % dup)
    lost = set(pushed) - set(everything)
    check(not lost, "%d elements lost, e.g. %r" % (len(lost), sorted(lost)[:5]))
    check(len(everything) == len(pushed), "%d pushed, %d accounted for"
          % (len(pushed), len(everything)))
    g = sum(len(parse_array(c.cmd("LRANGE", key, "0", "-1"))) for key in gone_keys)
    log("%d pushed: %d popped, %d left; %d of the leavers' lists left"
        % (len(pushed), len(got), len(left), g))
    c.close()


def t_shutdown(o):
    """SIGTERM with clients blocked for ever (keys of one shard and of two): exit 0."""
    k = [on_shard("sd%d_" % i, i % 2) for i in range(2)] if o.lcores > 1 else ["sd0", "sd1"]
    conns = []
    for i in range(6):
        c = Conn(o.kv.port, timeout=20)
        c.send(resp("BLPOP", *(k if i % 2 else ["{sd}x"]), "0"))
        conns.append(c)
    wait_blocked(o.kv.port, 6)
    t0 = time.monotonic()
    o.kv.proc.send_signal(signal.SIGTERM)
    o.kv.proc.wait(timeout=15)
    log("stopped in %.2f s" % (time.monotonic() - t0))
    check(o.kv.proc.returncode == 0, "exit status %s: %s" % (
        o.kv.proc.returncode, o.kv.proc.stderr.read().decode(errors="replace")[-2000:]))
    # before the shutdown timeout (10 s): nothing waits for a blocked client
    check(time.monotonic() - t0 < 8, "took %.1f s" % (time.monotonic() - t0))
    for c in conns:
        c.close()


def t_retire(o):
    """/lcore/retire,1 with clients blocked for ever on both lcores, each after a GET
    of a key of each shard, then lcore 1 started again and retired once more: every
    client of lcore 1 moves to lcore 0 still blocked (its wait there cancelled exactly
    once, the command blocking again on lcore 0): none is answered early or closed, INFO
    blocked_clients counts all 16 throughout, and a push then serves each one its own
    element. Before, a client of lcore 1 got the null reply and was closed."""
    if o.lcores < 2:
        log("SKIP: one lcore: nothing to retire beside the main lcore")
        return
    import tempfile
    tmp = tempfile.mkdtemp(prefix="kv-retire.")
    o.tmpdirs.append(tmp)
    path = os.path.join(tmp, "kv.sock")
    o.restart(["--telemetry", path])
    g = [on_shard("rg%d_" % i, i) for i in range(2)]
    lists = [on_shard("rl%d_" % i, 0) for i in range(16)]  # every list on lcore 0's shard
    setup = Conn(o.kv.port)
    setup.send(resp("SET", g[0], "a") + resp("SET", g[1], "b"))
    setup.replies(2)
    conns, on1 = [], 0
    for i in range(16):
        c = Conn(o.kv.port, timeout=20)
        c.send(resp("CLIENT", "INFO"))
        on1 += b"lcore=1" in c.replies(1)[0]
        c.send(resp("GET", g[0]) + resp("GET", g[1]) + resp("BLPOP", lists[i], "0"))
        conns.append(c)
    check(on1 > 0, "no client was on lcore 1 (16 connections: 1 in 65536)")
    for c in conns:
        check(c.replies(2) == [b"$1\r\na\r\n", b"$1\r\nb\r\n"], "GET replies")
    wait_blocked(o.kv.port, 16)

    def moved():
        st = telemetry_cmd(path, "/stats,0")["/stats"]["lcores"]
        return sum(x["app"]["kv_blocked_moved_in"] for x in st if x["lcore"] == 0)

    def wait_state(want):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            states = {x["lcore"]: x["state"] for x in telemetry_cmd(path, "/lcores")["/lcores"]}
            if states.get(1) == want:
                return
            time.sleep(0.05)
        raise Failure("lcore 1 not %s: %r" % (want, states))

    for rnd in range(2):
        r = telemetry_cmd(path, "/lcore/retire,1")
        check("error" not in r, "retire refused: %r" % r)
        wait_state("OFFLINE")
        for i, c in enumerate(conns):
            try:
                got = c.replies(1, timeout=0.2)[0]
            except (Failure, OSError) as e:
                check("closed" not in str(e), "client %d closed: %s" % (i, e))
                continue
            raise Failure("client %d answered %r while blocked" % (i, got))
        wait_blocked(o.kv.port, 16)
        if rnd == 0:
            check(moved() == on1, "%d blocked clients moved, %d were on lcore 1"
                  % (moved(), on1))
            r = telemetry_cmd(path, "/lcore/start,1")
            check("error" not in r, "start refused: %r" % r)
            wait_state("RUNNING")
    pusher = Conn(o.kv.port)
    for i in range(16):
        pusher.send(resp("RPUSH", lists[i], "x"))
        pusher.replies(1)
        want = b"*2\r\n$%d\r\n%s\r\n$1\r\nx\r\n" % (len(lists[i]), lists[i].encode())
        check(conns[i].replies(1) == [want], "client %d after the push" % i)
        conns[i].send(resp("CLIENT", "INFO"))
        check(b"lcore=0" in conns[i].replies(1)[0], "client %d not on lcore 0" % i)
    log("%d clients of lcore 1 moved blocked to lcore 0 (kv_blocked_moved_in %d), all 16 "
        "served by a push" % (on1, moved()))
    for c in conns:
        c.close()


TESTS = {"scenarios": t_scenarios, "stress": t_stress, "shutdown": t_shutdown,
         "retire": t_retire}


def main():
    return kv_test.main(TESTS, __doc__)

if __name__ == "__main__":
    sys.exit(main())
