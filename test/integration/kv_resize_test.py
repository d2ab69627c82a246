#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-kv's shards across pool resizes, against redis-server 7 as the oracle, on loopback.

  kv_resize_test.py CR_KV TEST [--driver auto|uring|epoll] [--cycles N] [--clients N]
                    [--seed N]

  oracle  --clients (40) clients on the lcore that stays, each with its own keys (on both
          shards), send a seeded command stream (strings, lists, hashes, sets, sorted sets,
          expiry, cross-shard MGET/MSET/RENAME/..., MULTI/EXEC, EVAL) while the pool goes
          2->1->2 --cycles (10) times; each client's replies are compared with what redis-server
          answers to that client's own stream: 0 "unavailable" errors, 0 wrong replies.
          After each grow, a client on the restarted lcore runs a stream of its own while
          its shard is handed back to it. The long run is by hand:
            kv_resize_test.py build/app/cr-kv/cr-kv oracle --cycles 1000
  blocked clients blocked on lcore 1's shard, and an EXEC holding locks there, across the
          retire and across the hand-back: every waiter served once after the move.
  counts  --clients clients INCR their own counters (on both shards, and INCRBY through
          MULTI/EXEC over both) while the pool goes 2->1->2 --cycles times: every counter
          ends exactly at the number of increments its client was answered.

Each shard move is counted on the telemetry socket (kv_shards_moved_out, _in): a retire
moves lcore 1's shard to lcore 0, a grow hands it back, 2 moves per cycle.
Exits 0 (pass), 1 (fail), 77 (skip). Every wait is bounded.
"""
import argparse
import os
import random
import select
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apptest  # noqa: E402
import kv_test  # noqa: E402
from kv_test import (E, KV, Conn, Failure, Redis, check, compare, conn_on_lcore, log,  # noqa: E402
                     need, random_stream, resp, telemetry_cmd)

SKIP = 77
UNAVAILABLE = b"unavailable"


def own_keys(args, who):
    prefix = "c%d:" % who
    return tuple(a.replace("r:", prefix, 1) if a.startswith("r:") else a for a in args)


def client_stream(seed, who, n):
    """@n units of random_stream() commands over keys of client @who only (its own key
    set: no other client touches them), drawn 500 at a time, a unit being a command or,
    now and then, a MULTI/EXEC block of three (as a list)."""
    rnd = random.Random(seed * 7919 + 1)
    made, part = 0, 0
    while made < n:
        for args, mode in random_stream(seed * 1000 + part, 500):
            if made == n:
                return
            made += 1
            # Inside EXEC the reply is one array: only commands whose replies are exact.
            if rnd.random() < 0.02:
                # a script over two of its keys (on two shards, as often as not)
                k1, k2 = ("c%d:s%d" % (who, rnd.randrange(6)) for _ in range(2))
                yield [(("EVAL", "redis.call('INCR', KEYS[1]); "
                         "return redis.call('GET', KEYS[2])", "2", k1, k2), E)]
                continue
            if mode == E and rnd.random() < 0.06:
                block = [(own_keys(args, who), mode)]
                while len(block) < 3:
                    a2, m2 = random_stream(rnd.randrange(1 << 30), 1)[0]
                    if m2 == E:
                        block.append((own_keys(a2, who), m2))
                yield [(("MULTI",), E)] + block + [(("EXEC",), E)]
            else:
                yield [(own_keys(args, who), mode)]
        part += 1


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.wrong = []
        self.unavailable = 0
        self.errors = []

    def add(self, sent, wrong, unavailable):
        with self.lock:
            self.sent += sent
            self.wrong.extend(wrong)
            self.unavailable += unavailable


def run_stream(ours, theirs, units, stats, stop=None, pipe=8):
    """Send the commands of @units in pipelined chunks of about @pipe to both servers and
    compare the replies; until @units ends or @stop is set."""
    units = iter(units)
    while stop is None or not stop.is_set():
        chunk = []
        for u in units:
            chunk.extend(u)  # a MULTI/EXEC block is never cut
            if len(chunk) >= pipe:
                break
        if not chunk:
            return
        data = b"".join(resp(*a) for a, _ in chunk)
        ours.send(data)
        theirs.send(data)
        ra, rb = ours.replies(len(chunk), 60), theirs.replies(len(chunk), 60)
        wrong, unav = [], 0
        for (args, mode), x, y in zip(chunk, ra, rb):
            if UNAVAILABLE in x:
                unav += 1
            if not compare(mode, x, y):
                wrong.append("%r: cr-kv %r, redis %r" % (args, x[:120], y[:120]))
        stats.add(len(chunk), wrong, unav)


def lcore_state(tel, lc):
    for e in telemetry_cmd(tel, "/lcores")["/lcores"]:
        if e["lcore"] == lc:
            return e["state"]
    return None


def wait_state(tel, lc, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lcore_state(tel, lc) == want:
            return
        time.sleep(0.01)
    raise Failure("lcore %d not %s within %.0f s (it is %s)"
                  % (lc, want, timeout, lcore_state(tel, lc)))


def resize(tel, n):
    r = telemetry_cmd(tel, "/pool/resize,%d" % n)
    check("error" not in str(r), "resize to %d refused: %r" % (n, r))


def moved(tel):
    """Shards moved out and in, over every lcore."""
    app = telemetry_cmd(tel, "/stats")["/stats"]["total"]["app"]
    return app.get("kv_shards_moved_out", 0), app.get("kv_shards_moved_in", 0)


def start(args):
    tmp = tempfile.mkdtemp(prefix="kv-resize.")
    tel = os.path.join(tmp, "kv.sock")
    kv = KV(args.exe, 2, ["--telemetry", tel], args.driver)
    return kv, tel, tmp


def t_oracle(args):
    need("redis-server")
    kv, tel, tmp = start(args)
    redis = Redis()
    stats = Stats()
    stop = threading.Event()
    threads, late = [], Stats()
    try:
        per = 10 ** 9  # more than any run sends: the resizes decide when it ends
        pairs = []
        for who in range(args.clients):
            pairs.append((conn_on_lcore(kv.port, 0), Conn(redis.port, timeout=60)))

        def client(who):
            ours, theirs = pairs[who]
            try:
                run_stream(ours, theirs, client_stream(args.seed + who, who, per), stats, stop)
            except Exception as e:  # noqa: BLE001 (reported below)
                with stats.lock:
                    stats.errors.append("client %d: %r" % (who, e))

        for who in range(args.clients):
            t = threading.Thread(target=client, args=(who,), daemon=True)
            t.start()
            threads.append(t)
        t0 = time.monotonic()
        for cycle in range(args.cycles):
            resize(tel, 1)
            wait_state(tel, 1, "OFFLINE")
            resize(tel, 2)
            wait_state(tel, 1, "RUNNING")
            # A client of the restarted lcore, while its shard comes back to it.
            try:
                c = conn_on_lcore(kv.port, 1, tries=50)
            except Failure:
                c = None
            if c is not None:
                who = 1000 + cycle
                run_stream(c, Conn(redis.port, timeout=60),
                           client_stream(args.seed + who, who, 60), late)
                c.close()
            if stats.errors:
                break
        took = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(90)
        check(not stats.errors, "clients failed: %s" % "; ".join(stats.errors[:3]))
        check(stats.unavailable == 0 and late.unavailable == 0,
              "%d + %d replies said the shard was unavailable"
              % (stats.unavailable, late.unavailable))
        bad = stats.wrong + late.wrong
        check(not bad, "%d replies differ from redis-server's:\n  %s"
              % (len(bad), "\n  ".join(bad[:5])))
        out, inn = moved(tel)
        check(out == 2 * args.cycles and inn == 2 * args.cycles,
              "shards moved out %d, in %d: %d each expected" % (out, inn, 2 * args.cycles))
        log("%d cycles of 2->1->2 in %.1f s (%s): %d commands from %d clients on the lcore "
            "that stays and %d from the restarted one, all as redis-server answered; "
            "%d shard moves" % (args.cycles, took, args.driver, stats.sent, args.clients,
                                late.sent, out))
    finally:
        stop.set()
        redis.stop()
        kv.stop()
        os.path.isdir(tmp) and [os.unlink(os.path.join(tmp, f)) for f in os.listdir(tmp)]
        os.path.isdir(tmp) and os.rmdir(tmp)


def t_counts(args):
    kv, tel, tmp = start(args)
    stop = threading.Event()
    lock = threading.Lock()
    answered = {}  # key -> increments answered
    errors = []

    def client(who):
        c = conn_on_lcore(kv.port, 0)
        keys = ["n%d:%d" % (who, j) for j in range(4)] + ["n%d:{t}" % who]
        mine = dict.fromkeys(keys, 0)
        rnd = random.Random(args.seed + who)
        try:
            while not stop.is_set():
                batch = []
                for _ in range(16):
                    if rnd.random() < 0.1:
                        a, b = rnd.sample(keys, 2)
                        batch.append(("tx", a, b))
                    else:
                        batch.append(("incr", rnd.choice(keys)))
                data = b""
                n = 0
                for op in batch:
                    if op[0] == "incr":
                        data += resp("INCR", op[1])
                        n += 1
                    else:
                        data += resp("MULTI") + resp("INCRBY", op[1], 2) + \
                            resp("INCRBY", op[2], 3) + resp("EXEC")
                        n += 4
                c.send(data)
                replies = c.replies(n, 60)
                i = 0
                for op in batch:
                    if op[0] == "incr":
                        r = replies[i]
                        i += 1
                        check(r.startswith(b":"), "INCR %s: %r" % (op[1], r))
                        mine[op[1]] += 1
                        check(int(r[1:-2]) == mine[op[1]], "INCR %s answered %r, %d expected"
                              % (op[1], r, mine[op[1]]))
                    else:
                        ex = replies[i + 3]
                        i += 4
                        check(ex.startswith(b"*2\r\n"), "EXEC: %r" % ex)
                        mine[op[1]] += 2
                        mine[op[2]] += 3
            with lock:
                answered.update(mine)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append("client %d: %r" % (who, e))

    threads = [threading.Thread(target=client, args=(w,), daemon=True)
               for w in range(args.clients)]
    try:
        for t in threads:
            t.start()
        for _ in range(args.cycles):
            resize(tel, 1)
            wait_state(tel, 1, "OFFLINE")
            resize(tel, 2)
            wait_state(tel, 1, "RUNNING")
            if errors:
                break
        stop.set()
        for t in threads:
            t.join(90)
        check(not errors, "clients failed: %s" % "; ".join(errors[:3]))
        c = Conn(kv.port)
        keys = sorted(answered)
        got = [int(g.split(b"\r\n")[1]) for g in kv_test.parse_array(c.cmd("MGET", *keys))]
        bad = [(k, g, answered[k]) for k, g in zip(keys, got) if g != answered[k]]
        check(not bad, "%d counters off: %r" % (len(bad), bad[:5]))
        out, inn = moved(tel)
        check(out == 2 * args.cycles and inn == 2 * args.cycles,
              "shards moved out %d, in %d" % (out, inn))
        log("%d counters exact (%d increments) over %d cycles of 2->1->2 (%s)"
            % (len(keys), sum(answered.values()), args.cycles, args.driver))
    finally:
        stop.set()
        kv.stop()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


def t_blocked(args):
    """Clients of the lcore that stays block (no timeout) on keys of lcore 1's shard, and
    one runs an EXEC over both shards that holds its locks for a while: lcore 1 retires
    meanwhile, its shard (the waiters, the locks) moves to lcore 0, the EXEC completes, and
    pushes made after the move serve every waiter, once each; then the same across the
    hand-back when lcore 1 starts again (where the EXEC, both shards being on lcore 0, runs
    within one turn: only the waiters are in flight)."""
    kv, tel, tmp = start(args)
    try:
        n = 8
        for phase, (size, state) in enumerate(((1, "OFFLINE"), (2, "RUNNING"))):
            keys = kv_test.on_shard("blk%d:" % phase, 1, 2, n)
            waiters = [conn_on_lcore(kv.port, 0) for _ in range(n)]
            for c, k in zip(waiters, keys):
                c.send(resp("BLPOP", k, "0"))
            big = "{%s}big" % keys[0]
            a = conn_on_lcore(kv.port, 0)
            for base in range(0, 40000, 2000):
                a.send(resp("SADD", big, *["m%d" % i for i in range(base, base + 2000)]))
            a.replies(20, 60)
            other = kv_test.on_shard("blk%d:o" % phase, 0, 2)
            dst = "{%s}dst" % keys[0]
            a.cmd("SUNIONSTORE", dst, big)

            def exec_script(reps):
                return [resp("MULTI"), resp("SET", other, "x")] + \
                    [resp("SINTERCARD", "2", big, dst)] * reps + [resp("EXEC")]
            # What a step costs inside an EXEC here, now: the EXEC below takes ~1.5 s.
            t0 = time.monotonic()
            a.send(b"".join(exec_script(20)))
            a.replies(23, 60)
            reps = min(2000, int(1.5 / max(1e-4, (time.monotonic() - t0) / 20)) + 1)
            script = exec_script(reps)
            a.send(b"".join(script))
            a.replies(len(script) - 1, 60)  # +OK, +QUEUED...: the EXEC is under way
            time.sleep(0.05)  # it holds its locks on both shards now
            t1 = time.monotonic()
            resize(tel, size)
            wait_state(tel, 1, state)
            t2 = time.monotonic()
            during = not a.buf and not select.select([a.s], [], [], 0)[0]  # still runs
            ex = a.replies(1, 60)[0]
            check(ex == b"*%d\r\n+OK\r\n" % (reps + 1) + b":40000\r\n" * reps,
                  "the EXEC across the move: %r" % ex[:80])
            # Across the hand-back both shards are on lcore 0, the EXEC's too: it runs in
            # one turn there, so nothing of it can be in flight (the waiters are).
            check(during or phase == 1,
                  "the EXEC ended before the lcore was %s (%d SINTERCARDs in %.2f s, %s "
                  "after %.2f s): it shows nothing"
                  % (state, reps, time.monotonic() - t1, state, t2 - t1))
            p = conn_on_lcore(kv.port, 0)
            for k in keys:
                check(p.cmd("RPUSH", k, "v", "w") == b":2\r\n", "push")
            for c, k in zip(waiters, keys):
                want = b"*2\r\n$%d\r\n%s\r\n$1\r\nv\r\n" % (len(k), k.encode())
                check(c.replies(1, 20) == [want], "a waiter on %s after the move" % k)
            left = [p.cmd("LRANGE", k, 0, -1) for k in keys]
            check(all(x == b"*1\r\n$1\r\nw\r\n" for x in left),
                  "each waiter took exactly one element: %r" % left[:3])
            for c in waiters + [a, p]:
                c.close()
        out, inn = moved(tel)
        check(out == 2 and inn == 2, "shards moved out %d, in %d" % (out, inn))
        log("%d clients blocked across the retire and across the hand-back, an EXEC holding "
            "its locks across the retire: every waiter served once after each move" % n)
    finally:
        kv.stop()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


TESTS = {"oracle": t_oracle, "counts": t_counts, "blocked": t_blocked}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exe")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="auto", choices=("auto", "uring", "epoll"))
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        log("SKIP: 2 lcores need 2 CPUs")
        return SKIP
    if apptest.skip_if_refused(args.exe, args.driver, log):
        return SKIP
    budget = 120 + 6 * args.cycles
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(Failure("test timed out")))
    signal.alarm(budget)
    try:
        TESTS[args.test](args)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    log("PASS: %s" % args.test)
    return 0


if __name__ == "__main__":
    sys.exit(main())
