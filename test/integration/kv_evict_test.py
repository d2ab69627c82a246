#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-kv's --maxmemory eviction against redis-server 7.0 as the oracle, on loopback.

  kv_evict_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll] [--seed N]

Where both servers must hold "the same" data under a limit, each one's bytes per key are
measured first (calibrate()) and its maxmemory set to its own empty used_memory plus the
same number of keys: the two then hold about as many keys, whatever each one's overhead.

oracle: CONFIG GET / SET of maxmemory, maxmemory-policy, maxmemory-samples,
  maxmemory-eviction-tenacity, lfu-log-factor, lfu-decay-time (defaults, every bad value's
  error text, policy names in any case), INFO's maxmemory fields, OBJECT FREQ and
  IDLETIME under each kind of policy (their errors), noeviction's and a volatile policy's
  -OOM with no TTL key (the exact text; reads and DEL still served), CONFIG RESETSTAT of
  evicted_keys: byte for byte as redis-server's.
hot (allkeys-lru, allkeys-lfu, allkeys-random): a cache workload of 160 steps paced at
  20/s (cold keys written at 1,000/s into room for 3,000 keys, a hot set of 300 read at
  random, a miss writes the key back),
  the same operations sent to both servers: the hot set's hit rate is within 3 points of
  redis-server's (random: 5), and used_memory stays under maxmemory + 64 KiB (one batch).
volatile (volatile-lru, -lfu, -random, -ttl): keys without a TTL are never evicted, keys
  with one are, counted exactly (evicted + present = written); the first refused write
  comes once no key has a TTL (never while one is left on the other shard), with
  Redis's -OOM text, as redis-server.
ttl: volatile-ttl evicts the nearest expiry first: the survivors' TTLs are in the upper
  half at least as often as redis-server's (minus 5 points), and at least 80 % of them.
lfu: OBJECT FREQ under allkeys-lfu after 0, 1, 2, 5, 10, 100 and 1000 reads of 40 keys
  each: the first values are exact (5 and 6); for both servers every value is one Redis's
  counter reaches with probability over 1e-6 and the mean is within 4 standard errors of
  its exact mean (the counter's distribution computed here from Redis's algorithm).
runtime: noeviction refuses, CONFIG SET maxmemory-policy allkeys-lru then lets writes in
  (keys evicted); CONFIG SET maxmemory lower evicts down to it within 1 s; CONFIG SET
  maxmemory 0 stops eviction: as redis-server.
watch: a WATCHed key that is evicted makes the EXEC fail (nil), as redis-server.
rss: --maxmemory 32mb allkeys-lru, 10 times that written (strings, hashes, lists and sets,
  big ones freed lazily): used_memory ends under maxmemory + 64 KiB and the process's RSS
  grows by less than maxmemory x 1.5 + 24 MB over the empty server's.
stress: 4 clients (both lcores), seeded, write 40,000 unique keys (strings and hashes of
  values derived from the key) under a 2 MiB limit, pipelined and interleaved, a reader
  among them: every key whose write was answered +OK is at the end either readable with
  its exact value or gone, and the keys gone equal INFO's evicted_keys exactly; under
  allkeys-random no write is refused; under volatile-lru (half the strings with a TTL)
  only keys with a TTL are gone and the writes refused (-OOM) are counted out.
Exits 0 (pass), 1 (fail), 77 (skip: no redis-server).
"""
import os
import random
import sys
import time

import kv_test
from kv_test import Conn, check, info_field, log, proc_rss, resp

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
BATCH_SLACK = 64 * 1024


def pipe(c, cmds, timeout=60):
    """Send @cmds pipelined; return the replies."""
    out = []
    for i in range(0, len(cmds), 500):
        chunk = cmds[i:i + 500]
        c.send(b"".join(resp(*x) for x in chunk))
        out += c.replies(len(chunk), timeout)
    return out


def used(c):
    return int(info_field(c, "memory", "used_memory"))


def evicted(c):
    return int(info_field(c, "stats", "evicted_keys"))


def settle(c):
    """Wait until nothing waits to be freed lazily."""
    deadline = time.monotonic() + 30
    while info_field(c, "memory", "lazyfree_pending_objects") != "0":
        check(time.monotonic() < deadline, "lazy free never finished")
        time.sleep(0.02)


def calibrate(c, value, n=3000):
    """(empty used_memory, bytes per key of SET cal:i @value) of the server at @c."""
    check(c.cmd("FLUSHALL") == b"+OK\r\n", "FLUSHALL")
    settle(c)
    time.sleep(0.15)
    u0 = used(c)
    for r in pipe(c, [("SET", "cal:%d" % i, value) for i in range(n)]):
        check(r == b"+OK\r\n", "calibration SET: %r" % r)
    u1 = used(c)
    check(c.cmd("FLUSHALL") == b"+OK\r\n", "FLUSHALL")
    settle(c)
    time.sleep(0.15)
    return used(c), (u1 - u0) / n


class Both:
    """A connection to cr-kv and one to redis-server, sent the same commands."""

    def __init__(self, o, kv_extra=()):
        if kv_extra:
            o.restart(kv_extra)
        self.r = o.redis()
        self.ours, self.theirs = Conn(o.kv.port, 60), Conn(self.r.port, 60)
        self.o = o

    def both(self, *args):
        return self.ours.cmd(*args), self.theirs.cmd(*args)

    def same(self, *args):
        a, b = self.both(*args)
        check(a == b, "%r: cr-kv %r, redis %r" % (args[:4], a[:300], b[:300]))
        return a

    def limit(self, policy, keys, value):
        """Both servers hold about @keys keys of SET @value under @policy."""
        got = []
        for c in (self.ours, self.theirs):
            check(c.cmd("CONFIG", "SET", "maxmemory", "0") == b"+OK\r\n", "maxmemory 0")
            base, per = calibrate(c, value)
            mx = int(base + keys * per)
            check(c.cmd("CONFIG", "SET", "maxmemory-policy", policy) == b"+OK\r\n", policy)
            check(c.cmd("CONFIG", "SET", "maxmemory", str(mx)) == b"+OK\r\n", "maxmemory")
            check(c.cmd("CONFIG", "RESETSTAT") == b"+OK\r\n", "RESETSTAT")  # evicted_keys 0
            got.append((mx, per))
        log("%s: %d keys: cr-kv maxmemory %d (%.0f B/key), redis %d (%.0f B/key)"
            % (policy, keys, got[0][0], got[0][1], got[1][0], got[1][1]))
        return got[0][0]

    def close(self):
        self.ours.close()
        self.theirs.close()


# ---- oracle ----

PARAMS = ("maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity",
          "lfu-log-factor", "lfu-decay-time")


def t_oracle(o):
    b = Both(o)
    for p in PARAMS:
        b.same("CONFIG", "GET", p)
    for p, bad in (("maxmemory", "x"), ("maxmemory", "-1"), ("maxmemory", "1zb"),
                   ("maxmemory-policy", "foo"), ("maxmemory-policy", ""),
                   ("maxmemory-samples", "0"), ("maxmemory-samples", "x"),
                   ("maxmemory-samples", "2147483648"), ("maxmemory-eviction-tenacity", "101"),
                   ("maxmemory-eviction-tenacity", "-1"), ("lfu-log-factor", "-1"),
                   ("lfu-log-factor", "1.5"), ("lfu-decay-time", "x"),
                   ("lfu-decay-time", "-5")):
        b.same("CONFIG", "SET", p, bad)
    for p, good in (("maxmemory-samples", "10"), ("maxmemory-eviction-tenacity", "0"),
                    ("lfu-log-factor", "0"), ("lfu-decay-time", "0"), ("maxmemory", "100mb"),
                    ("maxmemory-policy", "ALLKEYS-LRU"), ("maxmemory-policy", "volatile-ttl")):
        b.same("CONFIG", "SET", p, good)
        b.same("CONFIG", "GET", p)
    b.same("CONFIG", "SET", "maxmemory-samples", "5", "maxmemory-policy", "bad")  # none applied
    b.same("CONFIG", "GET", "maxmemory-samples")
    b.same("CONFIG", "SET", "maxmemory-samples", "5", "maxmemory-eviction-tenacity", "10",
           "lfu-log-factor", "10", "lfu-decay-time", "1")
    for field in ("maxmemory", "maxmemory_human", "maxmemory_policy"):
        a, r = info_field(b.ours, "memory", field), info_field(b.theirs, "memory", field)
        check(a == r, "INFO %s: cr-kv %r, redis %r" % (field, a, r))
    b.same("SET", "k", "v")
    b.same("OBJECT", "FREQ", "nokey")
    for pol in ("noeviction", "allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"):
        b.same("CONFIG", "SET", "maxmemory-policy", pol)
        b.same("OBJECT", "FREQ", "k")  # not an LFU policy: the error
        b.same("OBJECT", "IDLETIME", "k")
    for pol in ("allkeys-lfu", "volatile-lfu"):
        b.same("CONFIG", "SET", "maxmemory-policy", pol)
        b.same("OBJECT", "IDLETIME", "k")  # an LFU policy: the error
        b.same("SET", "f%s" % pol, "v")
        b.same("OBJECT", "FREQ", "f%s" % pol)  # a new key: 5
        b.same("GET", "f%s" % pol)
        b.same("OBJECT", "FREQ", "f%s" % pol)  # one read from 5: always 6
        b.same("OBJECT", "FREQ", "nokey")
    # noeviction over the limit: writes refused with the exact text, reads and DEL served
    b.same("CONFIG", "SET", "maxmemory-policy", "noeviction")
    b.same("CONFIG", "SET", "maxmemory", "1")
    a, r = b.both("SET", "k2", "v")
    check(a == r == OOM, "noeviction: cr-kv %r, redis %r" % (a, r))
    b.same("GET", "k")
    b.same("LPUSH", "l", "x")
    b.same("EXPIRE", "k", "100")  # not denyoom: served
    b.same("DEL", "k")
    for field in ("maxmemory", "maxmemory_human", "maxmemory_policy"):
        a, r = info_field(b.ours, "memory", field), info_field(b.theirs, "memory", field)
        check(a == r, "INFO %s: cr-kv %r, redis %r" % (field, a, r))
    # a volatile policy with no key that has a TTL: nothing to evict, the same refusal
    b.same("CONFIG", "SET", "maxmemory", "0")
    b.same("FLUSHALL")
    for i in range(20):
        b.same("SET", "p%d" % i, "v" * 100)
    b.same("SET", "t1", "v", "EX", "1000")
    b.same("SET", "t2", "v", "EX", "1000")
    b.same("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
    b.same("CONFIG", "SET", "maxmemory", "1")
    time.sleep(0.3)  # cr-kv's shards evict at their tick too
    a, r = b.both("SET", "p100", "v")
    check(a == r == OOM, "volatile-lru, no TTL key: cr-kv %r, redis %r" % (a, r))
    b.same("EXISTS", "t1", "t2")  # both evicted
    b.same("DBSIZE")
    a, r = evicted(b.ours), evicted(b.theirs)
    check(a == r == 2, "evicted_keys: cr-kv %d, redis %d (2 keys had a TTL)" % (a, r))
    b.same("CONFIG", "RESETSTAT")
    a, r = evicted(b.ours), evicted(b.theirs)
    check(a == r == 0, "evicted_keys after RESETSTAT: cr-kv %d, redis %d" % (a, r))
    b.same("CONFIG", "SET", "maxmemory", "0")
    b.same("SET", "p100", "v")
    b.close()
    log("oracle: every reply as redis-server's")


# ---- hot: a cache workload ----

def hot_run(b, policy, seed, steps=160, capacity=3000, nhot=300, per=50):
    """@steps steps of at least 50 ms (8 s, longer on a loaded machine: the count, not
    the time, makes the cold keys overflow the capacity); the hit rate counts from step
    70 on, once the cold keys have filled it."""
    value = "v" * 1000
    b.limit(policy, capacity, value)
    rng = random.Random(seed)
    hot = ["hot:%d" % i for i in range(nhot)]
    for c in (b.ours, b.theirs):
        for r in pipe(c, [("SET", k, value) for k in hot]):
            check(r == b"+OK\r\n", "SET: %r" % r)
    stats = {"ours": [0, 0], "theirs": [0, 0]}
    cold = 0
    start = time.monotonic()
    step = 0
    worst = 0
    mx = int(info_field(b.ours, "memory", "maxmemory"))
    while step < steps:
        check(time.monotonic() - start < 60, "%s: %d steps in 60 s" % (policy, step))
        t0 = time.monotonic()
        writes = [("SET", "cold:%d" % (cold + i), value) for i in range(per)]
        cold += per
        reads = [rng.choice(hot) for _ in range(per)]
        measure = step >= 70  # once the cold keys fill it
        for name, c in (("ours", b.ours), ("theirs", b.theirs)):
            for r in pipe(c, writes):
                check(r == b"+OK\r\n", "%s: cold SET: %r" % (name, r))
            got = pipe(c, [("GET", k) for k in reads])
            missed = [k for k, r in zip(reads, got) if r == b"$-1\r\n"]
            if measure:
                stats[name][0] += len(reads) - len(missed)
                stats[name][1] += len(missed)
            if missed:  # a cache: a miss writes the key back
                pipe(c, [("SET", k, value) for k in missed])
        if step % 10 == 0:
            worst = max(worst, used(b.ours) - mx)
        step += 1
        time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))
    rate = {n: h / max(1, h + m) for n, (h, m) in stats.items()}
    ev = evicted(b.ours), evicted(b.theirs)
    log("%s: hot hit rate cr-kv %.3f, redis %.3f; evicted %d / %d of %d cold; worst "
        "used_memory - maxmemory %d" % (policy, rate["ours"], rate["theirs"], ev[0], ev[1],
                                        cold, worst))
    check(ev[0] > cold / 2 and ev[1] > cold / 2, "too few evictions: %r" % (ev,))
    check(worst <= BATCH_SLACK, "used_memory %d over maxmemory" % worst)
    return rate["ours"], rate["theirs"]


def t_hot(o):
    b = Both(o)
    for policy, bound in (("allkeys-lru", 0.03), ("allkeys-lfu", 0.03),
                          ("allkeys-random", 0.05)):
        ours, theirs = hot_run(b, policy, seed=7)
        check(ours >= theirs - bound,
              "%s: hot hit rate %.3f, redis %.3f (bound %.2f)" % (policy, ours, theirs, bound))
    b.close()


# ---- volatile ----

def t_volatile(o):
    b = Both(o)
    value = "v" * 500
    for policy in ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"):
        b.limit(policy, 2000, value)
        for name, c in (("cr-kv", b.ours), ("redis", b.theirs)):
            for r in pipe(c, [("SET", "p:%d" % i, value) for i in range(1000)]):
                check(r == b"+OK\r\n", "%s %s: %r" % (name, policy, r))
            for r in pipe(c, [("SET", "t:%d" % i, value, "EX", str(3600 + i))
                              for i in range(3000)]):
                check(r == b"+OK\r\n", "%s %s: %r" % (name, policy, r))
            time.sleep(0.3)  # the shards' ticks
            left = sum(r == b":1\r\n" for r in pipe(c, [("EXISTS", "p:%d" % i)
                                                        for i in range(1000)]))
            check(left == 1000, "%s %s: %d keys without a TTL left of 1000"
                  % (name, policy, left))
            tl = sum(r == b":1\r\n" for r in pipe(c, [("EXISTS", "t:%d" % i)
                                                      for i in range(3000)]))
            ev = evicted(c)
            check(ev == 3000 - tl, "%s %s: %d TTL keys left, evicted_keys %d (3000 written)"
                  % (name, policy, tl, ev))
            check(0 < tl < 3000, "%s %s: %d TTL keys left" % (name, policy, tl))
            # writes without a TTL evict the TTL keys; the first refusal comes only once
            # none is left anywhere (a shard without one asks the others to evict)
            got = None
            for i in range(20000):
                got = c.cmd("SET", "q:%d" % i, value)
                if got != b"+OK\r\n":
                    break
            check(got == OOM, "%s %s: writes past the limit get %r" % (name, policy, got))
            tl = sum(r == b":1\r\n" for r in pipe(c, [("EXISTS", "t:%d" % i)
                                                      for i in range(3000)]))
            check(tl == 0, "%s %s: refused while %d TTL keys are left" % (name, policy, tl))
            log("%s %s: every key without a TTL kept, %d evicted, then -OOM"
                % (name, policy, evicted(c)))
    b.close()


# ---- ttl ----

def t_ttl(o):
    b = Both(o)
    value = "v" * 500
    b.limit("volatile-ttl", 1500, value)
    share = {}
    for name, c in (("ours", b.ours), ("theirs", b.theirs)):
        n = 3000
        order = list(range(n))
        random.Random(3).shuffle(order)  # written in random order of TTL
        for r in pipe(c, [("SET", "t:%d" % i, value, "EX", str(10000 + i)) for i in order]):
            check(r == b"+OK\r\n", "SET: %r" % r)
        time.sleep(0.3)
        live = [i for i, r in zip(range(n), pipe(c, [("EXISTS", "t:%d" % i)
                                                   for i in range(n)])) if r == b":1\r\n"]
        check(live, "%s: nothing left" % name)
        share[name] = sum(i >= n // 2 for i in live) / len(live)
        log("volatile-ttl %s: %d left, %.3f of them in the longer-TTL half"
            % (name, len(live), share[name]))
    check(share["ours"] >= share["theirs"] - 0.05 and share["ours"] >= 0.8,
          "survivors in the longer-TTL half: cr-kv %.3f, redis %.3f"
          % (share["ours"], share["theirs"]))
    b.close()


# ---- lfu ----

def lfu_dist(n, factor=10):
    """The exact distribution of Redis's counter after @n reads of a new key (LFULogIncr
    from LFU_INIT_VAL 5, no decay): {value: probability}."""
    d = {5: 1.0}
    for _ in range(n):
        nd = {}
        for c, pr in d.items():
            p = 1.0 if c < 255 and c <= 5 else (0.0 if c == 255 else
                                                1.0 / ((c - 5) * factor + 1))
            nd[c + 1] = nd.get(c + 1, 0.0) + pr * p
            nd[c] = nd.get(c, 0.0) + pr * (1 - p)
        d = {c: pr for c, pr in nd.items() if pr > 1e-15}
    return d


def t_lfu(o, nkeys=40):
    """Each server's values lie where Redis's counter has them with probability over
    1e-6, and each mean of 40 keys is within 4 standard errors of the exact mean."""
    b = Both(o)
    b.same("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    for n in (0, 1, 2, 5, 10, 100, 1000):
        keys = ["f:%d:%d" % (n, i) for i in range(nkeys)]
        d = lfu_dist(n)
        mean = sum(c * p for c, p in d.items())
        sd = (sum((c - mean) ** 2 * p for c, p in d.items())) ** 0.5
        acc, lo, hi = 0.0, None, None
        for c in sorted(d):
            acc += d[c]
            if lo is None and acc > 1e-6:
                lo = c
            if hi is None and acc >= 1 - 1e-6:
                hi = c
        means = []
        for name, c in (("cr-kv", b.ours), ("redis", b.theirs)):
            pipe(c, [("SET", k, "v") for k in keys])
            pipe(c, [("GET", k) for k in keys for _ in range(n)])
            vals = [int(r[1:-2]) for r in pipe(c, [("OBJECT", "FREQ", k) for k in keys])]
            if n <= 1:
                check(all(v == 5 + n for v in vals), "%s: %d reads: %r" % (name, n, vals))
            check(all(lo <= v <= hi for v in vals), "%s: %d reads: %r outside [%d, %d]"
                  % (name, n, vals, lo, hi))
            m = sum(vals) / len(vals)
            means.append(m)
            check(abs(m - mean) <= 4 * sd / nkeys ** 0.5 + 1e-9,
                  "%s: %d reads: mean %.2f, Redis's counter's %.2f (sd %.2f)"
                  % (name, n, m, mean, sd))
        log("lfu: %4d reads: cr-kv mean %.2f, redis %.2f, exact %.2f (sd %.2f) [%d, %d]"
            % (n, means[0], means[1], mean, sd, lo, hi))
    b.close()


# ---- runtime ----

def t_runtime(o):
    b = Both(o)
    value = "v" * 500
    b.limit("noeviction", 2000, value)
    for name, c in (("cr-kv", b.ours), ("redis", b.theirs)):
        got = None
        for i in range(10000):
            got = c.cmd("SET", "k:%d" % i, value)
            if got != b"+OK\r\n":
                break
        check(got == OOM, "%s: noeviction answered %r" % (name, got))
        check(evicted(c) == 0, "%s: evicted under noeviction" % name)
        check(c.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == b"+OK\r\n", "SET")
        for r in pipe(c, [("SET", "n:%d" % i, value) for i in range(2000)]):
            check(r == b"+OK\r\n", "%s: after CONFIG SET allkeys-lru: %r" % (name, r))
        check(evicted(c) > 1000, "%s: evicted only %d" % (name, evicted(c)))
        mx = int(info_field(c, "memory", "maxmemory"))
        low = used(c) - 500 * 1000  # under what it holds now
        check(c.cmd("CONFIG", "SET", "maxmemory", str(low)) == b"+OK\r\n", "lower")
        deadline = time.monotonic() + 1.0
        while used(c) > low and time.monotonic() < deadline:
            time.sleep(0.02)
        check(used(c) <= low, "%s: used_memory %d over the new maxmemory %d after 1 s"
              % (name, used(c), low))
        check(c.cmd("CONFIG", "SET", "maxmemory", "0") == b"+OK\r\n", "maxmemory 0")
        ev = evicted(c)
        for r in pipe(c, [("SET", "z:%d" % i, value) for i in range(3000)]):
            check(r == b"+OK\r\n", "%s: no limit: %r" % (name, r))
        time.sleep(0.3)
        check(evicted(c) == ev, "%s: evicted with no limit" % name)
        log("runtime %s: noeviction, then allkeys-lru, a lower limit and none" % name)
    b.close()


# ---- watch ----

def t_watch(o):
    b = Both(o)
    value = "v" * 500
    b.limit("allkeys-random", 1000, value)
    for name, c in (("cr-kv", b.ours), ("redis", b.theirs)):
        w = Conn(c.s.getpeername()[1])
        check(w.cmd("SET", "watched", "1") == b"+OK\r\n", "SET")
        check(w.cmd("WATCH", "watched") == b"+OK\r\n", "WATCH")
        for i in range(0, 100000, 500):
            pipe(c, [("SET", "f:%d" % j, value) for j in range(i, i + 500)])
            if c.cmd("EXISTS", "watched") == b":0\r\n":
                break
        check(c.cmd("EXISTS", "watched") == b":0\r\n", "%s: never evicted" % name)
        check(w.cmd("MULTI") == b"+OK\r\n", "MULTI")
        check(w.cmd("SET", "x", "1") == b"+QUEUED\r\n", "QUEUED")
        got = w.cmd("EXEC")
        check(got == b"*-1\r\n", "%s: EXEC after the watched key was evicted: %r" % (name, got))
        w.close()
    b.close()
    log("watch: the EXEC fails once the watched key is evicted, as redis-server's")


# ---- rss ----

def t_rss(o):
    libs = kv_test.subprocess.run(["ldd", o.exe], capture_output=True, timeout=10).stdout
    if b"libasan" in libs or b"libtsan" in libs:
        log("SKIP: a sanitizer build: its RSS holds the sanitizer's shadow memory")
        sys.exit(kv_test.SKIP)
    mx = 32 * 1024 * 1024
    o.restart(("--maxmemory", str(mx), "--maxmemory-policy", "allkeys-lru"))
    c = Conn(o.kv.port, 60)
    time.sleep(0.3)
    rss0 = proc_rss(o.kv.proc.pid)
    written, i = 0, 0
    rng = random.Random(5)
    while written < 10 * mx:
        kind = rng.randrange(4)
        if kind == 0:
            cmds = [("SET", "s:%d:%d" % (i, j), "x" * rng.randrange(10, 3000)) for j in range(200)]
        elif kind == 1:
            cmds = [("HSET", "h:%d:%d" % (i, j)) + tuple(x for f in range(30)
                                                         for x in ("f%d" % f, "v" * 40))
                    for j in range(50)]
        elif kind == 2:  # lists of 200: freed lazily when evicted
            cmds = [("RPUSH", "l:%d:%d" % (i, j)) + tuple("e" * 30 for _ in range(200))
                    for j in range(20)]
        else:
            cmds = [("SADD", "t:%d:%d" % (i, j)) + tuple("m%d" % e for e in range(150))
                    for j in range(20)]
        for r in pipe(c, cmds):
            check(r[:1] != b"-", "write: %r" % r[:80])
        written += sum(len(str(x)) for cmd in cmds for x in cmd)
        i += 1
    settle(c)
    time.sleep(0.3)
    u, ev, rss = used(c), evicted(c), proc_rss(o.kv.proc.pid)
    log("rss: wrote %.0f MB, %d keys evicted, used_memory %.1f MB, RSS grew %.1f MB "
        "(limit %.0f MB)" % (written / 1e6, ev, u / 1e6, (rss - rss0) / 1e6, mx / 1e6))
    check(ev > 0, "nothing evicted")
    check(u <= mx + BATCH_SLACK, "used_memory %d over %d" % (u, mx))
    check(rss - rss0 <= mx * 1.5 + 24e6, "RSS grew %d: over maxmemory x 1.5 + 24 MB" % (rss - rss0))
    c.close()


# ---- stress ----

def stress_run(o, policy, seed):
    mx = 2 * 1024 * 1024
    o.restart(("--maxmemory", str(mx), "--maxmemory-policy", policy,
               "--maxmemory-samples", "3"))
    rng = random.Random(seed)
    nclients, per = 4, 10000
    volatile = policy.startswith("volatile")

    def val(k):
        return ("%s:%d:" % (k, seed)) * (1 + len(k) % 7)

    keys, ttl = [], set()
    batches = [[] for _ in range(nclients)]
    for n in range(per * nclients):
        ci = rng.randrange(nclients)
        k = "k:%d:%d" % (ci, n)
        if rng.random() < 0.3:
            cmd = ("HSET", k, "a", val(k), "b", str(n))
        elif volatile and rng.random() < 0.5:
            cmd = ("SET", k, val(k), "EX", "100000")
            ttl.add(k)
        else:
            cmd = ("SET", k, val(k))
        batches[ci].append((k, cmd))
        keys.append(k)
    # the clients' pipelines interleaved, so both shards take writes from both lcores
    clients = [kv_test.conn_on_lcore(o.kv.port, i % o.lcores) for i in range(nclients)]
    written, refused = [], 0
    pos = [0] * nclients
    while any(pos[i] < len(batches[i]) for i in range(nclients)):
        sent = []
        for i, c in enumerate(clients):
            chunk = batches[i][pos[i]:pos[i] + rng.randrange(1, 200)]
            pos[i] += len(chunk)
            if chunk:
                c.send(b"".join(resp(*cmd) for _, cmd in chunk))
            sent.append(chunk)
        for i, c in enumerate(clients):
            for (k, _), r in zip(sent[i], c.replies(len(sent[i]), 60)):
                if r == OOM:
                    refused += 1  # never written: not counted either way
                    continue
                check(r in (b"+OK\r\n", b":2\r\n"), "write: %r" % r)
                written.append(k)
        if rng.random() < 0.2:  # a reader: some keys read back at random
            pipe(clients[0], [("TYPE", rng.choice(keys)) for _ in range(50)])
    time.sleep(0.3)
    c = clients[0]
    ev0 = evicted(c)
    types = pipe(c, [("TYPE", k) for k in written])
    check_cmds, check_keys, gone = [], [], []
    for k, t in zip(written, types):
        if t == b"+none\r\n":
            gone.append(k)
            continue
        check_cmds.append(("GET", k) if t == b"+string\r\n" else ("HGET", k, "a"))
        check_keys.append(k)
    for k, r in zip(check_keys, pipe(c, check_cmds)):
        want = val(k).encode()
        check(r == b"$%d\r\n%s\r\n" % (len(want), want), "%s holds %r" % (k, r[:80]))
    ev = evicted(c)
    check(ev == ev0, "keys evicted while nothing was written: %d, then %d" % (ev0, ev))
    dbsize = int(c.cmd("DBSIZE")[1:-2])
    present = len(check_keys)
    log("stress %s (seed %d): %d writes, %d refused, %d keys present with their values, "
        "%d evicted, dbsize %d" % (policy, seed, len(keys), refused, present, ev, dbsize))
    check(present == dbsize, "dbsize %d, %d keys found" % (dbsize, present))
    check(ev > 0 and present > 0, "no eviction, or nothing left")
    check(len(gone) == ev, "gone %d != evicted_keys %d (%d written)" % (len(gone), ev,
                                                                       len(written)))
    if volatile:
        bad = [k for k in gone if k not in ttl]
        check(not bad, "%d keys without a TTL evicted, e.g. %r" % (len(bad), bad[:3]))
        check(refused > 0, "volatile: never refused")
    else:
        check(refused == 0, "allkeys-random refused %d writes" % refused)
    check(used(c) <= mx + BATCH_SLACK * nclients, "used_memory %d over %d" % (used(c), mx))
    for x in clients:
        x.close()


def t_stress(o):
    """allkeys-random, then volatile-lru with half the strings given a TTL (so shards run
    out of keys to evict, ask each other for passes, and refuse writes)."""
    for policy in ("allkeys-random", "volatile-lru"):
        stress_run(o, policy, SEED)


SEED = 29
TESTS = {"oracle": t_oracle, "hot": t_hot, "volatile": t_volatile, "ttl": t_ttl, "lfu": t_lfu,
         "runtime": t_runtime, "watch": t_watch, "rss": t_rss, "stress": t_stress}

if __name__ == "__main__":
    if "--seed" in sys.argv:
        i = sys.argv.index("--seed")
        SEED = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    sys.exit(kv_test.main(TESTS, __doc__))
