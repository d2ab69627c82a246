#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The server and admin commands of app/cr-kv that tools send, against redis-server 7.0
(the oracle: the same commands to both, replies compared byte for byte), on loopback.

  kv_admin_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

  clients    CLIENT LIST from a client on each lcore lists the clients of every lcore,
             by id, each line with Redis's fields in Redis's order (and cr-kv's lcore=
             last): name, resp, flags (P subscribed, x in MULTI with multi=, b blocked,
             e NO-EVICT), cmd; TYPE and ID filters; errors as redis-server's; redis-py's
             client_list() and redis-cli read it.
  kill       CLIENT KILL by ID, ADDR, LADDR, TYPE, USER, SKIPME and the old addr form, of
             clients on the other lcore (closed) and of itself (after its reply); the
             counts and errors as redis-server's.
  killstress seeded: busy clients of every lcore (parts in flight, blocked, subscribed)
             killed one by one by id: each counted once, all closed, nothing left.
  reply      CLIENT REPLY OFF / SKIP / ON, one by one and pipelined, keys on every shard,
             in MULTI: the bytes that come back are redis-server's.
  noevict    with --maxmemory-clients, a client that said CLIENT NO-EVICT on is spared and
             the other (smaller) one is evicted, as redis-server does.
  reset      RESET ends MULTI, unwatches, unsubscribes, forgets the name, CLIENT REPLY
             OFF and NO-EVICT, needs AUTH again under a password: as redis-server.
  function   FUNCTION LIST/STATS/DUMP/FLUSH/KILL/DELETE/HELP, CONFIG REWRITE, CONFIG
             GET/SET protected-mode, SELECT, DBSIZE, FLUSHDB/FLUSHALL [ASYNC|SYNC]: exact.
  command    COMMAND COUNT, LIST, INFO and DOCS agree with each other for every command
             and subcommand, and COMMAND INFO's name, arity, flags, keys and ACL
             categories with redis-server's.
  info       INFO's sections are named and ordered as redis-server's, each with fields
             of Redis's names; INFO default/all/everything and by section.
  protected  protected mode, in a network namespace of its own with an address the test
             adds (skipped without the right to make one): a client from a non-loopback
             address gets redis-server's -DENIED text and is closed, until CONFIG SET
             protected-mode no or a password; --protected-mode no.

Exits 0 (pass), 1 (fail), 77 (skip: no redis-server, or no network namespace).
"""
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import (SKIP, Conn, Failure, check, conn_on_lcore, free_port, log,  # noqa: E402
                     on_shard, resp, wait_port)

PASS = "s3cr3t-pw"


class Both:
    """One client of cr-kv (on lcore @lc) and one of redis-server, sent the same."""

    def __init__(self, o, r, lc=0):
        self.a = conn_on_lcore(o.kv.port, lc % o.lcores)
        self.b = Conn(r.port)
        self.bad = []

    def same(self, *args):
        x, y = self.a.cmd(*args), self.b.cmd(*args)
        if x != y:
            self.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
        return x, y

    def close(self):
        self.a.close()
        self.b.close()


def done(clients, what):
    bad = sum((c.bad for c in clients), [])
    check(not bad, "%s: %d differences:\n  %s" % (what, len(bad), "\n  ".join(bad[:20])))
    for c in clients:
        c.close()


def help_subset(both, cmd):
    """cr-kv's HELP lines are redis-server's, in its order, less the subcommands it lacks
    (each with the lines that explain it)."""
    x, y = both.a.cmd(cmd, "HELP"), both.b.cmd(cmd, "HELP")
    ours, theirs = x.split(b"\r\n")[1:], y.split(b"\r\n")[1:]
    it = iter(theirs)
    if not all(any(ln == t for t in it) for ln in ours):
        both.bad.append("%s HELP: cr-kv %r not within redis %r" % (cmd, x, y))


def bulk(b):
    """A bulk string's text, or a RESP3 verbatim string's."""
    check(b[:1] in (b"$", b"="), "not a bulk: %r" % b[:80])
    s = b[b.index(b"\r\n") + 2:-2].decode()
    return s[4:] if b[:1] == b"=" else s


def lines(b):
    """CLIENT LIST's lines, as dicts (and the field names in order)."""
    out = []
    for ln in bulk(b).split("\n"):
        if ln:
            kv = [f.split("=", 1) for f in ln.split(" ")]
            out.append(({k: v for k, v in kv}, [k for k, _ in kv]))
    return out


def client_id(c):
    return int(c.cmd("CLIENT", "ID")[1:-2])


# ---- clients ----

def t_clients(o):
    r = o.redis()
    c = [conn_on_lcore(o.kv.port, lc % o.lcores) for lc in range(4)]
    ids = [client_id(x) for x in c]
    check(c[0].cmd("CLIENT", "SETNAME", "first") == b"+OK\r\n", "SETNAME")
    c[1].cmd("HELLO", "3")
    c[1].send(resp("SUBSCRIBE", "ch"))
    c[1].replies(1)
    sub = c[1]
    c[2].cmd("MULTI"), c[2].cmd("GET", "a"), c[2].cmd("GET", "b")
    c[3].cmd("CLIENT", "NO-EVICT", "on")
    blocked = conn_on_lcore(o.kv.port, o.lcores - 1)
    bid = client_id(blocked)
    blocked.send(resp("BLPOP", "nothing", "0"))
    time.sleep(0.2)
    theirs = lines(Conn(r.port).cmd("CLIENT", "LIST"))[0][1]
    for asker in (c[0], c[3]):  # (on each lcore, with 2)
        got = lines(asker.cmd("CLIENT", "LIST"))
        gid = [int(d["id"]) for d, _ in got]
        check(gid == sorted(gid), "not by id: %r" % gid)
        check(set(ids + [bid]) <= set(gid), "ids %r not all in %r" % (ids + [bid], gid))
        for d, names in got:
            check(names == theirs + ["lcore"], "fields %r, redis %r" % (names, theirs))
        by = {int(d["id"]): d for d, _ in got}
        check(by[ids[0]]["name"] == "first", "name: %r" % by[ids[0]])
        check(by[ids[1]]["resp"] == "3" and by[ids[1]]["flags"] == "P" and
              by[ids[1]]["sub"] == "1" and by[ids[1]]["cmd"] == "subscribe", "sub: %r" % by[ids[1]])
        check(by[ids[2]]["flags"] == "x" and by[ids[2]]["multi"] == "2", "multi: %r" % by[ids[2]])
        check(by[ids[3]]["flags"] == "e", "no-evict: %r" % by[ids[3]])
        check(by[bid]["flags"] == "b" and by[bid]["cmd"] == "blpop", "blocked: %r" % by[bid])
        me = by[client_id(asker)]
        check(me["cmd"] == "client|list", "cmd of the asker: %r" % me)
        if o.lcores > 1:
            check({d["lcore"] for d, _ in got} == {"0", "1"}, "lcores: %r" % got)
    ra, rb = Conn(r.port), Conn(r.port)  # cmd= after each, as redis-server's
    rid = str(client_id(ra))
    for args in (("NOSUCH",), ("CLIENT", "NOSUCH"), ("GET", "k"), ("CONFIG", "GET", "port")):
        c[3].cmd(*args)
        ra.cmd(*args)
        me = lines(c[0].cmd("CLIENT", "LIST", "ID", str(ids[3])))[0][0]
        want = lines(rb.cmd("CLIENT", "LIST", "ID", rid))[0][0]
        check(me["cmd"] == want["cmd"], "cmd= after %r: %r, redis %r" % (args, me["cmd"],
                                                                       want["cmd"]))
    x = lines(c[0].cmd("CLIENT", "LIST", "TYPE", "pubsub"))
    check([int(d["id"]) for d, _ in x] == [ids[1]], "TYPE pubsub: %r" % x)
    x = lines(c[0].cmd("CLIENT", "LIST", "ID", str(ids[3]), "999999", str(ids[0])))
    check([int(d["id"]) for d, _ in x] == [ids[3], ids[0]], "ID: %r" % x)
    check(lines(c[0].cmd("CLIENT", "LIST", "TYPE", "master")) == [], "TYPE master")
    b = Both(o, r)
    for args in (("CLIENT", "LIST", "TYPE", "bad"), ("CLIENT", "LIST", "ID", "x"),
                 ("CLIENT", "LIST", "foo"), ("CLIENT", "LIST", "TYPE"),
                 ("CLIENT", "LIST", "ID", "999999"), ("CLIENT", "NO-EVICT", "maybe"),
                 ("CLIENT", "NO-EVICT"), ("CLIENT", "NO-EVICT", "off"), ("CLIENT", "REPLY", "x"),
                 ("CLIENT", "INFO", "x"), ("CLIENT", "FOO")):
        b.same(*args)
    help_subset(b, "CLIENT")
    x, y = b.a.cmd("CLIENT", "INFO"), b.b.cmd("CLIENT", "INFO")
    check(lines(x)[0][1] == lines(y)[0][1] + ["lcore"], "CLIENT INFO %r, redis %r" % (x, y))
    done([b], "CLIENT errors")
    # redis-py and redis-cli read it
    try:
        sys.path.append("/usr/lib/python3/dist-packages")
        import redis
        cl = redis.Redis(port=o.kv.port, socket_timeout=10).client_list()
        check({int(x["id"]) for x in cl} >= set(ids), "redis-py client_list: %r" % cl)
        check(any(x.get("name") == "first" for x in cl), "redis-py: no name: %r" % cl)
    except ImportError:
        log("(python3-redis missing: redis-py not checked)")
    p = subprocess.run(["redis-cli", "-p", str(o.kv.port), "CLIENT", "LIST"],
                       capture_output=True, timeout=10)
    check(p.stdout.count(b"id=") >= len(ids), "redis-cli CLIENT LIST: %r" % p.stdout)
    log("clients: CLIENT LIST from every lcore lists all %d clients" % (len(ids) + 3))
    del sub


# ---- kill ----

def closed(c, what):
    try:
        got = c.closed(5)
    except Failure:
        raise Failure("%s: not closed" % what)
    return got


def t_kill(o):
    r = o.redis()
    b = Both(o, r)
    for args in (("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "999999"),
                 ("CLIENT", "KILL", "ID", "x"), ("CLIENT", "KILL", "ID", "0"),
                 ("CLIENT", "KILL", "ID", "-1"), ("CLIENT", "KILL", "foo", "bar"),
                 ("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes"),
                 ("CLIENT", "KILL", "USER", "nobody"),
                 ("CLIENT", "KILL", "USER", "default", "SKIPME", "maybe"),
                 ("CLIENT", "KILL", "LADDR", "1.1.1.1:1"), ("CLIENT", "KILL", "TYPE", "bad"),
                 ("CLIENT", "KILL", "TYPE", "master"), ("CLIENT", "KILL", "MAXAGE", "10"),
                 ("CLIENT", "KILL", "ID"), ("CLIENT", "KILL", "ID", "5", "SKIPME"),
                 ("CLIENT", "KILL")):
        b.same(*args)
    done([b], "CLIENT KILL errors")
    me = conn_on_lcore(o.kv.port, 0)
    far = o.lcores - 1
    # by ID, on the other lcore
    v = conn_on_lcore(o.kv.port, far)
    check(me.cmd("CLIENT", "KILL", "ID", str(client_id(v))) == b":1\r\n", "KILL ID")
    check(closed(v, "KILL ID") == b"", "KILL ID: the victim got bytes")
    # by ADDR, new and old forms
    for old in (False, True):
        v = conn_on_lcore(o.kv.port, far)
        addr = "%s:%d" % v.s.getsockname()
        x = me.cmd("CLIENT", "KILL", addr) if old else me.cmd("CLIENT", "KILL", "ADDR", addr)
        check(x == (b"+OK\r\n" if old else b":1\r\n"), "KILL ADDR (old %s): %r" % (old, x))
        closed(v, "KILL ADDR")
    # LADDR: every client of the server's address but the asker (SKIPME yes)
    vs = [conn_on_lcore(o.kv.port, lc % o.lcores) for lc in range(3)]
    laddr = "%s:%d" % me.s.getpeername()
    x = me.cmd("CLIENT", "KILL", "LADDR", laddr)
    check(x == b":3\r\n", "KILL LADDR: %r" % x)
    for v in vs:
        closed(v, "KILL LADDR")
    # TYPE pubsub, USER default
    s = conn_on_lcore(o.kv.port, far)
    s.send(resp("SUBSCRIBE", "ch"))
    s.replies(1)
    n = conn_on_lcore(o.kv.port, far)
    check(me.cmd("CLIENT", "KILL", "TYPE", "pubsub") == b":1\r\n", "KILL TYPE pubsub")
    closed(s, "KILL TYPE pubsub")
    check(n.cmd("PING") == b"+PONG\r\n", "a normal client survives")
    check(me.cmd("CLIENT", "KILL", "USER", "default") == b":1\r\n", "KILL USER default")
    closed(n, "KILL USER")
    # itself: the old form, and SKIPME no: the reply first, then closed
    x = me.cmd("CLIENT", "KILL", "ID", str(client_id(me)))
    check(x == b":0\r\n", "SKIPME yes by default: %r" % x)
    me.send(resp("CLIENT", "KILL", "ID", str(client_id(me)), "SKIPME", "no") + resp("PING"))
    check(closed(me, "SKIPME no") == b":1\r\n", "killed itself: reply then close")
    me = conn_on_lcore(o.kv.port, far)
    me.send(resp("CLIENT", "KILL", "%s:%d" % me.s.getsockname()))
    check(closed(me, "old form on itself") == b"+OK\r\n", "old form on itself")
    # redis-server does the same for the self-kills
    y = Conn(r.port)
    y.send(resp("CLIENT", "KILL", "ID", str(client_id(y)), "SKIPME", "no") + resp("PING"))
    check(y.closed(5) == b":1\r\n", "redis: SKIPME no")
    c = conn_on_lcore(o.kv.port, 0)
    check(c.cmd("PING") == b"+PONG\r\n", "the server serves on")
    log("kill: by ID, ADDR, LADDR, TYPE, USER and itself, across %d lcore(s)" % o.lcores)


# ---- killstress ----

def t_killstress(o, seed=18, n=16):
    """Seeded: @n clients on every lcore pipeline commands over both shards (parts in
    flight on the other lcore, a blocked pop, a subscription) while another client kills
    them one by one by id at random moments: each KILL counts exactly 1, a second 0; every
    victim sees its connection end; no client is left; the server serves on."""
    import random
    import threading
    rnd = random.Random(seed)
    tags = [on_shard("t", s, o.lcores) if o.lcores > 1 else "t" for s in range(o.lcores)]
    victims = [conn_on_lcore(o.kv.port, i % o.lcores) for i in range(n)]
    ids = [client_id(v) for v in victims]
    ended = [False] * n

    def work(i, v):
        r = random.Random(seed * 1000 + i)
        try:
            v.s.settimeout(10)
            while True:
                batch = []
                for _ in range(r.randint(1, 40)):
                    t = r.choice(tags)
                    batch.append(r.choice([
                        resp("SET", "k%d{%s}" % (r.randint(0, 9), t), "v"),
                        resp("GET", "k%d{%s}" % (r.randint(0, 9), t)),
                        resp("MSET", "a{%s}" % tags[0], "1", "b{%s}" % tags[-1], "2"),
                        resp("SUNIONSTORE", "d{%s}" % t, "s{%s}" % tags[0], "s{%s}" % tags[-1]),
                        resp("BLPOP", "nothing{%s}" % t, "0.05"),
                        resp("CLIENT", "LIST")]))
                if i % 5 == 4:
                    batch.append(resp("SUBSCRIBE", "ch%d" % i))
                v.s.sendall(b"".join(batch))
                if not v.s.recv(1 << 16):
                    break
        except (OSError, socket.timeout):
            pass
        ended[i] = True

    threads = [threading.Thread(target=work, args=(i, v), daemon=True)
               for i, v in enumerate(victims)]
    for t in threads:
        t.start()
    killer = conn_on_lcore(o.kv.port, 0)
    order = list(range(n))
    rnd.shuffle(order)
    for i in order:
        time.sleep(rnd.uniform(0, 0.03))
        x = killer.cmd("CLIENT", "KILL", "ID", str(ids[i]))
        check(x == b":1\r\n", "KILL ID %d (victim %d): %r" % (ids[i], i, x))
        x = killer.cmd("CLIENT", "KILL", "ID", str(ids[i]))
        check(x == b":0\r\n", "KILL ID %d again: %r" % (ids[i], x))
    for t in threads:
        t.join(15)
    check(all(ended), "victims whose connection did not end: %r"
          % [i for i in range(n) if not ended[i]])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = [d for d, _ in lines(killer.cmd("CLIENT", "LIST"))]
        if len(left) == 1:
            break
        time.sleep(0.05)
    check(len(left) == 1 and int(left[0]["id"]) == client_id(killer), "left: %r" % left)
    check(killer.cmd("PUBSUB", "NUMSUB", "ch4") == b"*2\r\n$3\r\nch4\r\n:0\r\n",
          "a killed subscriber's subscription is gone")
    check(killer.cmd("SET", "x", "1") == b"+OK\r\n", "serves on")
    log("killstress: %d clients killed across %d lcore(s) while busy, each once" % (n, o.lcores))


# ---- reply ----

def t_reply(o):
    r = o.redis()
    tags = [on_shard("t", s, o.lcores) if o.lcores > 1 else "t" for s in range(o.lcores)]
    seq = [("SET", "a{%s}" % tags[0], "1")]
    for t in tags:
        seq += [("CLIENT", "REPLY", "SKIP"), ("GET", "a{%s}" % t), ("INCR", "n{%s}" % t),
                ("CLIENT", "REPLY", "OFF"), ("INCR", "n{%s}" % t), ("GET", "nope"),
                ("MGET", "a{%s}" % tags[0], "n{%s}" % tags[-1]), ("BADCMD",),
                ("CLIENT", "REPLY", "SKIP"), ("PING",), ("CLIENT", "REPLY", "ON"),
                ("GET", "n{%s}" % t), ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "SKIP"),
                ("PING", "x"), ("PING", "y"), ("CLIENT", "REPLY", "SKIP"),
                ("CLIENT", "REPLY", "ON"), ("PING", "z"),
                ("MULTI",), ("CLIENT", "REPLY", "SKIP"), ("INCR", "n{%s}" % t), ("EXEC",),
                ("CLIENT", "REPLY", "OFF"), ("MULTI",), ("INCR", "n{%s}" % t), ("EXEC",),
                ("CLIENT", "REPLY", "ON"), ("GET", "n{%s}" % t),
                ("CLIENT", "REPLY", "SKIP"), ("SUNIONSTORE", "d{%s}" % t, "x{%s}" % tags[0],
                                                "y{%s}" % tags[-1]), ("DBSIZE",)]
    for lc in range(o.lcores):
        for pipelined in (False, True):
            a, b = conn_on_lcore(o.kv.port, lc), Conn(r.port)
            for c in (a, b):
                c.cmd("FLUSHALL")
                data = b"".join(resp(*x) for x in seq)
                if pipelined:
                    c.send(data)
                else:
                    for x in seq:
                        c.send(resp(*x))
                        time.sleep(0.002)
                c.send(resp("PING", "end"))
            got = []
            for c in (a, b):
                buf = b""
                deadline = time.monotonic() + 10
                while not buf.endswith(b"$3\r\nend\r\n") and time.monotonic() < deadline:
                    c.s.settimeout(1)
                    try:
                        d = c.s.recv(65536)
                    except socket.timeout:
                        continue
                    if not d:
                        break
                    buf += d
                got.append(buf)
            check(got[0] == got[1], "CLIENT REPLY (lcore %d, pipelined %s): cr-kv %r, redis %r"
                  % (lc, pipelined, got[0], got[1]))
            a.close()
            b.close()
    log("reply: CLIENT REPLY OFF/SKIP/ON as redis-server's, keys on %d shard(s)" % o.lcores)


# ---- noevict ----

def t_noevict(o):
    limit = "1mb"
    o.restart(("--maxmemory-clients", limit))
    r = o.redis(("--maxmemory-clients", limit))
    for port in (o.kv.port, r.port):
        keep = Conn(port) if port == r.port else conn_on_lcore(port, 0)
        other = Conn(port) if port == r.port else conn_on_lcore(port, o.lcores - 1)
        check(keep.cmd("CLIENT", "NO-EVICT", "on") == b"+OK\r\n", "NO-EVICT on")
        check(other.cmd("PING") == b"+PONG\r\n", "PING")
        other.send(b"*2\r\n$4\r\nECHO\r\n$400000\r\n" + b"x" * 300000)  # 0.3 MB waiting
        time.sleep(0.3)
        keep.send(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n" + b"y" * 1500000)  # 1.5 MB: over 1mb
        closed(other, "the client without NO-EVICT (port %d)" % port)
        keep.send(b"y" * 1500000 + b"\r\n")
        x = keep.replies(1, 20)[0]
        check(x.startswith(b"$3000000\r\n"), "the NO-EVICT client: %r" % x[:40])
        keep.close()
    log("noevict: the NO-EVICT client kept, the other evicted, as redis-server")


# ---- reset ----

def t_reset(o):
    r = o.redis()
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in cs:
        for args in (("CLIENT", "SETNAME", "n"), ("SET", "w", "1"), ("WATCH", "w"), ("MULTI",),
                     ("INCR", "w"), ("RESET",), ("EXEC",), ("CLIENT", "GETNAME"),
                     ("CLIENT", "NO-EVICT", "on"), ("SUBSCRIBE", "a"), ("GET", "w"),
                     ("RESET",), ("GET", "w"), ("PUBSUB", "NUMSUB", "a"), ("RESET", "x")):
            c.same(*args)
        c.a.send(resp("CLIENT", "REPLY", "OFF") + resp("PING") + resp("RESET") + resp("PING"))
        c.b.send(resp("CLIENT", "REPLY", "OFF") + resp("PING") + resp("RESET") + resp("PING"))
        x, y = c.a.replies(2), c.b.replies(2)
        check(x == y == [b"+RESET\r\n", b"+PONG\r\n"], "REPLY OFF then RESET: %r, %r" % (x, y))
        # a WATCH that RESET forgot does not fail the next EXEC
        for args in (("WATCH", "w"), ("RESET",), ("MULTI",), ("GET", "w"), ("EXEC",)):
            c.same(*args)
    done(cs, "reset")
    o.restart(("--requirepass", PASS))
    r = o.redis(("--requirepass", PASS))
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in cs:
        for args in (("RESET",), ("AUTH", PASS), ("GET", "k"), ("RESET",), ("GET", "k"),
                     ("HELLO", "2", "AUTH", "default", PASS, "SETNAME", "x"), ("RESET",),
                     ("CLIENT", "GETNAME"), ("AUTH", PASS), ("CLIENT", "GETNAME")):
            x, y = c.a.cmd(*args), c.b.cmd(*args)
            x, y = [re.sub(rb"\$2\r\nid\r\n:\d+", b"id", v) for v in (x, y)]
            if x != y:
                c.bad.append("%r: cr-kv %r, redis %r" % (args, x, y))
    done(cs, "reset with a password")
    log("reset: as redis-server's, on %d lcore(s)" % o.lcores)


# ---- function and the rest ----

def t_function(o):
    r = o.redis(("--protected-mode", "yes"))
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in cs:
        for args in (("FUNCTION", "LIST"), ("FUNCTION", "LIST", "WITHCODE"),
                     ("FUNCTION", "LIST", "LIBRARYNAME", "x", "WITHCODE"),
                     ("FUNCTION", "LIST", "LIBRARYNAME"), ("FUNCTION", "LIST", "foo"),
                     ("FUNCTION", "LIST", "WITHCODE", "WITHCODE"), ("FUNCTION", "STATS"),
                     ("FUNCTION", "STATS", "x"), ("FUNCTION", "DUMP"), ("FUNCTION", "FLUSH"),
                     ("FUNCTION", "FLUSH", "ASYNC"), ("FUNCTION", "FLUSH", "sync"),
                     ("FUNCTION", "FLUSH", "x"), ("FUNCTION", "FLUSH", "a", "b"),
                     ("FUNCTION", "KILL"), ("FUNCTION", "DELETE", "lib"),
                     ("FUNCTION",), ("CONFIG", "REWRITE"), ("CONFIG", "REWRITE", "x"),
                     ("CONFIG", "GET", "protected-mode"),
                     ("CONFIG", "SET", "protected-mode", "maybe"),
                     ("CONFIG", "SET", "protected-mode", "no"), ("CONFIG", "GET", "protected-mode"),
                     ("CONFIG", "SET", "protected-mode", "yes"), ("SELECT", "0"), ("SELECT", "1"),
                     ("SELECT", "x"), ("SET", "k", "v"), ("DBSIZE",), ("FLUSHDB", "ASYNC"),
                     ("DBSIZE",), ("SET", "k", "v"), ("FLUSHALL", "SYNC"), ("DBSIZE",),
                     ("FLUSHALL", "x"), ("FLUSHDB", "ASYNC", "x"), ("FLUSHALL", "ASYNC"),
                     ("ECHO", "x"), ("PING", "a", "b")):
            c.same(*args)
        help_subset(c, "FUNCTION")
    done(cs, "function")
    # redis-py (RESP2) reads the same from both
    try:
        sys.path.append("/usr/lib/python3/dist-packages")
        import redis
    except ImportError:
        redis = None
        log("(python3-redis missing: redis-py not checked)")
    if redis is not None:
        got = []
        for port in (o.kv.port, r.port):
            py = redis.Redis(port=port, socket_timeout=10)
            other = redis.Redis(port=port, socket_timeout=10)
            other.ping()
            got.append([py.function_list(), py.function_stats(), py.function_dump(),
                        py.function_flush(), py.client_no_evict("on"),
                        py.client_kill_filter(_id=other.client_id()),
                        py.client_kill_filter(_id=other.client_id()), py.config_get("maxclients"),
                        sorted(py.client_info().keys() - {"lcore"})])
        check(got[0] == got[1], "redis-py: cr-kv %r, redis %r" % tuple(got))
    log("function: FUNCTION, CONFIG REWRITE, protected-mode, SELECT, FLUSH* as redis-server")


# ---- command ----

def parse(b, i=0):
    nl = b.index(b"\r\n", i)
    t, line = b[i:i + 1], b[i + 1:nl]
    if t in (b"+", b"-", b":"):
        return (int(line) if t == b":" else line), nl + 2
    n = int(line)
    if t == b"$":
        return (None if n < 0 else b[nl + 2:nl + 2 + n]), (nl + 2 if n < 0 else nl + 4 + n)
    if n < 0:
        return None, nl + 2
    j, items = nl + 2, []
    for _ in range(n):
        v, j = parse(b, j)
        items.append(v)
    return items, j


def t_command(o):
    r = o.redis()
    a, b = Conn(o.kv.port), Conn(r.port)
    names = [x.decode() for x in parse(a.cmd("COMMAND", "LIST"))[0]]
    top = [n for n in names if "|" not in n]
    check(parse(a.cmd("COMMAND", "COUNT"))[0] == len(top), "COUNT != LIST's commands")
    everything = parse(a.cmd("COMMAND"))[0]
    check(sorted(x[0].decode() for x in everything) == sorted(top), "COMMAND != LIST")
    docs = parse(a.cmd("COMMAND", "DOCS"))[0]
    check(sorted(x.decode() for x in docs[0::2]) == sorted(top), "DOCS != LIST")
    bad = []
    for n in names:
        ours = parse(a.cmd("COMMAND", "INFO", n))[0][0]
        theirs = parse(b.cmd("COMMAND", "INFO", n))[0][0]
        check(ours is not None, "COMMAND INFO %s: nil" % n)
        d = parse(a.cmd("COMMAND", "DOCS", n))[0]
        check(len(d) == 2 and d[0].decode() == n, "COMMAND DOCS %s: %r" % (n, d))
        if theirs is None:
            bad.append("%s: redis-server has no such command" % n)
        elif ours[:7] != theirs[:7]:  # name, arity, flags, keys, ACL categories
            bad.append("%s: cr-kv %r, redis %r" % (n, ours[:7], theirs[:7]))
        if "|" not in n:
            subs = sorted(s[0] for s in ours[9])
            check(subs == sorted(x.encode() for x in names if x.startswith(n + "|")),
                  "%s: subcommands %r" % (n, subs))
    check(not bad, "COMMAND INFO: %d differences:\n  %s" % (len(bad), "\n  ".join(bad)))
    for cat in ("connection", "keyspace", "read", "write", "fast", "slow", "admin",
                "dangerous", "pubsub", "string", "hash", "list", "set", "sortedset",
                "blocking", "transaction", "scripting", "nosuch"):
        x = set(parse(a.cmd("COMMAND", "LIST", "FILTERBY", "ACLCAT", cat))[0])
        y = set(parse(b.cmd("COMMAND", "LIST", "FILTERBY", "ACLCAT", cat))[0])
        check(x == y & set(n.encode() for n in names),
              "ACLCAT %s: cr-kv %r, redis's (of cr-kv's) %r" % (cat, sorted(x), sorted(y)))
    for args in (("COMMAND", "LIST", "FILTERBY", "PATTERN", "client*"),
                 ("COMMAND", "LIST", "FILTERBY", "MODULE", "x"),
                 ("COMMAND", "LIST", "FILTERBY", "x", "y"), ("COMMAND", "LIST", "x"),
                 ("COMMAND", "INFO", "get", "nosuch", "config|get"),
                 ("COMMAND", "DOCS", "nosuch"), ("COMMAND", "COUNT", "x")):
        x, y = a.cmd(*args), b.cmd(*args)
        if args[-1] == "client*":  # redis has subcommands cr-kv does not: cr-kv's a subset
            check(set(parse(x)[0]) <= set(parse(y)[0]), "%r: %r" % (args, x))
        elif args[1] == "INFO":
            check(parse(x)[0][1] is None and parse(x)[0][0][:7] == parse(y)[0][0][:7] and
                  parse(x)[0][2][:7] == parse(y)[0][2][:7], "%r: %r" % (args, x))
        else:
            check(x == y, "%r: cr-kv %r, redis %r" % (args, x, y))
    log("command: %d commands and subcommands consistent, COMMAND INFO as redis-server's"
        % len(names))


# ---- info ----

def sections(b):
    out, cur = [], None
    for ln in bulk(b).split("\r\n"):
        if ln.startswith("# "):
            cur = (ln[2:], [])
            out.append(cur)
        elif ln and cur is not None:
            cur[1].append(ln.split(":", 1)[0])
    return out


def t_info(o):
    r = o.redis()
    a, b = Conn(o.kv.port), Conn(r.port)
    for args in (("INFO",), ("INFO", "default"), ("INFO", "all"), ("INFO", "everything"),
                 ("INFO", "server"), ("INFO", "persistence", "cpu"), ("INFO", "replication"),
                 ("INFO", "errorstats"), ("INFO", "modules"), ("INFO", "cluster"),
                 ("INFO", "keyspace", "commandstats"), ("INFO", "nosuch")):
        ours, theirs = sections(a.cmd(*args)), sections(b.cmd(*args))
        # not in cr-kv: latency percentiles per command (a documented difference)
        theirs = [(s, f) for s, f in theirs if s != "Latencystats"]
        check([s for s, _ in ours] == [s for s, _ in theirs],
              "%r sections: cr-kv %r, redis %r" % (args, [s for s, _ in ours],
                                                   [s for s, _ in theirs]))
        for (s, fo), (_, ft) in zip(ours, theirs):
            extra = [f for f in fo if f not in ft]
            allowed = {"server_name", "lcores", "cross_lcore_requests", "protocol_errors",
                       "client_query_buffer_limit_disconnections",  # (Redis 7.2's)
                       "client_output_buffer_limit_disconnections",
                       "cross_shard_locks_granted", "commands_waited_for_locks"}
            check(not [f for f in extra if f not in allowed and not f.startswith(("cmdstat_", "errorstat_", "db"))],
                  "%r section %s: fields redis does not have: %r" % (args, s, extra))
    # errorstats: the same errors from clients on every lcore count the same
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    cs[0].same("CONFIG", "RESETSTAT")
    for c in cs:
        for args in (("NOSUCH",), ("GET",), ("SET", "k", "v"), ("LPUSH", "k", "x"),
                     ("INCR", "k"), ("HELLO", "4"), ("AUTH", "x"), ("AUTH", "u", "p"),
                     ("MULTI",), ("LPUSH", "k", "y"), ("NOSUCH",), ("EXEC",), ("MULTI",),
                     ("INCR", "k"), ("LPUSH", "k", "z"), ("EXEC",), ("FUNCTION", "KILL"),
                     ("CLIENT", "KILL", "ID", "0"), ("SUNIONSTORE", "d", "k", "k2")):
            c.same(*args)
    x = [dict(sections(c.a.cmd("INFO", "errorstats", "stats"))) for c in cs]
    ours = bulk(cs[0].a.cmd("INFO", "errorstats"))
    theirs = bulk(cs[0].b.cmd("INFO", "errorstats"))
    check(ours == theirs, "errorstats: cr-kv %r, redis %r" % (ours, theirs))
    tot = [re.search(r"total_error_replies:(\d+)", bulk(v.cmd("INFO", "stats"))).group(1)
           for v in (cs[0].a, cs[0].b)]
    check(tot[0] == tot[1], "total_error_replies: cr-kv %s, redis %s" % tuple(tot))
    done(cs, "errorstats")
    del x
    log("info: INFO's sections as redis-server's; errorstats the same after the same errors")


# ---- protected ----

def t_protected(o):
    """Re-run inside a network namespace of its own (unshare -n), with 10.213.0.1 added to
    its loopback device: the only non-loopback address used, and it exists only there."""
    if os.environ.get("KV_ADMIN_NETNS") == "1":
        return protected_inner(o)
    if os.geteuid() != 0 or subprocess.run(["unshare", "-n", "true"],
                                           capture_output=True).returncode != 0:
        log("SKIP: cannot make a network namespace (unshare -n)")
        sys.exit(SKIP)
    env = dict(os.environ, KV_ADMIN_NETNS="1")
    argv = [sys.executable] + sys.argv
    p = subprocess.run(["unshare", "-n", "sh", "-c",
                        'ip link set lo up && ip addr add 10.213.0.1/8 dev lo && exec "$@"', "sh"]
                       + argv, env=env, timeout=120)
    check(p.returncode == 0, "the test inside the namespace: exit %d" % p.returncode)


EXT = "10.213.0.1"


def ext_conn(port):
    s = socket.socket()
    s.settimeout(10)
    s.bind((EXT, 0))
    s.connect((EXT, port))
    c = Conn.__new__(Conn)
    c.s, c.buf = s, b""
    return c


def start_kv(o, extra=()):
    port = free_port()
    args = [o.exe, "-l", "0" if o.lcores == 1 else "0-%d" % (o.lcores - 1), "--io-driver",
            o.driver, "--listen", "0.0.0.0:%d" % port, "--telemetry", "off"] + list(extra)
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_port(port, p)
    return p, port


def stop_kv(p):
    p.terminate()
    out, err = p.communicate(timeout=15)
    check(p.returncode == 0, "cr-kv exited %s: %s" % (p.returncode, err))


def rejected(port):
    x = bulk(Conn(port).cmd("INFO", "stats"))
    return int(re.search(r"rejected_connections:(\d+)", x).group(1))


def protected_inner(o):
    kv_test.need("redis-server")
    r = o.redis(("--bind", "0.0.0.0", "--protected-mode", "yes"))
    p, port = start_kv(o)
    try:
        for srv in (port, r.port):  # loopback clients are served
            check(Conn(srv).cmd("PING") == b"+PONG\r\n", "loopback PING")
        before = [rejected(port), rejected(r.port)]
        texts = []
        for lc in range(2 * o.lcores):  # connections land on every lcore
            texts.append((ext_conn(port).closed(5), ext_conn(r.port).closed(5)))
        for ours, theirs in texts:
            check(theirs.startswith(b"-DENIED Redis is running in protected mode"),
                  "redis: %r" % theirs[:80])
            check(ours == theirs, "DENIED: cr-kv %r, redis %r" % (ours, theirs))
        after = [rejected(port), rejected(r.port)]
        check([x - y for x, y in zip(after, before)] == [len(texts)] * 2,
              "rejected_connections: %r -> %r" % (before, after))
        # off: served; a password: served (and asked for it)
        for srv in (port, r.port):
            check(Conn(srv).cmd("CONFIG", "SET", "protected-mode", "no") == b"+OK\r\n", "off")
        for srv in (port, r.port):
            check(ext_conn(srv).cmd("PING") == b"+PONG\r\n", "protected-mode no: PING")
        for srv in (port, r.port):
            c = Conn(srv)
            check(c.cmd("CONFIG", "SET", "protected-mode", "yes") == b"+OK\r\n", "on")
            check(c.cmd("CONFIG", "SET", "requirepass", PASS) == b"+OK\r\n", "requirepass")
        for srv in (port, r.port):
            c = ext_conn(srv)
            check(c.cmd("PING") == b"-NOAUTH Authentication required.\r\n", "with a password")
            check(c.cmd("AUTH", PASS) == b"+OK\r\n", "AUTH")
            c = Conn(srv)
            c.cmd("AUTH", PASS)
            check(c.cmd("CONFIG", "SET", "requirepass", "") == b"+OK\r\n", "no password")
        x, y = ext_conn(port).closed(5), ext_conn(r.port).closed(5)
        check(x == y and x.startswith(b"-DENIED"), "denied again: %r, %r" % (x, y))
    finally:
        stop_kv(p)
    p, port = start_kv(o, ("--protected-mode", "no"))
    try:
        check(ext_conn(port).cmd("PING") == b"+PONG\r\n", "--protected-mode no")
        check(Conn(port).cmd("CONFIG", "GET", "protected-mode") ==
              b"*2\r\n$14\r\nprotected-mode\r\n$2\r\nno\r\n", "CONFIG GET protected-mode")
    finally:
        stop_kv(p)
    log("protected: -DENIED as redis-server's for a client from %s, on %d lcore(s)"
        % (EXT, o.lcores))


TESTS = {"clients": t_clients, "kill": t_kill, "killstress": t_killstress, "reply": t_reply, "noevict": t_noevict,
         "reset": t_reset, "function": t_function, "command": t_command, "info": t_info,
         "protected": t_protected}

if __name__ == "__main__":
    sys.exit(kv_test.main(TESTS, __doc__))
