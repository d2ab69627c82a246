#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-kv's SLOWLOG against redis-server 7.0 as the oracle, on loopback.

  kv_slowlog_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

oracle: two clients (one per lcore on 2 lcores), each named, send the same commands to
  cr-kv and to redis-server with every command logged (CONFIG SET slowlog-log-slower-than
  0): keys on both shards, cross-shard commands, 32 and 33 arguments, 128- and 300-byte
  arguments. SLOWLOG GET (default, counts, -1, 0), LEN, RESET, HELP, their errors, and
  CONFIG SET / GET of both parameters answer the same: the entries' ids, arguments (cut as
  Redis cuts them), client names and which client's address each names are equal;
  durations are numbers and times are now (they cannot be equal).
stress: 8 named clients on both lcores at once, 300 seeded commands each (local, remote,
  cross-shard, pipelined), every one logged: exactly those entries, consecutive ids,
  each client's commands.
slow: with --slowlog-log-slower-than 2000, SMEMBERS of a 200,000-member set held by the
  other shard is logged by the client's lcore with a duration of at least 2 ms and no more
  than the client saw; PINGs are not; a threshold above it logs nothing more.
contended (2 lcores): SMEMBERSes of that set while another client SMOVEs a member of it
  across shards (transactions locking it): every one logged with its run on the shard,
  the ones that waited behind the locks too.
exec: MULTI/EXEC over both shards, WATCH, DISCARD, EXECABORT, a failed WATCH, every
  command logged: the entries as redis-server's (each command EXEC ran, never EXEC).
blocked: a BLMPOP that blocked, then served 200,000 elements: logged with that run.
Exits 0 (pass), 1 (fail), 77 (skip: no redis-server, or contended on 1 lcore).
"""
import sys
import time

import kv_test
from kv_test import Conn, check, conn_on_lcore, log, on_shard

SLOWLOG_OFF = ("--slowlog-log-slower-than", "-1")


def parse(b, i=0):
    """One RESP reply at b[i:] as Python values (errors as ("ERR", text)); (value, end)."""
    nl = b.index(b"\r\n", i)
    t, line = b[i:i + 1], b[i + 1:nl]
    if t == b"+":
        return line.decode(), nl + 2
    if t == b"-":
        return ("ERR", line.decode()), nl + 2
    if t == b":":
        return int(line), nl + 2
    n = int(line)
    if t == b"$":
        return (None, nl + 2) if n < 0 else (b[nl + 2:nl + 2 + n].decode(), nl + 4 + n)
    out, j = [], nl + 2
    for _ in range(n):
        v, j = parse(b, j)
        out.append(v)
    return out, j


def value(raw):
    v, end = parse(raw)
    check(end == len(raw), "trailing bytes after %r" % raw[:60])
    return v


class Pair:
    """One client of cr-kv and one of redis-server, sent the same commands."""

    def __init__(self, ours, theirs):
        self.ours, self.theirs = ours, theirs
        self.peers = ("127.0.0.1:%d" % ours.s.getsockname()[1],
                      "127.0.0.1:%d" % theirs.s.getsockname()[1])

    def both(self, *args):
        return self.ours.cmd(*args), self.theirs.cmd(*args)

    def same(self, *args):
        ours, theirs = self.both(*args)
        check(ours == theirs, "%r: cr-kv %r, redis %r" % (args[:4], ours[:300], theirs[:300]))
        return ours


def compare_entries(pairs, ours, theirs, what):
    """Two SLOWLOG GET replies: the same entries but for durations, times and ports."""
    ours, theirs = value(ours), value(theirs)
    check(isinstance(ours, list) and isinstance(theirs, list),
          "%s: cr-kv %r, redis %r" % (what, ours, theirs))
    check(len(ours) == len(theirs), "%s: %d entries, redis %d:\n%r\n%r"
          % (what, len(ours), len(theirs), ours, theirs))
    now = time.time()
    for e, t in zip(ours, theirs):
        check(len(e) == 6 and len(t) == 6, "%s: entry shapes %r / %r" % (what, e, t))
        check(e[0] == t[0], "%s: id %r, redis %r (%r / %r)" % (what, e[0], t[0], e, t))
        check(e[3] == t[3], "%s: arguments %r, redis %r" % (what, e[3], t[3]))
        check(e[5] == t[5], "%s: client name %r, redis %r" % (what, e[5], t[5]))
        for x in (e, t):
            check(isinstance(x[2], int) and x[2] >= 0, "%s: duration %r" % (what, x))
            check(abs(x[1] - now) < 30, "%s: time %r is not now" % (what, x))
        who = [i for i, p in enumerate(pairs) if p.peers[0] == e[4]]
        check(who and pairs[who[0]].peers[1] == t[4],
              "%s: %r names client %r, redis's %r" % (what, e[3], e[4], t[4]))
    return ours


def t_oracle(o):
    o.restart(SLOWLOG_OFF)
    r = o.redis(SLOWLOG_OFF)
    a = Pair(conn_on_lcore(o.kv.port, 0), Conn(r.port))
    b = Pair(conn_on_lcore(o.kv.port, o.lcores - 1), Conn(r.port))
    pairs = (a, b)
    k0, k1 = on_shard("k", 0, o.lcores), on_shard("k", o.lcores - 1, o.lcores)
    a.same("SLOWLOG", "RESET")
    a.same("CLIENT", "SETNAME", "first")
    b.same("CLIENT", "SETNAME", "second")
    a.same("CONFIG", "SET", "slowlog-log-slower-than", "0")  # logged: it ran with 0 set
    a.same("SET", k0, "v")
    b.same("SET", k1, "x" * 300)
    a.same("SET", k0, "y" * 128)
    b.same("SET", k1, "z" * 129)
    a.same("RPUSH", "list", *["e%d" % i for i in range(30)])  # 32 arguments
    b.same("RPUSH", "list", *["f%d" % i for i in range(31)])  # 33
    a.same("RPUSH", "list", *["g%d" % i for i in range(200)])
    b.same("MGET", k0, k1, "absent")
    a.same("GET", k1)
    b.same("DEL", k0, k1)
    a.both("HELLO", "2", "AUTH", "default", "secret", "SETNAME", "first")  # ids differ
    a.same("SLOWLOG", "LEN")
    compare_entries(pairs, *a.both("SLOWLOG", "GET"), "GET")
    e = compare_entries(pairs, *b.both("SLOWLOG", "GET", "-1"), "GET -1")
    check(len(e) > 12 and e[-1][3] == ["CONFIG", "SET", "slowlog-log-slower-than", "0"]
          and e[-1][5] == "first", "the oldest entry: %r" % (e[-1],))
    compare_entries(pairs, *a.both("SLOWLOG", "GET", "3"), "GET 3")
    compare_entries(pairs, *b.both("SLOWLOG", "GET", "0"), "GET 0")
    compare_entries(pairs, *a.both("SLOWLOG", "GET", "1000"), "GET 1000")
    for bad in (("GET", "-2"), ("GET", "abc"), ("GET", "1", "2"), ("FOO",), (), ("LEN", "x"),
                ("RESET", "x"), ("HELP", "x")):
        a.same("SLOWLOG", *bad)
    a.same("SLOWLOG", "HELP")
    a.same("slowlog", "len")
    compare_entries(pairs, *b.both("SLOWLOG", "GET", "-1"), "after the errors")
    # The length: the newest N over every lcore, as one log of N keeps.
    b.same("CONFIG", "SET", "slowlog-max-len", "3")
    a.same("SLOWLOG", "LEN")
    e = compare_entries(pairs, *b.both("SLOWLOG", "GET", "-1"), "max-len 3")
    check(len(e) == 3, "max-len 3: %d entries" % len(e))
    for bad in (("slowlog-log-slower-than", "abc"), ("slowlog-log-slower-than", "-2"),
                ("slowlog-max-len", "-1"), ("slowlog-max-len", "1.5"),
                ("slowlog-max-len", "5", "maxmemory-clients", "bad"),
                ("slowlog-max-len", "5", "slowlog-max-len", "6")):
        a.same("CONFIG", "SET", *bad)
    got = value(a.ours.cmd("CONFIG", "GET", "slowlog*"))
    want = value(a.theirs.cmd("CONFIG", "GET", "slowlog*"))
    check(dict(zip(got[::2], got[1::2])) == dict(zip(want[::2], want[1::2])),
          "CONFIG GET slowlog*: %r, redis %r" % (got, want))
    # Off: nothing is logged; RESET empties every lcore's log; ids go on.
    a.same("CONFIG", "SET", "slowlog-log-slower-than", "-1", "slowlog-max-len", "128")
    b.same("SET", k1, "w")
    a.same("SLOWLOG", "LEN")
    b.same("SLOWLOG", "RESET")
    a.same("SLOWLOG", "LEN")
    b.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
    a.same("GET", k0)
    e = compare_entries(pairs, *b.both("SLOWLOG", "GET"), "after RESET")
    check(len(e) == 2 and e[0][0] > 20, "after RESET: %r" % (e,))
    log("oracle: %d clients, entries and errors as redis-server's" % len(pairs))


def t_slow(o):
    o.restart(("--slowlog-log-slower-than", "2000"))
    c = conn_on_lcore(o.kv.port, 0)
    big = on_shard("big", o.lcores - 1, o.lcores)
    for i in range(0, 200000, 2000):
        c.send(kv_test.resp("SADD", big, *[str(m) for m in range(i, i + 2000)]))
    c.replies(100, timeout=60)
    check(c.cmd("SLOWLOG", "RESET") == b"+OK\r\n", "RESET")
    for _ in range(20):
        check(c.cmd("PING") == b"+PONG\r\n", "PING")
    t0 = time.monotonic()
    c.send(kv_test.resp("SMEMBERS", big))
    members = c.replies(1, timeout=60)[0]
    seen_us = (time.monotonic() - t0) * 1e6
    check(members.startswith(b"*200000\r\n"), "SMEMBERS: %r" % members[:20])
    e = value(c.cmd("SLOWLOG", "GET"))
    check(len(e) == 1 and e[0][3] == ["SMEMBERS", big],
          "only the SMEMBERS is logged: %r" % (e,))
    check(2000 <= e[0][2] <= seen_us, "SMEMBERS took %d us on its shard, the client saw %d"
          % (e[0][2], seen_us))
    check(c.cmd("CONFIG", "SET", "slowlog-log-slower-than", "1000000000") == b"+OK\r\n",
          "CONFIG SET")
    c.send(kv_test.resp("SMEMBERS", big))
    c.replies(1, timeout=60)
    check(c.cmd("SLOWLOG", "LEN") == b":1\r\n", "a command under the threshold was logged")
    log("slow: SMEMBERS logged with %d us (the client saw %d us)" % (e[0][2], seen_us))


def t_stress(o, clients=8, per=300, seed=19):
    """Seeded: @clients named clients (on both lcores) at once, each @per commands over
    keys of every shard (local, remote, cross-shard, pipelined in runs), every command
    logged: SLOWLOG GET -1 holds exactly them, ids unique and consecutive, each client's
    entries its commands (in its order on one lcore), and LEN the same count."""
    import random
    import threading
    o.restart(("--slowlog-log-slower-than", "0", "--slowlog-max-len", "100000"))
    rng = random.Random(seed)
    keys = [on_shard("s%d-" % sh, sh, o.lcores, 4) for sh in range(o.lcores)]
    keys = [k for ks in keys for k in ks]
    scripts = []
    for i in range(clients):
        cmds = []
        for _ in range(per):
            r = rng.random()
            if r < 0.4:
                cmds.append(("SET", rng.choice(keys), str(rng.randrange(1 << 30))))
            elif r < 0.7:
                cmds.append(("GET", rng.choice(keys)))
            elif r < 0.9:
                cmds.append(("MGET",) + tuple(rng.sample(keys, 3)))
            else:
                cmds.append(("INCR", "n%d" % rng.randrange(8)))
        scripts.append(cmds)
    conns = [conn_on_lcore(o.kv.port, i % o.lcores) for i in range(clients)]
    for i, c in enumerate(conns):
        check(c.cmd("CLIENT", "SETNAME", "c%d" % i) == b"+OK\r\n", "SETNAME")
    check(conns[0].cmd("SLOWLOG", "RESET") == b"+OK\r\n", "RESET")  # itself logged after

    errors = []

    def run(c, cmds):
        try:
            for j in range(0, len(cmds), 10):  # runs of 10, pipelined
                c.send(b"".join(kv_test.resp(*a) for a in cmds[j:j + 10]))
                c.replies(len(cmds[j:j + 10]), timeout=60)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(c, sc)) for c, sc in zip(conns, scripts)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(not errors, "clients failed: %r" % errors)
    c = conns[0]
    n = int(c.cmd("SLOWLOG", "LEN")[1:-2])
    e = value(c.cmd("SLOWLOG", "GET", "-1"))
    # The RESET, then clients x per commands; GET -1 has the LEN too.
    want = 1 + clients * per
    ids = sorted(x[0] for x in e)
    check(n == want and len(e) == want + 1, "LEN %d, GET -1 %d entries, want %d and %d"
          % (n, len(e), want, want + 1))
    check(ids == list(range(ids[0], ids[0] + len(ids))), "ids not consecutive: %r" % ids[:20])
    check([x[0] for x in e] == sorted(ids, reverse=True), "not newest first by id")
    for i, cmds in enumerate(scripts):
        mine = [x[3] for x in reversed(e) if x[5] == "c%d" % i and x[3][0] != "CLIENT"
                and x[3][0] != "SLOWLOG"]
        # Entries are made as replies complete: behind a command sent to another shard, a
        # pipelined local one may complete (and be logged) first; on one lcore, in order.
        want_cmds = [list(a) for a in cmds]
        if o.lcores == 1:
            check(mine == want_cmds, "client c%d: %d entries in another order or form than "
                  "its %d commands" % (i, len(mine), len(cmds)))
        check(sorted(mine) == sorted(want_cmds), "client c%d: %d entries, not its %d "
              "commands" % (i, len(mine), len(cmds)))
    log("stress: %d clients x %d commands: %d entries, ids %d..%d consecutive, each "
        "client's in its order" % (clients, per, len(e), ids[0], ids[-1]))


def t_contended(o, rounds=30):
    """2 lcores: SMEMBERS of a 200,000-member set while another client moves a member of
    it across shards again and again (SMOVE, a transaction locking it): SMEMBERSes that
    wait behind the locks still run there after, and each is logged with its run there
    (at least 2 ms), none with just the moment it was queued."""
    import threading
    if o.lcores != 2:
        log("SKIP: needs 2 lcores (transactions across shards)")
        sys.exit(kv_test.SKIP)
    o.restart(("--slowlog-log-slower-than", "2000"))
    big, other = on_shard("big", 1, 2), on_shard("other", 0, 2)
    c = conn_on_lcore(o.kv.port, 0)
    for i in range(0, 200000, 2000):
        c.send(kv_test.resp("SADD", big, *[str(m) for m in range(i, i + 2000)]))
    c.replies(100, timeout=60)
    mover = conn_on_lcore(o.kv.port, 0)
    waited0 = int(kv_test.info_field(c, "stats", "commands_waited_for_locks"))
    stop, errors = [], []

    def move():
        try:
            while not stop:
                mover.send(kv_test.resp("SMOVE", big, other, "7") +
                           kv_test.resp("SMOVE", other, big, "7"))
                mover.replies(2, timeout=60)
        except Exception as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=move)
    t.start()
    try:
        check(c.cmd("SLOWLOG", "RESET") == b"+OK\r\n", "RESET")
        for _ in range(rounds):
            c.send(kv_test.resp("SMEMBERS", big))
            r = c.replies(1, timeout=60)[0]
            check(r.startswith(b"*199999\r\n") or r.startswith(b"*200000\r\n"),
                  "SMEMBERS: %r" % r[:20])
    finally:
        stop.append(1)
        t.join()
    check(not errors, "the mover failed: %r" % errors)
    waited = int(kv_test.info_field(c, "stats", "commands_waited_for_locks")) - waited0
    e = [x for x in value(c.cmd("SLOWLOG", "GET", "-1")) if x[3][0] == "SMEMBERS"]
    check(len(e) == rounds and all(x[2] >= 2000 for x in e),
          "%d of %d SMEMBERS logged (%d parts waited for locks): durations %r"
          % (len(e), rounds, waited, sorted(x[2] for x in e)))
    check(waited > 0, "no part waited for the SMOVEs' locks: the test did not test it")
    log("contended: %d SMEMBERS logged, at least %d us each; %d parts waited for locks"
        % (len(e), min(x[2] for x in e), waited))


def t_blocked(o):
    """A BLMPOP that blocks, then is served 200,000 elements by another client's RPUSH
    (on the other shard with 2 lcores): logged with the run that served it (at least
    2 ms), not with the attempt that found nothing."""
    o.restart(("--slowlog-log-slower-than", "2000"))
    key = on_shard("list", o.lcores - 1, o.lcores)
    a, b = conn_on_lcore(o.kv.port, 0), conn_on_lcore(o.kv.port, 0)
    a.send(kv_test.resp("BLMPOP", "0", "1", key, "LEFT", "COUNT", "200000"))
    for _ in range(500):
        if kv_test.info_field(b, "clients", "blocked_clients") == "1":
            break
        time.sleep(0.01)
    else:
        raise kv_test.Failure("BLMPOP did not block")
    check(b.cmd("SLOWLOG", "RESET") == b"+OK\r\n", "RESET")
    b.send(kv_test.resp("RPUSH", key, *[str(i) for i in range(200000)]))
    check(b.replies(1, timeout=60)[0] == b":200000\r\n", "RPUSH")
    r = a.replies(1, timeout=60)[0]
    check(r.startswith(b"*2\r\n$%d\r\n%s\r\n*200000\r\n" % (len(key), key.encode())),
          "BLMPOP: %r" % r[:40])
    e = [x for x in value(b.cmd("SLOWLOG", "GET", "-1")) if x[3][0] == "BLMPOP"]
    check(len(e) == 1 and e[0][2] >= 2000, "the BLMPOP's entries: %r" % (e,))
    log("blocked: BLMPOP served 200,000 elements logged with %d us" % e[0][2])


def t_exec(o):
    """MULTI/EXEC with every command logged, keys on both shards, WATCH, a DISCARD, an
    EXECABORT and a failed WATCH: the entries as redis-server's, i.e. MULTI, WATCH and
    each command EXEC ran, as queued, and never EXEC itself (Redis 7.0: SKIP_SLOWLOG),
    nor the keys EXEC locks."""
    o.restart(SLOWLOG_OFF)
    r = o.redis(SLOWLOG_OFF)
    a = Pair(conn_on_lcore(o.kv.port, 0), Conn(r.port))
    b = Pair(conn_on_lcore(o.kv.port, o.lcores - 1), Conn(r.port))
    pairs = (a, b)
    k0, k1 = on_shard("k", 0, o.lcores), on_shard("k", o.lcores - 1, o.lcores)
    a.same("CLIENT", "SETNAME", "tx")
    a.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
    a.same("SLOWLOG", "RESET")
    for args in (("MULTI",), ("SET", k0, "1"), ("GET", k1), ("SET", k1, "2"), ("GET", k0),
                 ("INCR", k0), ("MGET", k0, k1), ("DEL", k0, k1), ("EXEC",),
                 ("WATCH", k0, k1), ("MULTI",), ("SET", k1, "w"), ("EXEC",),
                 ("MULTI",), ("SET", k0, "d"), ("DISCARD",),
                 ("MULTI",), ("NOSUCH",), ("SET", k0, "x"), ("EXEC",),
                 ("WATCH", k0), ("MULTI",), ("GET", k0), ("EXEC",)):
        a.same(*args)
        if args == ("WATCH", k0):
            b.same("SET", k0, "other")  # the last EXEC fails: nothing it queued runs
    e = compare_entries(pairs, *a.both("SLOWLOG", "GET", "-1"), "EXEC")
    names = [x[3][0].upper() for x in e]
    check("EXEC" not in names, "EXEC logged: %r" % names)
    log("exec: %d entries as redis-server's" % len(e))


TESTS = {"oracle": t_oracle, "exec": t_exec, "slow": t_slow, "stress": t_stress, "contended": t_contended,
         "blocked": t_blocked}

if __name__ == "__main__":
    sys.exit(kv_test.main(TESTS, __doc__))
