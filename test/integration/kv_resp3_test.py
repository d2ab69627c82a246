#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""RESP3 in app/cr-kv (HELLO 3) against redis-server 7.0 as the oracle: the same commands
sent to both after HELLO 3, the reply bytes compared, on loopback.

  kv_resp3_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

  replies   every type's commands after HELLO 3 (nulls "_", maps, sets, doubles, score
            pairs, verbatim strings, FUNCTION STATS, EVAL...), one by one and pipelined, from a
            client on each lcore with the keys on each shard (run at once and as parts).
  exec      MULTI/EXEC whose commands answer maps, sets, doubles and nulls, keys on both
            shards; a WATCHed key changed: EXEC's null is "_".
  pubsub    a RESP3 subscriber gets push frames (">") for its (un)subscriptions and for
            messages published from every lcore; it may run any command meanwhile (PING
            "+PONG", GET); a RESP2 subscriber on the same channel still gets arrays.
  hello     HELLO's forms and errors, HELLO 3 AUTH / SETNAME with --requirepass, HELLO 2
            back to RESP2, RESET back to RESP2 (unnamed, unauthenticated, unsubscribed).
  rediscli  redis-cli -3 prints cr-kv's replies as it prints redis-server's.

Exits 0 (pass), 1 (fail), 77 (skip: no redis-server / redis-cli).
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import Conn, check, conn_on_lcore, log, on_shard, resp  # noqa: E402

PASS = "s3cr3t-pw"


# ---- RESP3 values, to compare replies whose order Redis does not define ----

def parse3(b, i=0):
    """(value, end) of the reply at b[i]: tuples tagged by the type byte."""
    nl = b.index(b"\r\n", i)
    t, line = b[i:i + 1], b[i + 1:nl]
    if t in (b"+", b"-", b",", b"#", b"("):
        return (t, line), nl + 2
    if t == b":":
        return (t, int(line)), nl + 2
    if t == b"_":
        return (t,), nl + 2
    n = int(line)
    if t in (b"$", b"=", b"!"):
        if n < 0:
            return (t, None), nl + 2
        return (t, b[nl + 2:nl + 2 + n]), nl + 4 + n
    j, items = nl + 2, []
    for _ in range(max(n, 0) * (2 if t == b"%" else 1)):
        v, j = parse3(b, j)
        items.append(v)
    if t == b"%":
        items = list(zip(items[0::2], items[1::2]))
    return (t, items if n >= 0 else None), j


def canon(v):
    """@v with the elements of sets and maps sorted (Redis's order is its hash table's)."""
    if v[0] in (b"~", b"%") and v[1] is not None:
        return (v[0], sorted(canon(x) if v[0] == b"~" else (canon(x[0]), canon(x[1]))
                             for x in v[1]))
    if v[0] in (b"*", b">") and v[1] is not None:
        return (v[0], [canon(x) for x in v[1]])
    return v


def same(mode, x, y):
    if mode == "exact":
        return x == y
    a, b = canon(parse3(x)[0]), canon(parse3(y)[0])
    if mode == "unordered" and a[0] == b"*" and b[0] == b"*":  # an array in any order
        return a[0] == b[0] and sorted(a[1]) == sorted(b[1])
    return a == b  # "set": sets and maps in any order


def mask_id(b):
    """HELLO's reply without its client id (each server numbers its own)."""
    return re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"$2\r\nid\r\n:ID\r\n", b)


class Both:
    """One client of cr-kv (on lcore @lc) and one of redis-server, sent the same."""

    def __init__(self, o, r, lc=0, hello=True):
        self.a, self.b = conn_on_lcore(o.kv.port, lc % o.lcores), Conn(r.port)
        self.bad = []
        if hello:
            x, y = self.a.cmd("HELLO", "3"), self.b.cmd("HELLO", "3")
            check(mask_id(x) == mask_id(y), "HELLO 3: cr-kv %r, redis %r" % (x, y))

    def same(self, *args, mode="exact"):
        x, y = self.a.cmd(*args), self.b.cmd(*args)
        if not same(mode, x, y):
            self.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
        return x

    def close(self):
        self.a.close()
        self.b.close()


def done(clients, what):
    bad = sum((c.bad for c in clients), [])
    check(not bad, "%s: %d differences:\n  %s" % (what, len(bad), "\n  ".join(bad[:20])))
    for c in clients:
        c.close()


# ---- replies ----

def script(tag):
    """(args, mode): keys with hash tag @tag (so on one chosen shard)."""
    k = lambda name: "%s{%s}" % (name, tag)  # noqa: E731
    s, h, st, z, l, n = k("s"), k("h"), k("st"), k("z"), k("l"), k("nokey")
    c = []

    def a(*args, mode="exact"):
        c.append((args, mode))

    a("FLUSHALL")
    a("GET", n); a("SET", s, "1"); a("GET", s); a("INCRBYFLOAT", s, "1.5"); a("MGET", s, n)
    a("GETDEL", n); a("GETEX", n); a("SET", s, "v", "GET"); a("SET", n, "v", "NX", "GET")
    a("DEL", n); a("TYPE", s); a("EXISTS", s, n); a("TTL", n); a("OBJECT", "ENCODING", n)
    a("ECHO", "x"); a("PING"); a("PING", "x")
    # hashes: a map, doubles stay bulk strings, pairs
    a("HSET", h, "a", "1"); a("HGETALL", h); a("HGETALL", n); a("HINCRBYFLOAT", h, "a", "1.5")
    a("HMGET", h, "a", "zz"); a("HGET", h, "zz"); a("HRANDFIELD", h, "1", "WITHVALUES")
    a("HRANDFIELD", h, "-2", "WITHVALUES"); a("HRANDFIELD", n, "2", "WITHVALUES")
    a("HRANDFIELD", h); a("HRANDFIELD", n); a("HRANDFIELD", h, "2")
    a("HSET", h, "b", "2", "c", "3"); a("HGETALL", h, mode="set"); a("HSCAN", h, "0", mode="set")
    a("HKEYS", h, mode="unordered"); a("HVALS", h, mode="unordered")
    # sets
    a("SADD", st, "a"); a("SMEMBERS", st); a("SMEMBERS", n); a("SINTER", st); a("SINTER", st, n)
    a("SUNION", st, n); a("SDIFF", st, n); a("SDIFF", n, st); a("SPOP", n, "1"); a("SPOP", n)
    a("SRANDMEMBER", st, "1"); a("SRANDMEMBER", n, "2"); a("SRANDMEMBER", n)
    a("SADD", st, "b", "c"); a("SMEMBERS", st, mode="set"); a("SUNION", st, mode="set")
    a("SMISMEMBER", st, "a", "z"); a("SISMEMBER", st, "a"); a("SINTERCARD", "1", st)
    a("SPOP", st, "3", mode="set"); a("SADD", st, "1", "2"); a("SMEMBERS", st, mode="set")
    # sorted sets: doubles, score pairs
    a("ZADD", z, "1", "a", "2.5", "b"); a("ZADD", z, "INCR", "1", "a")
    a("ZADD", z, "NX", "INCR", "1", "a"); a("ZADD", z, "XX", "INCR", "1", "nope")
    a("ZSCORE", z, "a"); a("ZSCORE", z, "nope"); a("ZSCORE", n, "a"); a("ZMSCORE", z, "a", "nope")
    a("ZMSCORE", n, "a"); a("ZINCRBY", z, "1", "a"); a("ZRANGE", z, "0", "-1", "WITHSCORES")
    a("ZRANGE", z, "0", "-1"); a("ZRANGE", z, "0", "-1", "withscores")
    a("ZRANGE", z, "(1", "+inf", "BYSCORE", "WITHSCORES")
    a("ZRANGEBYSCORE", z, "-inf", "+inf", "WITHSCORES")
    a("ZREVRANGEBYSCORE", z, "+inf", "-inf", "WITHSCORES", "LIMIT", "0", "1")
    a("ZREVRANGE", z, "0", "-1", "WITHSCORES"); a("ZRANGE", n, "0", "-1", "WITHSCORES")
    a("ZRANDMEMBER", z, "5", "WITHSCORES", mode="unordered"); a("ZRANDMEMBER", n, "2", "WITHSCORES")
    a("ZSCAN", z, "0", mode="exact"); a("ZUNION", "1", z, "WITHSCORES")
    a("ZINTER", "1", z, "WITHSCORES"); a("ZDIFF", "1", z, "WITHSCORES")
    a("ZUNION", "2", z, k("withscores")); a("ZUNION", "1", z, "WEIGHTS", "2", "WITHSCORES")
    a("ZPOPMIN", z); a("ZADD", z, "1", "a", "2", "b", "3", "c"); a("ZPOPMIN", z, "2")
    a("ZPOPMAX", z, "1"); a("ZPOPMIN", n); a("ZPOPMIN", n, "2"); a("ZMPOP", "1", n, "MIN")
    a("ZADD", z, "1", "a", "2", "b", "3", "c"); a("ZMPOP", "1", z, "MIN")
    a("ZMPOP", "1", z, "MAX", "COUNT", "2"); a("ZADD", z, "1", "a"); a("BZPOPMIN", z, "0.01")
    a("BZPOPMIN", n, "0.01"); a("ZADD", z, "1", "a", "2", "b"); a("BZMPOP", "0.01", "1", z, "MIN")
    a("BZMPOP", "0.01", "1", n, "MIN"); a("BZPOPMAX", z, "0.01")
    a("ZADD", z, "1e300", "big", "-inf", "ninf", "0.1", "tenth", "inf", "pinf")
    a("ZSCORE", z, "ninf"); a("ZSCORE", z, "pinf"); a("ZSCORE", z, "tenth"); a("ZSCORE", z, "big")
    a("ZRANGE", z, "0", "-1", "WITHSCORES"); a("ZRANK", z, "nope"); a("ZREVRANK", z, "big")
    a("ZRANGESTORE", k("dst"), z, "0", "-1"); a("ZCARD", k("dst"))
    # lists, blocking timeouts
    a("LPUSH", l, "a"); a("BLPOP", n, "0.01"); a("BRPOP", n, "0.01"); a("LPOP", n)
    a("LPOP", n, "2"); a("LPOS", l, "x"); a("LPOS", l, "a", "COUNT", "0"); a("LINDEX", l, "5")
    a("LMPOP", "1", n, "LEFT"); a("BLMPOP", "0.01", "1", n, "LEFT"); a("BLMOVE", n, l, "LEFT",
                                                                          "LEFT", "0.01")
    a("RPOPLPUSH", n, l); a("LRANGE", l, "0", "-1")
    # scripts (RESP2 inside, as Redis 7.0's by default): the reply's nulls become "_"
    a("EVAL", "return redis.call('HGETALL', KEYS[1])", "1", h); a("EVAL", "return nil", "0")
    a("EVAL", "return false", "0"); a("EVAL", "return {1, 'a', false}", "0")
    a("EVAL", "return redis.call('GET', KEYS[1])", "1", n); a("EVAL", "return 3.7", "0")
    # server
    a("CONFIG", "GET", "maxclients"); a("CONFIG", "GET", "no-such-param")
    a("CONFIG", "GET", "maxmemory", "maxclients", mode="set")
    a("CLIENT", "GETNAME"); a("CLIENT", "SETNAME", "x"); a("CLIENT", "GETNAME")
    a("COMMAND", "INFO", "no-such-command"); a("COMMAND", "DOCS", "no-such-command")
    a("FUNCTION", "LIST"); a("FUNCTION", "STATS"); a("FUNCTION", "DUMP"); a("FUNCTION", "FLUSH")
    a("KEYS", s); a("DBSIZE"); a("SELECT", "0"); a("TIME", mode="type")
    a("RANDOMKEY", mode="type"); a("FLUSHALL"); a("RANDOMKEY"); a("SCAN", "0")
    return [(args, m if m != "type" else "type") for args, m in c]


def compare_type(x, y):
    return x[:1] == y[:1]


def run(o, r, lc, tag, pipelined):
    c = Both(o, r, lc)
    sc = script(tag)
    if pipelined:
        data = b"".join(resp(*args) for args, _ in sc)
        c.a.send(data)
        c.b.send(data)
        ra, rb = c.a.replies(len(sc), 30), c.b.replies(len(sc), 30)
    else:
        ra, rb = [], []
        for args, _ in sc:
            ra.append(c.a.cmd(*args))
            rb.append(c.b.cmd(*args))
    for (args, mode), x, y in zip(sc, ra, rb):
        ok = compare_type(x, y) if mode == "type" else same(mode, x, y)
        if not ok:
            c.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
    done([c], "replies from lcore %d, keys on shard %s%s" % (
        lc, tag, ", pipelined" if pipelined else ""))
    return len(sc)


def t_replies(o):
    r = o.redis()
    n = 0
    for lc in range(o.lcores):
        for shard in range(o.lcores):
            tag = on_shard("t", shard, o.lcores) if o.lcores > 1 else "t"
            for pipelined in (False, True):
                n += run(o, r, lc, tag, pipelined)
    log("replies: %d commands in RESP3 as redis-server's" % n)


# ---- exec ----

def t_exec(o):
    r = o.redis()
    ta = on_shard("t", 0, o.lcores) if o.lcores > 1 else "a"
    tb = on_shard("t", o.lcores - 1, o.lcores) if o.lcores > 1 else "b"
    c = Both(o, r, o.lcores - 1)
    for args in (("FLUSHALL",), ("HSET", "h{%s}" % ta, "f", "v"), ("SADD", "s{%s}" % tb, "m"),
                 ("ZADD", "z{%s}" % tb, "1.5", "a", "2", "b"), ("SET", "k{%s}" % ta, "1"),
                 ("MULTI",), ("GET", "nokey{%s}" % tb), ("HGETALL", "h{%s}" % ta),
                 ("SMEMBERS", "s{%s}" % tb), ("ZSCORE", "z{%s}" % tb, "a"),
                 ("ZRANGE", "z{%s}" % tb, "0", "-1", "WITHSCORES"), ("ZPOPMIN", "z{%s}" % tb),
                 ("MGET", "k{%s}" % ta, "nokey{%s}" % tb), ("SUNION", "s{%s}" % tb, "x{%s}" % ta),
                 ("CONFIG", "GET", "maxclients"), ("PING",), ("EXEC",)):
        c.same(*args)
    # A WATCHed key written by another client: the EXEC answers RESP3's null.
    w = Both(o, r, 0, hello=False)
    c.same("WATCH", "k{%s}" % ta)
    w.same("SET", "k{%s}" % ta, "2")
    for args in (("MULTI",), ("GET", "k{%s}" % ta), ("EXEC",), ("EXEC",)):
        c.same(*args)
    done([c, w], "exec")
    log("exec: EXEC's replies in RESP3 as redis-server's (%d lcores)" % o.lcores)


# ---- pubsub ----

def t_pubsub(o):
    r = o.redis()
    subs = [Both(o, r, lc) for lc in range(o.lcores)]
    old = Both(o, r, 0, hello=False)  # a RESP2 subscriber
    pubs = [Both(o, r, lc, hello=False) for lc in range(o.lcores)]
    for s in subs:
        s.same("SUBSCRIBE", "ch")
        s.same("PSUBSCRIBE", "c*")
        s.same("PING")
        s.same("PING", "x")
        s.same("GET", "nokey")  # RESP3: any command while subscribed
        s.same("CLIENT", "GETNAME")
    old.same("SUBSCRIBE", "ch")
    for i, p in enumerate(pubs):
        x, y = p.a.cmd("PUBLISH", "ch", "m%d" % i), p.b.cmd("PUBLISH", "ch", "m%d" % i)
        check(x == y, "PUBLISH: cr-kv %r, redis %r" % (x, y))
        for s in subs:
            got = s.a.replies(2, 10), s.b.replies(2, 10)
            got = [sorted(g) for g in got]  # message and pmessage: both, in either order
            check(got[0] == got[1], "pushes: cr-kv %r, redis %r" % tuple(got))
        x, y = old.a.replies(1, 10), old.b.replies(1, 10)
        check(x == y and x[0].startswith(b"*3\r\n"), "RESP2 message: %r, redis %r" % (x, y))
    for s in subs:  # a publisher subscribed to the channel: its message, then the count
        s.a.send(resp("PUBLISH", "ch", "self") + resp("PING"))
        s.b.send(resp("PUBLISH", "ch", "self") + resp("PING"))
        x, y = s.a.replies(4, 10), s.b.replies(4, 10)
        if x[0:2] != y[0:2]:  # message and pmessage in either order, as above
            x[0:2], y[0:2] = sorted(x[0:2]), sorted(y[0:2])
        check(x == y, "PUBLISH to itself: cr-kv %r, redis %r" % (x, y))
        for s2 in subs:  # the other subscribers got it too
            if s2 is not s:
                got = sorted(s2.a.replies(2, 10)), sorted(s2.b.replies(2, 10))
                check(got[0] == got[1], "pushes: cr-kv %r, redis %r" % got)
        check(old.a.replies(1, 10) == old.b.replies(1, 10), "RESP2 message")
    for s in subs:
        s.same("UNSUBSCRIBE", "ch")
        s.same("PUNSUBSCRIBE")
        s.same("UNSUBSCRIBE")
        s.same("PUNSUBSCRIBE", "x")
    done(subs + [old] + pubs, "pubsub")
    log("pubsub: push frames from %d lcore(s) as redis-server's" % o.lcores)


# ---- hello ----

def t_hello(o):
    r = o.redis()
    c = Both(o, r, o.lcores - 1, hello=False)
    for args in (("HELLO",), ("HELLO", "3"), ("HELLO",), ("GET", "nokey"), ("HELLO", "2"),
                 ("GET", "nokey"), ("HELLO", "4"), ("HELLO", "1"), ("HELLO", "x"),
                 ("HELLO", "3", "FOO"), ("HELLO", "3", "SETNAME", "a b"),
                 ("HELLO", "3", "AUTH", "default"), ("HELLO", "3", "SETNAME", "n1"),
                 ("CLIENT", "GETNAME"), ("HELLO", "3", "AUTH", "default", "any"),
                 ("HGETALL", "nokey"), ("RESET",), ("GET", "nokey"), ("CLIENT", "GETNAME"),
                 ("HELLO", "3"), ("SUBSCRIBE", "ch"), ("RESET",), ("PUBSUB", "NUMSUB", "ch"),
                 ("MULTI",), ("HELLO", "3"), ("RESET",), ("EXEC",)):
        x, y = c.a.cmd(*args), c.b.cmd(*args)
        if mask_id(x) != mask_id(y):
            c.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
    done([c], "hello")
    o.restart(("--requirepass", PASS))
    r = o.redis(("--requirepass", PASS))
    cs = [Both(o, r, lc, hello=False) for lc in range(o.lcores)]
    for c in cs:
        for args in (("HELLO", "3"), ("HELLO", "3", "AUTH", "default", "wrong"),
                     ("HELLO", "3", "AUTH", "default", PASS, "SETNAME", "me"),
                     ("CLIENT", "GETNAME"), ("ZSCORE", "nokey", "a"), ("RESET",),
                     ("GET", "k"), ("CLIENT", "GETNAME"), ("HELLO", "2", "AUTH", PASS),
                     ("HELLO", "2", "AUTH", "default", PASS), ("GET", "k")):
            x, y = c.a.cmd(*args), c.b.cmd(*args)
            if mask_id(x) != mask_id(y):
                c.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
    done(cs, "hello with a password")
    log("hello: HELLO, RESET and AUTH in RESP3 as redis-server's")


# ---- cli ----

def t_cli(o):
    kv_test.need("redis-cli")
    r = o.redis()
    cmds = [["HSET", "h", "f", "v"], ["HGETALL", "h"], ["SADD", "s", "m"], ["SMEMBERS", "s"],
            ["ZADD", "z", "1.5", "a"], ["ZSCORE", "z", "a"], ["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            ["GET", "nokey"], ["CONFIG", "GET", "maxclients"], ["ZPOPMIN", "z"],
            ["FUNCTION", "STATS"], ["HELLO", "3"]]
    bad = []
    for cmd in cmds:
        outs = []
        for port in (o.kv.port, r.port):
            p = subprocess.run(["redis-cli", "-3", "-p", str(port)] + cmd, capture_output=True,
                               timeout=10)
            outs.append(p.stdout)
        if cmd[0] == "HELLO":
            outs = [re.sub(rb"\nid \d+\n", b"\nid ID\n", x) for x in outs]
        if outs[0] != outs[1]:
            bad.append("%r: cr-kv %r, redis %r" % (cmd, outs[0], outs[1]))
    check(not bad, "redis-cli -3: %d differences:\n  %s" % (len(bad), "\n  ".join(bad)))
    log("cli: redis-cli -3 prints %d replies as redis-server's" % len(cmds))


TESTS = {"replies": t_replies, "exec": t_exec, "pubsub": t_pubsub, "hello": t_hello,
         "rediscli": t_cli}

if __name__ == "__main__":
    sys.exit(kv_test.main(TESTS, __doc__))
