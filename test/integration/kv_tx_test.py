#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Whole-keyspace commands and MULTI/EXEC/WATCH of app/cr-kv across shards, on loopback.

  kv_tx_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll] [--seed N]

  keys_atomic    writers SET a_i then SET b_i (a_i and b_i on different shards, which
                 way round drawn from --seed) while readers on both lcores run KEYS
                 and SCAN 0 COUNT 1000000 (one call over both shards): none shows b_i
                 without a_i.
  dbsize_atomic  one writer moves a token key between the shards (SET the next, then DEL
                 the last) while readers run DBSIZE: it never counts 0 or 3 tokens.
  multi_oracle   MULTI/EXEC/DISCARD/WATCH/UNWATCH scripts, byte for byte against
                 redis-server, keys on one shard and on two, singly and pipelined.
  exec_order     EXECs over keys of both shards, each command reading what an earlier one
                 wrote on the other shard: replies in queued order, as redis-server's.
  exec_time      a key whose TTL ends during an EXEC is live for all its commands (time
                 stands still, as in Redis; active expiry keeps it), gone after.
  shutdown_tx    SIGTERM (shutdown_tx_forced: and a second one) with an EXEC running,
                 EXECs queued behind it, open MULTIs and WATCHes: a clean exit, in time.
  multi_random   kv_test.py's seeded random command stream (every type, keys of both
                 shards) in MULTI/EXEC blocks, against redis-server.
  watch_race     two clients WATCH and GET one key, then both MULTI/INCR/EXEC at once:
                 exactly one EXEC applies each round, as in Redis.
  transfer       seeded transfers between counters on both shards in MULTI/EXEC while a
                 reader MGETs them all: the sum never changes.
  redis_py       redis-py's pipeline(transaction=True) and WATCH (python3-redis).

Exits 0 (pass), 1 (fail), 77 (skip). Every loop is bounded in count and time.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import (Conn, Failure, check, conn_on_lcore, key_shard, log,  # noqa: E402
                     parse_array, resp)


def named(prefix, shard, nshards, tag):
    """A key name starting with @prefix and @tag that lives on @shard."""
    j = 0
    while True:
        k = "%s%s.%d" % (prefix, tag, j)
        if key_shard(k, nshards) == shard:
            return k
        j += 1


def pad(c, n, prefix="pad:"):
    """@n keys that are not the test's, so that every KEYS walks a few ms of them."""
    for base in range(0, n, 1000):
        batch = [resp("SET", "%s%d" % (prefix, i), "x") for i in range(base, min(n, base + 1000))]
        c.send(b"".join(batch))
        c.replies(len(batch), 30)


def readers(o):
    """One connection per lcore (the shard read first is the reader's own)."""
    return [conn_on_lcore(o.kv.port, lc) for lc in range(o.lcores)]


class Local:
    """A writer's connections, one per lcore: each key written on its own shard's lcore
    (shard i is lcore i), so that nothing orders a write behind the messages of the
    lcore it came through: only the keyspace's own atomicity can."""

    def __init__(self, o):
        self.n = max(2, o.lcores)
        self.cs = readers(o) if o.lcores == 2 else [Conn(o.kv.port)] * 2

    def cmd(self, key, *args):
        return self.cs[key_shard(key, self.n) if len(self.cs) > 1 else 0].cmd(*args)

    def close(self):
        for c in set(self.cs):
            c.close()


def t_keys_atomic(o, writers=4, pairs=300, seconds=20.0):
    """KEYS (and a SCAN call that covers every shard) is one snapshot of every shard: a writer's SET a_i happens before its SET b_i,
    so a KEYS that shows b_i shows a_i (on the code before the whole-shard lock, each
    shard's part ran at its own moment and the reader whose own shard holds a_i saw b_i
    alone)."""
    n = max(2, o.lcores)
    c = Conn(o.kv.port)
    pad(c, 20000)
    # Each pair has a_i on one shard and b_i on the other, which way round drawn from the
    # seed (--seed N).
    rng = random.Random(SEED)
    sides = [[rng.randrange(2) for _ in range(pairs)] for _ in range(writers)]
    plan = [[(named("a:", sides[w][i], n, "%d.%d" % (w, i)),
              named("b:", 1 - sides[w][i], n, "%d.%d" % (w, i)))
             for i in range(pairs)] for w in range(writers)]
    a_of = {b: a for p in plan for a, b in p}
    done, errors, bad, reads = threading.Event(), [], [], [0]

    def write(w):
        try:
            wc = Local(o)
            for a, b in plan[w]:
                check(wc.cmd(a, "SET", a, "1") == b"+OK\r\n", "SET a")
                check(wc.cmd(b, "SET", b, "1") == b"+OK\r\n", "SET b")
            wc.close()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    def read(rc):
        try:
            deadline = time.monotonic() + seconds
            while not done.is_set() and time.monotonic() < deadline:
                rc.send(resp("KEYS", "[ab]:*") * 2 +
                        resp("SCAN", "0", "MATCH", "[ab]:*", "COUNT", "1000000"))
                for j, r in enumerate(rc.replies(3, 30)):
                    items = parse_array(r)
                    if j == 2:  # SCAN: one call over both shards
                        check(items[0] == b"$1\r\n0\r\n", "SCAN did not finish: %r" % items[0])
                        items = parse_array(items[1])
                    keys = set(k.split(b"\r\n")[1].decode() for k in items)
                    reads[0] += 1
                    bad.extend((b, a_of[b]) for b in keys
                               if b.startswith("b:") and a_of[b] not in keys)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    rs = [threading.Thread(target=read, args=(rc,)) for rc in readers(o)]
    ws = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in rs + ws:
        t.start()
    for t in ws:
        t.join(seconds + 30)
    done.set()
    for t in rs:
        t.join(30)
    log("%d KEYS read, %d saw b_i without a_i" % (reads[0], len(bad)))
    check(not errors, "clients failed: %r" % errors[:3])
    check(reads[0] > 0, "no KEYS answered")
    check(not bad, "%d KEYS showed b_i without a_i, e.g. %r" % (len(bad), bad[:3]))
    check(int(c.cmd("DBSIZE")[1:-2]) == 20000 + 2 * writers * pairs, "DBSIZE at the end")
    c.close()


def t_dbsize_atomic(o, moves=3000, seconds=20.0):
    """DBSIZE is one snapshot: a writer moves a token (SET t_{i+1} on one shard, then DEL
    t_i on the other), so the keyspace holds one or two tokens at every moment; a DBSIZE
    that counts its shards at different moments sees none or three. KEYS over padding
    keeps both lcores busy, so the moments drift apart."""
    n = max(2, o.lcores)
    c = Conn(o.kv.port)
    pad(c, 20000)
    tokens = [named("t:", i % 2, n, str(i)) for i in range(moves + 1)]
    check(c.cmd("SET", tokens[0], "1") == b"+OK\r\n", "first token")
    done, errors, counts = threading.Event(), [], {}

    def write():
        try:
            wc = Local(o)
            for i in range(moves):
                t, u = tokens[i + 1], tokens[i]
                check(wc.cmd(t, "SET", t, "1") == b"+OK\r\n", "SET")
                check(wc.cmd(u, "DEL", u) == b":1\r\n", "DEL")
            wc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def busy():
        try:
            bc = Conn(o.kv.port, timeout=30)
            while not done.is_set():
                bc.cmd("KEYS", "nomatch*")
            bc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def read(rc):
        try:
            deadline = time.monotonic() + seconds
            while not done.is_set() and time.monotonic() < deadline:
                rc.send(resp("DBSIZE") * 4)
                for r in rc.replies(4, 30):
                    v = int(r[1:-2]) - 20000
                    counts[v] = counts.get(v, 0) + 1
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ts = [threading.Thread(target=read, args=(rc,)) for rc in readers(o)]
    ts += [threading.Thread(target=busy)]
    w = threading.Thread(target=write)
    for t in ts + [w]:
        t.start()
    w.join(seconds + 30)
    done.set()
    for t in ts:
        t.join(30)
    log("DBSIZE tokens seen: %r" % sorted(counts.items()))
    check(not errors, "clients failed: %r" % errors[:3])
    wrong = {v: k for v, k in counts.items() if v not in (1, 2)}
    check(counts, "no DBSIZE answered")
    check(not wrong, "DBSIZE counted an impossible number of tokens: %r" % wrong)
    c.close()


# ---- MULTI/EXEC/WATCH against redis-server ----

def layouts(o):
    """Key names on one shard (a hash tag) and, on two lcores, spread over both."""
    out = [("one", ["{tx}k%d" % i for i in range(4)])]
    if o.lcores == 2:
        out.append(("two", [named("tk", i % 2, 2, str(i)) for i in range(4)]))
    return out


def tx_script(k):
    """(args, mode) steps over keys @k, every reply compared byte for byte."""
    E = "exact"
    st = []

    def a(*args):
        st.append((args, E))
    a("DEL", *k)
    a("MULTI"); a("SET", k[0], "1"); a("INCR", k[0]); a("GET", k[0]); a("EXEC")
    a("MULTI"); a("SET", k[0], "a"); a("SET", k[1], "b"); a("MGET", k[0], k[1], k[2])
    a("DEL", k[0], k[2]); a("EXISTS", k[0], k[1]); a("EXEC")
    a("MULTI"); a("MSET", k[0], "1", k[1], "2"); a("MSETNX", k[1], "x", k[2], "y")
    a("RENAME", k[0], k[3]); a("EXISTS", k[0], k[3]); a("MGET", k[0], k[1], k[2], k[3]); a("EXEC")
    a("MULTI"); a("MULTI"); a("SET", k[0], "n"); a("EXEC")
    a("EXEC"); a("DISCARD"); a("UNWATCH")
    a("MULTI"); a("SET", k[0], "discarded"); a("DISCARD"); a("GET", k[0])
    a("MULTI"); a("FOO", "bar"); a("SET", k[0], "x"); a("EXEC"); a("GET", k[0])
    a("MULTI"); a("GET"); a("SET", k[0], "x"); a("EXEC"); a("GET", k[0])
    a("MULTI"); a("CONFIG", "NOSUCH"); a("EXEC")
    a("MULTI"); a("EXEC", "x"); a("EXEC")
    a("MULTI"); a("SET", k[0], "str"); a("LPUSH", k[0], "x"); a("INCR", k[0]); a("SET", k[1], "ok")
    a("MSET", k[0], "1", k[1]); a("GET", k[1]); a("SELECT", "1"); a("EXEC")
    a("MULTI"); a("WATCH", k[0]); a("SET", k[0], "w"); a("EXEC")
    a("MULTI"); a("EXEC")
    a("MULTI"); a("PING"); a("ECHO", "hi"); a("UNWATCH"); a("EXEC")
    # WATCH: unmodified, modified by this client, unwatched, DISCARDed
    a("WATCH", k[0]); a("MULTI"); a("SET", k[0], "1"); a("EXEC")
    a("WATCH", k[0], k[1]); a("SET", k[1], "mine"); a("MULTI"); a("SET", k[0], "2"); a("EXEC")
    a("GET", k[0])
    a("WATCH", k[0]); a("UNWATCH"); a("SET", k[0], "3"); a("MULTI"); a("GET", k[0]); a("EXEC")
    a("WATCH", k[0]); a("SET", k[0], "4"); a("MULTI"); a("DISCARD"); a("MULTI"); a("GET", k[0])
    a("EXEC")
    a("WATCH", k[2]); a("MULTI"); a("GET", k[2]); a("EXEC")
    a("WATCH", k[0]); a("EXPIRE", k[0], "100"); a("MULTI"); a("TTL", k[0]); a("EXEC")
    a("WATCH", k[0]); a("MULTI"); a("FOO"); a("EXEC"); a("SET", k[0], "5")
    a("MULTI"); a("GET", k[0]); a("EXEC")
    # whole-keyspace commands inside
    a("FLUSHALL"); a("SET", k[1], "v"); a("MULTI"); a("DBSIZE"); a("KEYS", k[1]); a("EXISTS", k[1])
    a("RANDOMKEY"); a("FLUSHALL"); a("DBSIZE"); a("SCAN", "0"); a("EXEC")
    a("SET", k[0], "6"); a("WATCH", k[0]); a("FLUSHDB"); a("MULTI"); a("SET", k[1], "x"); a("EXEC")
    a("EXISTS", k[1])
    # types, and a blocking pop that does not block
    a("MULTI"); a("LPUSH", k[0], "a", "b"); a("RPOP", k[0]); a("SADD", k[1], "m")
    a("HSET", k[2], "f", "v"); a("ZADD", k[3], "1", "z"); a("BLPOP", k[0], "0")
    a("BLPOP", k[0], "0"); a("SMEMBERS", k[1]); a("HGETALL", k[2]); a("ZRANGE", k[3], "0", "-1")
    a("TYPE", k[2]); a("EXEC")
    # blocking pops over one key and over keys of both shards: they do not block
    a("DEL", *k); a("MULTI"); a("BLMOVE", k[0], k[1], "LEFT", "RIGHT", "0")
    a("BRPOPLPUSH", k[0], k[1], "0"); a("BLMPOP", "0", "2", k[0], k[1], "LEFT")
    a("BZMPOP", "0", "2", k[2], k[3], "MIN"); a("BLPOP", k[0], k[1], "0"); a("BZPOPMIN", k[2], k[3], "0")
    a("BRPOP", k[0], "0"); a("RPUSH", k[1], "x", "y", "z"); a("ZADD", k[3], "1", "m", "2", "n")
    a("BLPOP", k[0], k[1], "0"); a("BRPOP", k[0], k[1], "0"); a("BZPOPMAX", k[2], k[3], "0")
    a("BZMPOP", "0", "2", k[2], k[3], "MIN", "COUNT", "5"); a("BLMOVE", k[1], k[0], "RIGHT", "LEFT", "0")
    a("BRPOPLPUSH", k[0], k[1], "0"); a("BLMPOP", "0", "2", k[0], k[1], "RIGHT", "COUNT", "5")
    a("SET", k[0], "s"); a("BLPOP", k[0], k[1], "0"); a("BLMOVE", k[0], k[1], "LEFT", "LEFT", "0")
    a("BLMPOP", "0", "2", k[1], k[0], "LEFT"); a("BLPOP", k[1], "x", "0"); a("EXEC")
    return st


def t_multi_oracle(o):
    """Every step of tx_script byte for byte against redis-server, one at a time and
    pipelined, keys on one shard and (two lcores) on two; then WATCH with a second
    client modifying, and expiry."""
    r = o.redis()
    bad = []
    for name, k in layouts(o):
        for pipelined in (False, True):
            got = kv_test.run_script(o.kv.port, r.port, tx_script(k), pipelined)
            bad += ["%s%s: %s" % (name, " pipelined" if pipelined else "", b) for b in got]
        for port in (o.kv.port, r.port):
            Conn(port).cmd("FLUSHALL")
        # another client modifies a watched key (or another key) between WATCH and EXEC
        for other, what in ((k[0], "SET"), (k[1], "SET"), (k[0], "EXPIRE"), (k[0], "DEL")):
            outs = []
            for port in (o.kv.port, r.port):
                c1, c2 = Conn(port), Conn(port)
                c1.cmd("SET", k[0], "1")
                got = [c1.cmd("WATCH", k[0], k[2]), c1.cmd("GET", k[0])]
                args = (what, other, "10") if what == "EXPIRE" else \
                       (what, other) if what == "DEL" else (what, other, "2")
                got.append(c2.cmd(*args))
                got += [c1.cmd("MULTI"), c1.cmd("INCR", k[0]), c1.cmd("EXEC"), c1.cmd("GET", k[0])]
                outs.append(got)
                c1.close()
                c2.close()
            if outs[0] != outs[1]:
                bad.append("%s: %s %s by another client: cr-kv %r, redis %r"
                           % (name, what, other, outs[0], outs[1]))
        # a watched key that expires before EXEC (Redis 7.0: the EXEC fails)
        outs = []
        for port in (o.kv.port, r.port):
            c = Conn(port)
            got = [c.cmd("SET", k[0], "v", "PX", "100"), c.cmd("WATCH", k[0])]
            time.sleep(0.25)
            got += [c.cmd("MULTI"), c.cmd("SET", k[1], "x"), c.cmd("EXEC")]
            outs.append(got)
            c.close()
        if outs[0] != outs[1]:
            bad.append("%s: watched key expired: cr-kv %r, redis %r" % (name, outs[0], outs[1]))
    check(not bad, "%d differences:\n  %s" % (len(bad), "\n  ".join(bad[:20])))


def order_script(o):
    """EXECs whose queued commands touch keys of both shards, reading what an earlier
    command of the same EXEC wrote on the other shard, in every order."""
    n = max(2, o.lcores)
    a, b, c = named("oa", 0, n, "x"), named("ob", 1 % n, n, "x"), named("oc", 1 % n, n, "y")
    E = "exact"
    st = []

    def s(*args):
        st.append((args, E))
    s("DEL", a, b, c)
    s("MULTI"); s("SET", a, "1"); s("GET", b); s("SET", b, "2"); s("GET", a); s("INCR", a)
    s("GET", b); s("EXEC")
    s("MULTI"); s("INCR", a); s("INCRBY", b, "10"); s("MGET", a, b); s("DEL", a); s("MGET", a, b)
    s("SET", a, "x"); s("APPEND", a, "y"); s("GET", a); s("EXEC")
    s("MULTI"); s("RPUSH", b, "1"); s("RENAME", a, c); s("GET", c); s("EXISTS", a, b, c)
    s("DEL", b); s("RPUSH", b, "p", "q"); s("LMOVE", b, a, "LEFT", "RIGHT"); s("LRANGE", a, "0", "-1")
    s("LRANGE", b, "0", "-1"); s("EXEC")
    s("MULTI"); s("MSET", a, "1", b, "2"); s("INCR", b); s("MGET", a, b, c); s("DEL", a, b, c)
    s("MGET", a, b, c); s("SET", b, "last"); s("GET", b); s("DBSIZE"); s("EXEC")
    # many alternating steps: each reply in queued order
    s("MULTI")
    for i in range(40):
        s("INCR", a if i % 3 else b)
        s("GET", b if i % 2 else a)
    s("EXEC")
    s("MGET", a, b, c)
    return st


def t_exec_order(o):
    """An EXEC over keys of both shards runs its commands in queued order and answers in
    that order, byte for byte against redis-server, singly and pipelined."""
    r = o.redis()
    bad = []
    for pipelined in (False, True):
        for port in (o.kv.port, r.port):
            Conn(port).cmd("FLUSHALL")
        got = kv_test.run_script(o.kv.port, r.port, order_script(o), pipelined)
        bad += ["%s: %s" % ("pipelined" if pipelined else "one by one", x) for x in got]
    check(not bad, "%d differences:\n  %s" % (len(bad), "\n  ".join(bad[:20])))


def t_exec_time(o, members=100000, ttl_ms=150, work_s=0.45):
    """Time stands still during EXEC, as in Redis: a key whose TTL ends while the EXEC
    runs (a key of one shard read before and after SUNIONSTOREs of a big set that take
    longer than the TTL, on the other shard with two lcores) is live for every command of
    the EXEC, against redis-server; and its shard's active expiry (every 100 ms, while
    the EXEC holds the key) does not delete it. After the EXEC it is gone."""
    n = max(2, o.lcores)
    big, dst, k = named("big", 0, n, "s"), named("dst", 0, n, "s"), named("ttl", 1 % n, n, "k")
    r = o.redis()
    cs = [Conn(o.kv.port, timeout=60), Conn(r.port, timeout=60)]
    cost = []
    for c in cs:
        c.cmd("FLUSHALL")
        for base in range(0, members, 2000):
            c.send(resp("SADD", big, *["m%d" % i for i in range(base, base + 2000)]))
        c.replies(members // 2000, 60)
        t0 = time.monotonic()
        check(c.cmd("SUNIONSTORE", dst, big) == b":%d\r\n" % members, "SUNIONSTORE")
        cost.append(time.monotonic() - t0)
    reps = min(60, int(work_s / max(1e-3, min(cost))) + 1)
    log("one SUNIONSTORE: cr-kv %.1f ms, redis %.1f ms; %d in the EXEC"
        % (cost[0] * 1e3, cost[1] * 1e3, reps))
    script = [resp("SET", k, "v", "PX", str(ttl_ms)), resp("MULTI"), resp("GET", k)]
    script += [resp("SUNIONSTORE", dst, big)] * reps
    script += [resp("GET", k), resp("EXISTS", k), resp("STRLEN", k), resp("EXEC")]
    got = []
    for c in cs:
        t0 = time.monotonic()
        c.send(b"".join(script))
        rs = c.replies(len(script), 60)
        took = time.monotonic() - t0
        check(took * 1e3 > ttl_ms + 100, "the EXEC took %.0f ms, not past the TTL" % (took * 1e3))
        time.sleep(0.05)
        rs.append(c.cmd("GET", k))  # gone now
        got.append(rs)
    exec_reply = parse_array(got[0][-2])
    check(got[0] == got[1], "cr-kv %r, redis %r" % ([x[-40:] for x in got[0][-3:]],
                                                    [x[-40:] for x in got[1][-3:]]))
    check(exec_reply[0] == b"$1\r\nv\r\n" and exec_reply[-3] == b"$1\r\nv\r\n",
          "the key was not live throughout: %r" % exec_reply[-3:])
    check(got[0][-1] == b"$-1\r\n", "the key outlived its TTL after the EXEC: %r" % got[0][-1])
    for c in cs:
        c.close()


def shutdown_tx(o, forced, members=50000, reps=40):
    """Transactions in flight when cr-kv is told to stop: one EXEC running (a read on one
    shard, then SUNIONSTOREs of a big set on the other that take about a second), EXECs
    queued behind its locks, a cross-shard MSET/MGET stream, a client in MULTI that never
    EXECs and one that WATCHes. SIGTERM (and, forced, a second one 50 ms later): cr-kv
    exits within the shutdown timeout, status 0, and (sanitizer builds) no report."""
    n = max(2, o.lcores)
    big, dst = named("big", 0, n, "s"), named("dst", 0, n, "s")
    k1 = named("k", 1 % n, n, "one")
    c = Conn(o.kv.port, timeout=60)
    for base in range(0, members, 2000):
        c.send(resp("SADD", big, *["m%d" % i for i in range(base, base + 2000)]))
    c.replies(members // 2000, 60)
    c.close()
    conns = []
    running = Conn(o.kv.port)
    running.send(resp("MULTI") + resp("GET", k1) + resp("SUNIONSTORE", dst, big) * reps +
                 resp("EXEC"))
    conns.append(running)
    for i in range(4):  # behind the running EXEC's locks, on both shards
        q = Conn(o.kv.port)
        q.send(resp("MULTI") + resp("INCR", k1) + resp("SCARD", dst) + resp("EXEC"))
        conns.append(q)
    for lc in range(o.lcores):
        m = conn_on_lcore(o.kv.port, lc)
        m.send(resp("WATCH", k1, dst) + resp("MULTI") + resp("SET", k1, "never") +
               resp("SADD", dst, "x"))  # no EXEC
        conns.append(m)
    stream = Conn(o.kv.port)
    a, b = named("sa", 0, n, "x"), named("sb", 1 % n, n, "x")
    stream.send((resp("MSET", a, "1", b, "2") + resp("MGET", a, b)) * 500)
    conns.append(stream)
    time.sleep(0.2)  # the EXEC is running, the others wait behind it
    t0 = time.monotonic()
    o.kv.proc.send_signal(signal.SIGTERM)
    if forced:
        time.sleep(0.05)
        o.kv.proc.send_signal(signal.SIGTERM)
    try:
        out, err = o.kv.proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        o.kv.proc.kill()
        o.kv.proc.communicate()
        raise Failure("cr-kv still running 20 s after SIGTERM with transactions in flight")
    took = time.monotonic() - t0
    err = err.decode(errors="replace")
    log("stopped in %.2f s (%s)" % (took, "forced" if forced else "graceful"))
    check(o.kv.proc.returncode == 0, "exit status %s: %s" % (o.kv.proc.returncode, err[-3000:]))
    check("Sanitizer" not in err and "runtime error" not in err, "sanitizer: %s" % err[-3000:])
    check(took < 12, "stopping took %.1f s" % took)
    for x in conns:
        x.close()


def t_shutdown_tx(o):
    shutdown_tx(o, False)


def t_shutdown_tx_forced(o):
    shutdown_tx(o, True)


def t_multi_random(o, count=4000):
    """kv_test.py's seeded random stream of every type's commands (keys of both shards
    mixed), cut into MULTI/EXEC blocks of 1-12 commands, pipelined against cr-kv and
    redis-server: every +QUEUED, and every reply inside each EXEC's array, identical
    (compared as kv_test compares them: multisets where the order is the table's)."""
    rnd = random.Random(SEED)
    stream = kv_test.random_stream(SEED, count)
    a, b = Conn(o.kv.port, timeout=60), Conn(o.redis().port, timeout=60)
    for c in (a, b):
        check(c.cmd("FLUSHALL") == b"+OK\r\n", "FLUSHALL")
    bad, i = [], 0
    while i < len(stream) and len(bad) < 5:
        blocks = []
        while i < len(stream) and len(blocks) < 40:
            n = rnd.randint(1, 12)
            blocks.append(stream[i:i + n])
            i += n
        data = b"".join(resp("MULTI") + b"".join(resp(*args) for args, _ in blk) + resp("EXEC")
                        for blk in blocks)
        a.send(data)
        b.send(data)
        nrep = sum(len(blk) + 2 for blk in blocks)
        ra, rb = a.replies(nrep, 60), b.replies(nrep, 60)
        at = 0
        for blk in blocks:
            xa, xb = ra[at:at + len(blk) + 2], rb[at:at + len(blk) + 2]
            at += len(blk) + 2
            if xa[:-1] != xb[:-1]:
                bad.append("MULTI/queueing of %r: cr-kv %r, redis %r" % (blk, xa[:-1], xb[:-1]))
                continue
            if xa[-1][:1] != b"*" or xb[-1][:1] != b"*":
                if xa[-1] != xb[-1]:
                    bad.append("EXEC of %r: cr-kv %r, redis %r" % (blk, xa[-1][:150], xb[-1][:150]))
                continue
            for (args, mode), x, y in zip(blk, parse_array(xa[-1]), parse_array(xb[-1])):
                if not kv_test.compare(mode, x, y):
                    bad.append("%r in EXEC: cr-kv %r, redis %r" % (args, x[:150], y[:150]))
    check(not bad, "%d replies differ (seed %d):\n  " % (len(bad), SEED) + "\n  ".join(bad[:5]))
    log("%d commands in MULTI/EXEC blocks, identical replies" % count)
    a.close()
    b.close()


def t_watch_race(o, rounds=300):
    """Two clients WATCH and GET the same counter, then both MULTI/INCR/EXEC at once:
    exactly one EXEC applies each round (the other answers nil), as in Redis; the key on
    either shard, the clients on both lcores."""
    n = max(2, o.lcores)
    keys = [named("wr", s % n, n, "") for s in range(2)]
    cs = readers(o) if o.lcores == 2 else [Conn(o.kv.port), Conn(o.kv.port)]
    barrier = threading.Barrier(2, timeout=30)
    wins, errors = [[], []], []
    setup = Conn(o.kv.port)
    for k in keys:
        setup.cmd("SET", k, "0")

    def run(who):
        c = cs[who]
        try:
            for i in range(rounds):
                k = keys[i % 2]
                check(c.cmd("WATCH", k) == b"+OK\r\n", "WATCH")
                c.cmd("GET", k)
                barrier.wait()
                c.send(resp("MULTI") + resp("INCR", k) + resp("EXEC"))
                r = c.replies(3, 30)
                check(r[:2] == [b"+OK\r\n", b"+QUEUED\r\n"], "MULTI/INCR: %r" % r)
                wins[who].append(r[2] != b"*-1\r\n")
                barrier.wait()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
            barrier.abort()

    ts = [threading.Thread(target=run, args=(w,)) for w in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    check(not errors, "clients failed: %r" % errors[:3])
    both = [i for i in range(rounds) if wins[0][i] and wins[1][i]]
    neither = [i for i in range(rounds) if not wins[0][i] and not wins[1][i]]
    total = sum(int(setup.cmd("GET", k)[4:-2]) for k in keys)
    log("round winners: %d by client 0, %d by client 1" % (sum(wins[0]), sum(wins[1])))
    check(not both, "%d rounds where both EXECs applied, e.g. %r" % (len(both), both[:5]))
    check(not neither, "%d rounds where neither EXEC applied, e.g. %r" % (len(neither), neither[:5]))
    check(total == rounds, "the counters add up to %d after %d rounds" % (total, rounds))


def t_transfer(o, seconds=20.0):
    """Seeded transfers between 8 counters on both shards, each a MULTI/DECRBY/INCRBY/EXEC
    (and, for one client, a WATCH/GET/MULTI/SET/SET/EXEC check-and-set retried on nil),
    while a reader MGETs every counter: the sum is always the same, and at the end every
    counter holds its start plus exactly the transfers that applied."""
    n = max(2, o.lcores)
    seed = SEED
    ks = [named("acct", i % n, n, str(i)) for i in range(8)]
    c = Conn(o.kv.port)
    c.cmd("MSET", *sum(([k, "1000"] for k in ks), []))
    deltas = [dict((k, 0) for k in ks) for _ in range(3)]
    done, errors, sums, reads = threading.Event(), [], set(), [0]

    def plain(w, count):
        rng = random.Random(seed * 10 + w)
        try:
            wc = Conn(o.kv.port, timeout=30)
            for _ in range(count):
                a, b = rng.sample(ks, 2)
                amt = rng.randint(1, 50)
                wc.send(resp("MULTI") + resp("DECRBY", a, amt) + resp("INCRBY", b, amt) + resp("EXEC"))
                r = wc.replies(4, 30)
                check(r[3][:2] == b"*2", "EXEC: %r" % r)
                deltas[w][a] -= amt
                deltas[w][b] += amt
            wc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def cas(w, count):
        rng = random.Random(seed * 10 + w)
        try:
            wc = Conn(o.kv.port, timeout=30)
            for _ in range(count):
                a, b = rng.sample(ks, 2)
                amt = rng.randint(1, 50)
                for _try in range(1000):
                    wc.cmd("WATCH", a, b)
                    va, vb = (int(x[x.index(b"\r\n") + 2:-2]) for x in parse_array(wc.cmd("MGET", a, b)))
                    wc.send(resp("MULTI") + resp("SET", a, va - amt) + resp("SET", b, vb + amt)
                            + resp("EXEC"))
                    if wc.replies(4, 30)[3] != b"*-1\r\n":
                        break
                else:
                    raise Failure("a check-and-set never applied in 1000 tries")
                deltas[w][a] -= amt
                deltas[w][b] += amt
            wc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def read():
        try:
            rc = Conn(o.kv.port, timeout=30)
            deadline = time.monotonic() + seconds
            while not done.is_set() and time.monotonic() < deadline:
                vals = parse_array(rc.cmd("MGET", *ks))
                sums.add(sum(int(v[v.index(b"\r\n") + 2:-2]) for v in vals))
                reads[0] += 1
            rc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ws = [threading.Thread(target=plain, args=(0, 600)), threading.Thread(target=plain, args=(1, 600)),
          threading.Thread(target=cas, args=(2, 300))]
    rt = threading.Thread(target=read)
    for t in ws + [rt]:
        t.start()
    for t in ws:
        t.join(seconds + 60)
    done.set()
    rt.join(30)
    check(not errors, "clients failed: %r" % errors[:3])
    final = [int(v[v.index(b"\r\n") + 2:-2]) for v in parse_array(c.cmd("MGET", *ks))]
    want = [1000 + sum(d[k] for d in deltas) for k in ks]
    log("seed %d: %d MGETs, sums seen %r" % (seed, reads[0], sorted(sums)))
    check(sums == {8000}, "the MGET sum changed: %r" % sorted(sums))
    check(final == want, "counters %r, expected %r" % (final, want))


def t_redis_py(o):
    """redis-py's transactions: pipeline(transaction=True), and WATCH with retries
    (Redis.transaction) over keys of both shards."""
    try:
        import redis
    except ImportError:
        # python3-redis is a Debian package: reachable from another python3 too.
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import redis
        except ImportError:
            log("SKIP: python3-redis not installed")
            sys.exit(kv_test.SKIP)
    n = max(2, o.lcores)
    a, b = named("py", 0, n, "a"), named("py", 1 % n, n, "b")
    r = redis.Redis(port=o.kv.port, socket_timeout=10)
    with r.pipeline(transaction=True) as p:
        p.set(a, 10).set(b, 20).incrby(a, 5).mget(a, b)
        check(p.execute() == [True, True, 15, [b"15", b"20"]], "pipeline(transaction=True)")

    def move(pipe):
        va, vb = int(pipe.get(a)), int(pipe.get(b))
        pipe.multi()
        pipe.set(a, va - 1)
        pipe.set(b, vb + 1)
    check(r.transaction(move, a, b) == [True, True], "transaction()")
    check(r.mget(a, b) == [b"14", b"21"], "after transaction()")
    with r.pipeline() as p:
        p.watch(a)
        r.set(a, "other")  # another connection modifies it
        p.multi()
        p.set(a, "mine")
        try:
            p.execute()
            raise Failure("EXEC after a modified WATCH applied")
        except redis.WatchError:
            pass
    check(r.get(a) == b"other", "the watched key kept the other client's value")
    try:
        with r.pipeline(transaction=True) as p:
            p.set(a, 1).execute_command("NOSUCHCMD").execute()
        raise Failure("EXECABORT not raised")
    except redis.ResponseError as e:
        check("EXECABORT" in str(e) or "unknown command" in str(e), "error: %s" % e)
    r.close()


TESTS = {
    "keys_atomic": t_keys_atomic,
    "dbsize_atomic": t_dbsize_atomic,
    "multi_oracle": t_multi_oracle,
    "exec_order": t_exec_order,
    "exec_time": t_exec_time,
    "shutdown_tx": t_shutdown_tx,
    "shutdown_tx_forced": t_shutdown_tx_forced,
    "multi_random": t_multi_random,
    "watch_race": t_watch_race,
    "transfer": t_transfer,
    "redis_py": t_redis_py,
}


SEED = 18  # --seed N (transfer's streams)


def main():
    global SEED
    if "--seed" in sys.argv[:-1]:
        SEED = int(sys.argv[sys.argv.index("--seed") + 1])
    return kv_test.main(TESTS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
