#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""AUTH, --requirepass, CONFIG SET requirepass and INFO commandstats of app/cr-kv, against redis-server 7.0
(the oracle: the same commands to both, replies compared byte for byte), on loopback.

  kv_auth_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

  nopass     no password: AUTH's errors (no password configured, WRONGPASS for another
             user, syntax, arity), AUTH default <any>, HELLO 2 AUTH, CONFIG GET
             requirepass.
  requirepass  started with --requirepass: NOAUTH for every command but AUTH, HELLO and
             QUIT (an unknown command and a wrong arity answer first, as in Redis),
             HELLO without AUTH refused, WRONGPASS, AUTH with and without the user,
             HELLO ... AUTH ... SETNAME; on every lcore; AUTH's password redacted in
             the slow log.
  configset  CONFIG SET requirepass from a client of one lcore: new clients of every
             lcore need it, clients already authenticated keep going, the old password
             is refused, CONFIG GET shows it; "" turns it off again.
  cmdstats   INFO commandstats after the same commands (errors, rejections, EXEC) on
             both, clients on every lcore: the same calls, rejected_calls, failed_calls;
             CONFIG RESETSTAT empties it; shown by INFO all/everything/commandstats only.

Exits 0 (pass), 1 (fail), 77 (skip: no redis-server).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import Conn, check, conn_on_lcore, log  # noqa: E402

PASS = "s3cr3t-pw"


class Both:
    """One client of cr-kv (on lcore @lc) and one of redis-server, sent the same."""

    def __init__(self, o, r, lc=0):
        self.a, self.b = conn_on_lcore(o.kv.port, lc), Conn(r.port)
        self.bad = []

    def same(self, *args, mode="exact"):
        x, y = self.a.cmd(*args), self.b.cmd(*args)
        if not kv_test.compare(mode, x, y):
            self.bad.append("%r: cr-kv %r, redis %r" % (args, x[:300], y[:300]))
        return x

    def close(self):
        self.a.close()
        self.b.close()


def hello_shape(x):
    """HELLO's reply without what differs between servers (version, id)."""
    items = kv_test.parse_array(x)
    return [v for i, v in enumerate(items) if i not in (3, 7)]


def done(clients, what):
    bad = sum((c.bad for c in clients), [])
    check(not bad, "%s: %d differences:\n  %s" % (what, len(bad), "\n  ".join(bad[:20])))
    for c in clients:
        c.close()


def t_nopass(o):
    r = o.redis()
    c = Both(o, r)
    for args in (("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "bob", "x"),
                 ("AUTH", "a", "b", "c"), ("AUTH",), ("auth", "default", ""),
                 ("CONFIG", "GET", "requirepass"), ("GET", "k"), ("HELLO", "2", "AUTH", "bob", "x"),
                 ("MULTI",), ("AUTH", "x"), ("AUTH", "default", "y"), ("EXEC",)):
        c.same(*args)
    x, y = c.a.cmd("HELLO", "2", "AUTH", "default", "anything"), c.b.cmd("HELLO", "2", "AUTH",
                                                                       "default", "anything")
    check(hello_shape(x) == hello_shape(y), "HELLO AUTH: %r, redis %r" % (x, y))
    done([c], "no password")


def t_requirepass(o):
    o.restart(("--requirepass", PASS))
    r = o.redis(("--requirepass", PASS))
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in cs:
        for args in (("GET", "k"), ("PING",), ("NOSUCH", "x"), ("GET",), ("SET", "k", "v"),
                     ("MULTI",), ("EXEC",), ("CONFIG", "GET", "requirepass"), ("CLIENT", "ID"),
                     ("HELLO", "2"), ("HELLO",), ("HELLO", "2", "AUTH", "default", "bad"),
                     ("HELLO", "2", "AUTH", "bob", PASS), ("AUTH", "bad"),
                     ("AUTH", "default", "bad"), ("AUTH", "x", "y", "z"), ("AUTH",),
                     ("AUTH", PASS[:-1]), ("AUTH", PASS + "x"), ("GET", "k"),
                     ("AUTH", PASS), ("SET", "k", "v"), ("GET", "k"), ("AUTH", "wrong"),
                     ("GET", "k"), ("AUTH", "default", PASS), ("CONFIG", "GET", "requirepass"),
                     ("DEL", "k")):
            c.same(*args)
    h = Both(o, r, o.lcores - 1)
    x = h.a.cmd("HELLO", "2", "AUTH", "default", PASS, "SETNAME", "n1")
    y = h.b.cmd("HELLO", "2", "AUTH", "default", PASS, "SETNAME", "n1")
    check(hello_shape(x) == hello_shape(y), "HELLO AUTH SETNAME: %r, redis %r" % (x, y))
    h.same("CLIENT", "GETNAME")
    h.same("SET", "k2", "v")
    # QUIT before AUTH
    q = Both(o, r)
    q.same("QUIT")
    # AUTH's arguments are not in the slow log
    s = Both(o, r)
    s.same("AUTH", PASS)
    s.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
    s.same("SLOWLOG", "RESET")
    s.same("AUTH", PASS)
    s.same("AUTH", "default", PASS)
    s.same("AUTH", "nope")
    got = [kv_test.parse_array(x) for x in (s.a.cmd("SLOWLOG", "GET"), s.b.cmd("SLOWLOG", "GET"))]
    args = [[kv_test.parse_array(e)[3] for e in g] for g in got]
    check(args[0] == args[1], "slow log arguments: %r, redis %r" % (args[0], args[1]))
    done(cs + [h, s], "requirepass")


def t_configset(o):
    r = o.redis()
    admin = Both(o, r, 0)
    early = [Both(o, r, lc) for lc in range(o.lcores)]  # connected before the password
    admin.same("CONFIG", "SET", "requirepass", PASS)
    admin.same("CONFIG", "GET", "requirepass")
    admin.same("SET", "k", "1")
    for c in early:
        c.same("INCR", "k")
    late = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in late:
        c.same("GET", "k")
        c.same("AUTH", PASS)
        c.same("GET", "k")
    admin.same("CONFIG", "SET", "requirepass", "other", "slowlog-max-len", "-5")  # refused
    admin.same("CONFIG", "GET", "requirepass")
    admin.same("CONFIG", "SET", "requirepass", "other")
    later = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in later:
        c.same("AUTH", PASS)
        c.same("GET", "k")
        c.same("AUTH", "other")
        c.same("GET", "k")
    admin.same("CONFIG", "SET", "requirepass", "")
    admin.same("CONFIG", "GET", "requirepass")
    free = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in free:
        c.same("GET", "k")
        c.same("AUTH", "x")
    done([admin] + early + late + later + free, "CONFIG SET requirepass")
    log("configset: %d lcores" % o.lcores)


def cmdstats(raw):
    """INFO commandstats as {name: (calls, rejected_calls, failed_calls)} (usec differ)."""
    text = raw.split(b"\r\n", 1)[1].decode()
    out = {}
    for line in text.split("\r\n"):
        if not line.startswith("cmdstat_"):
            continue
        name, fields = line[len("cmdstat_"):].split(":", 1)
        f = dict(kv.split("=") for kv in fields.split(","))
        check(set(f) == {"calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"},
              "fields of %r" % line)
        calls, usec = int(f["calls"]), int(f["usec"])
        check(f["usec_per_call"] == "%.2f" % (usec / calls if calls else 0), "usec_per_call: %r" % line)
        out[name] = (calls, int(f["rejected_calls"]), int(f["failed_calls"]))
    return out


def t_cmdstats(o):
    """INFO commandstats after the same commands on cr-kv (clients on every lcore, keys on
    every shard) and redis-server: the same commands with the same calls, rejected_calls
    (arity, NOAUTH) and failed_calls (WRONGTYPE, syntax, inside EXEC too); CONFIG
    RESETSTAT empties it (on every lcore); INFO and INFO default do not show it, INFO all
    and INFO everything do."""
    o.restart(("--requirepass", PASS))
    r = o.redis(("--requirepass", PASS))
    cs = [Both(o, r, lc) for lc in range(o.lcores)]
    for c in cs:
        c.same("GET", "k")  # rejected: NOAUTH
        c.same("AUTH", PASS)
    cs[0].same("CONFIG", "RESETSTAT")
    for i, c in enumerate(cs):
        for args in (("SET", "a%d" % i, "1"), ("GET", "a0"), ("GET",), ("LPUSH", "a0", "x"),
                     ("MSET", "a0", "1", "b", "2", "c", "3"), ("MGET", "a0", "b", "c", "d"),
                     ("INCR", "b"), ("INCRBY", "b", "x"), ("SET", "k", "v", "BAD"),
                     ("DEL", "b", "c"), ("CONFIG", "GET", "maxclients"), ("CONFIG", "GET"),
                     ("MULTI",), ("INCR", "a0"), ("LPUSH", "a0", "y"), ("SET", "z", "1"),
                     ("EXEC",), ("PING",), ("DBSIZE",), ("EXISTS", "a0", "z")):
            c.same(*args)
    shown = []
    for what in (("INFO",), ("INFO", "default"), ("INFO", "all"), ("INFO", "everything"),
                 ("INFO", "commandstats")):
        x = cs[-1].a.cmd(*what)
        shown.append("# Commandstats" in x.decode())
    check(shown == [False, False, True, True, True], "sections shown: %r" % shown)
    ours = cmdstats(cs[-1].a.cmd("INFO", "commandstats"))
    theirs = cmdstats(cs[-1].b.cmd("INFO", "commandstats"))
    ours.pop("info", None), theirs.pop("info", None)  # the INFOs just above, counted apart
    check(ours == theirs, "commandstats:\n  cr-kv %r\n  redis %r" % (sorted(ours.items()),
                                                                  sorted(theirs.items())))
    cs[0].same("CONFIG", "RESETSTAT")
    ours = cmdstats(cs[-1].a.cmd("INFO", "commandstats"))
    theirs = cmdstats(cs[-1].b.cmd("INFO", "commandstats"))
    check(ours == theirs, "after RESETSTAT: cr-kv %r, redis %r" % (ours, theirs))
    done(cs, "commandstats")
    log("cmdstats: as redis-server's on %d lcores" % o.lcores)


TESTS = {"nopass": t_nopass, "cmdstats": t_cmdstats, "requirepass": t_requirepass, "configset": t_configset}

if __name__ == "__main__":
    sys.exit(kv_test.main(TESTS, __doc__))
