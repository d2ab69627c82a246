#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Scripting of app/cr-kv (EVAL, EVALSHA, EVAL_RO, SCRIPT) across shards, on loopback.

  kv_script_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll] [--seed N]

  oracle     scripts byte for byte against redis-server: conversions both ways, redis.*
             (call, pcall, error_reply, status_reply, sha1hex, log, setresp), errors
             and their "script: <sha>, on @user_script:N." suffix, the sandbox, cjson
             and bit, EVALSHA/SCRIPT LOAD/EXISTS/FLUSH, EVAL_RO and no-writes, scripts in
             MULTI; keys on one shard and (two lcores) on two; one at a time and
             pipelined.
  undeclared a key not in KEYS is refused (cr-kv's documented difference).
  redis_py   redis-py's Lock (EVALSHA) and register_script.
  stress     seeded scripted transfers between counters on both shards and scripted
             INCRs from clients on every lcore while readers check the sum with a script
             and MGET: the sum never changes, the counts are exact.
  busy       a script past lua-time-limit: other clients of its lcore get -BUSY as from
             redis-server; SCRIPT KILL from the other lcore and from the same lcore stop
             it; a script that wrote answers -UNKILLABLE; NOTBUSY when none runs.
  flush      SCRIPT LOAD on one lcore is seen by EVALSHA on every lcore; SCRIPT FLUSH on
             one makes EVALSHA answer NOSCRIPT on every lcore.
  kill_state (two lcores) what one busy script did does not stick to another of its
             lcore: a writer that ended leaves the other killable.
  callback   a redis.call for another shard or a time slice inside a gsub/sort callback
             or a metamethod, under pcall or a coroutine: refused (not sent), the script
             goes on; the same nesting outside such a call waits for its answer.
  lockfail   (two lcores) an EVAL over the shard of a retired lcore answers, and the
             client's next command is answered.
  closing    a shutdown stops the running scripts (one that wrote too) and the process
             exits; (two lcores) a retire stops a script that did not write.

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
from kv_test import Conn, Failure, check, conn_on_lcore, key_shard, log  # noqa: E402

E = "exact"
PIPE = (False, True)


def named(prefix, shard, nshards, tag):
    j = 0
    while True:
        k = "%s%s.%d" % (prefix, tag, j)
        if key_shard(k, nshards) == shard:
            return k
        j += 1


def layouts(o):
    out = [("one", ["{sc}k%d" % i for i in range(4)])]
    if o.lcores == 2:
        out.append(("two", [named("sk", i % 2, 2, str(i)) for i in range(4)]))
    return out


SCRIPTS = [
    "return 1", "return {1,2.7,-3.9,true,false,'x',{4,nil,5}}", "return 3.99", "return true",
    "return false", "return nil", "return 1e30", "return -0.5", "return {0/0}",
    "return 'abc\\r\\nx'", "return redis.status_reply('FINE')", "return redis.error_reply('oops')",
    "return redis.error_reply('MY bad')", "return redis.error_reply('-X y')",
    "return {err='-E z'}", "return {ok='s'}", "return {1,{err='in'},{ok='o'}}",
    "return redis.error_reply()", "return redis.status_reply(1)",
    "local t = {} ; t[1]='a'; t[3]='c'; return t", "local t = {}; t.a = 1; return t",
    "return redis.sha1hex('')", "return redis.sha1hex('abc')", "return redis.sha1hex()",
    "return {redis.LOG_DEBUG,redis.LOG_VERBOSE,redis.LOG_NOTICE,redis.LOG_WARNING}",
    "redis.log(redis.LOG_DEBUG, 'hi', 1)", "redis.log(99, 'hi')", "redis.log()",
    "redis.log('x', 'y')", "return redis.setresp(2)", "return redis.setresp(4)",
    "return redis.setresp()", "return redis.REDIS_VERSION",
    "return redis.call('ping')", "return redis.call('echo', 5)", "return redis.call('echo', 5.5)",
    "return redis.call('echo', 0.1)", "return redis.call('echo', {})", "return redis.call()",
    "return redis.call('nosuch')", "return redis.pcall('nosuch')", "return redis.call('get')",
    "return redis.call('multi')", "return redis.call('eval', 'return 1', 0)",
    "return redis.call('script', 'load', 'return 1')", "return redis.call('subscribe', 'c')",
    "return redis.call('blpop', 'x', 0)", "return redis.call('client', 'id')",
    "return pcall(redis.call, 'nosuch')",
    "local ok, e = pcall(redis.call, 'nosuch'); return e",
    "local ok, e = pcall(function() error('inner') end); return {ok, e}",
    "local ok, e = pcall(function() error({err='T x'}) end); return e",
    "local ok, e = xpcall(function() error('x') end, function(m) return 'h:' .. m end);"
    " return {ok, e}",
    "x = 1", "return y", "return 1 +", "error('boom')", "error(nil)", "error(12)",
    "error({err='MYCODE x'})", "string.x = 1", "redis.call = 1", "setmetatable(_G, {})",
    "rawset(_G,'zz',1)", "return rawget(_G,'zz')", "coroutine.yield()",
    "return type(os)", "return type(io)", "return type(print)", "return type(loadfile)",
    "return type(dofile)", "return type(require)", "return type(loadstring)",
    "return type(debug)", "return type(setfenv)", "return type(newproxy)",
    "return type(coroutine)", "return type(unpack)",
    "return cjson.encode({a=1})", "return cjson.encode({1,2,'x'})",
    "return cjson.decode('[1,2,{\"a\":3}]')[3].a", "return cjson.decode('{')",
    "return bit.band(7,3)", "return bit.tohex(255)", "return bit.bor(1,2,4)",
    "return bit.lshift(1, 40)", "return tostring(bit.bnot(0))",
    "return string.format('%d-%s', 5, 'x')", "return table.concat({'a','b'}, ',')",
    "return math.floor(2.5)", "return tonumber('12') + 1", "return #KEYS", "return #ARGV",
    "local co = coroutine.wrap(function() coroutine.yield(1) return 2 end)"
    " return {co(), co()}",
    "return loadstring('return 7')()",
    "local f = loadstring('q = 1') f()",
    "#!lua\nreturn 1", "#!lua flags=no-writes\nreturn 2", "#!foo\nreturn 1",
    "#!lua flags=bar\nreturn 1", "#!lua x=y\nreturn 1", "#!lua\nerror('two')",
]


def key_script(k):
    """(args, mode) steps over keys @k (all declared)."""
    st = []

    def a(*args):
        st.append((args, E))
    a("DEL", *k)
    a("EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", k[0], "v1")
    a("EVAL", "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}", "2", k[0], k[1])
    a("EVAL", "return redis.call('incr', KEYS[1])", "1", k[0])
    a("EVAL", "return redis.pcall('incr', KEYS[1])", "1", k[0])
    a("EVAL", "local t = {} for i, k in ipairs(KEYS) do t[i] = redis.call('incrby', k, i) end"
      " return t", "3", k[1], k[2], k[3])
    a("EVAL", "redis.call('mset', KEYS[1], 'a', KEYS[2], 'b') return redis.call('mget', KEYS[1],"
      " KEYS[2], KEYS[3])", "3", k[0], k[1], k[2])
    a("EVAL", "return redis.call('del', KEYS[1], KEYS[2], KEYS[3])", "3", k[0], k[1], k[2])
    a("EVAL", "redis.call('rpush', KEYS[1], 'a', 'b', 'c') redis.call('sadd', KEYS[2], 'x')"
      " return {redis.call('lrange', KEYS[1], 0, -1), redis.call('smembers', KEYS[2]),"
      " redis.call('type', KEYS[1])}", "2", k[0], k[1])
    a("EVAL", "return redis.call('hgetall', KEYS[1])", "1", k[2])
    a("EVAL", "return redis.call('get', KEYS[1])", "1", k[0])
    a("EVAL", "return redis.pcall('get', KEYS[1])", "1", k[0])
    a("EVAL", "local ok, e = pcall(redis.call, 'get', KEYS[1]) return {ok and 1 or 0, e}", "1",
      k[0])
    a("EVAL", "local ok, e = pcall(function() return redis.call('incr', KEYS[2]) end)"
      " return {ok and 1 or 0, e}", "2", k[0], k[1])
    a("EVAL", "return redis.call('rename', KEYS[1], KEYS[2])", "2", k[0], k[3])
    a("EVAL", "return redis.call('exists', KEYS[1], KEYS[2])", "2", k[0], k[3])
    a("EVAL", "return redis.call('smove', KEYS[1], KEYS[2], 'x')", "2", k[1], k[2])
    a("EVAL", "return redis.call('lmove', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')", "2", k[3], k[0])
    a("EVAL", "redis.call('set', KEYS[1], 5) return redis.call('incrbyfloat', KEYS[1], 0.1)",
      "1", k[1])
    a("EVAL_RO", "return redis.call('get', KEYS[1])", "1", k[1])
    a("EVAL_RO", "return redis.call('set', KEYS[1], 1)", "1", k[1])
    a("EVAL", "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 1)", "1", k[1])
    a("EVAL", "return redis.call('mset', KEYS[1])", "1", k[1])
    a("EVAL", "return 1", "-1")
    a("EVAL", "return 1", "3", k[0])
    a("EVAL", "return 1", "x")
    a("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0")
    a("EVALSHA", "nosha", "0")
    a("SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])")
    a("EVALSHA", "2bab3b661081db58bd2341920e0ba7cf5dc77b25", "1", k[2])
    a("EVALSHA", "2BAB3B661081DB58BD2341920E0BA7CF5DC77B25", "1", k[2])
    a("EVALSHA_RO", "2bab3b661081db58bd2341920e0ba7cf5dc77b25", "1", k[2])
    a("SCRIPT", "EXISTS", "2bab3b661081db58bd2341920e0ba7cf5dc77b25", "abc")
    a("SCRIPT", "LOAD", "return 1 +")
    a("SCRIPT", "FLUSH", "bad")
    a("SCRIPT", "FLUSH", "ASYNC")
    a("SCRIPT", "EXISTS", "2bab3b661081db58bd2341920e0ba7cf5dc77b25")
    a("EVALSHA", "2bab3b661081db58bd2341920e0ba7cf5dc77b25", "1", k[2])
    a("SCRIPT", "KILL")
    a("SCRIPT", "HELP")
    a("SCRIPT", "NOSUCH")
    a("SCRIPT")
    a("MULTI")
    a("EVAL", "return redis.call('incr', KEYS[1])", "1", k[2])
    a("EVAL", "return redis.call('incrby', KEYS[1], 5)", "1", k[2])
    a("EVAL", "return {redis.call('get', KEYS[1]), redis.call('set', KEYS[2], 'm')}", "2", k[2],
      k[3])
    a("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0")
    a("EXEC")
    a("MGET", k[2], k[3])
    a("MULTI")
    a("EVAL", "return 1", "-1")
    a("EXEC")
    # the blocking pops scripts may call do not block there
    a("DEL", *k)
    a("EVAL", "return redis.call('blmpop', 0, 2, KEYS[1], KEYS[2], 'LEFT')", "2", k[0], k[1])
    a("RPUSH", k[1], "a", "b")
    a("EVAL", "return redis.call('blmpop', 0, 2, KEYS[1], KEYS[2], 'LEFT', 'COUNT', 5)", "2",
      k[0], k[1])
    a("ZADD", k[2], "1", "m")
    a("EVAL", "return redis.call('bzmpop', 0, 1, KEYS[1], 'MIN')", "1", k[2])
    a("EVAL", "return redis.call('bzmpop', 0, 1, KEYS[1], 'MIN')", "1", k[2])
    a("EVAL", "return redis.call('blmove', KEYS[1], KEYS[2], 'LEFT', 'LEFT', 0)", "2", k[0],
      k[1])
    a("EVAL", "return redis.call('blmpop', 0)", "0")
    return st


def t_oracle(o):
    r = o.redis()
    bad = []
    plain = [(("EVAL", s, "0"), E) for s in SCRIPTS]
    for pipelined in (False, True):
        got = kv_test.run_script(o.kv.port, r.port, plain, pipelined)
        bad += ["plain%s: %s" % (" pipelined" if pipelined else "", b) for b in got]
    for name, k in layouts(o):
        for pipelined in PIPE:
            got = kv_test.run_script(o.kv.port, r.port, key_script(k), pipelined)
            bad += ["%s%s: %s" % (name, " pipelined" if pipelined else "", b) for b in got]
    # WATCH sees a script's write (and not an EVAL_RO's read)
    for name, k in layouts(o):
        for script, cmd in (("return redis.call('set', KEYS[1], 'w')", "EVAL"),
                            ("return redis.call('get', KEYS[1])", "EVAL_RO")):
            outs = []
            for port in (o.kv.port, r.port):
                c1, c2 = Conn(port), Conn(port)
                got = [c1.cmd("SET", k[0], "1"), c1.cmd("WATCH", k[0], k[1]),
                       c2.cmd(cmd, script, "2", k[1], k[0]),
                       c1.cmd("MULTI"), c1.cmd("INCR", k[0]), c1.cmd("EXEC")]
                outs.append(got)
                c1.close()
                c2.close()
            if outs[0] != outs[1]:
                bad.append("%s: WATCH and %s: cr-kv %r, redis %r" % (name, cmd, outs[0], outs[1]))
    for c in ("eval", "evalsha", "eval_ro", "evalsha_ro", "multi", "watch"):
        a, b = Conn(o.kv.port).cmd("COMMAND", "INFO", c), Conn(r.port).cmd("COMMAND", "INFO", c)
        fa, fb = kv_test.parse_array(kv_test.parse_array(a)[0]), \
            kv_test.parse_array(kv_test.parse_array(b)[0])
        if fa[:3] != fb[:3]:
            bad.append("COMMAND INFO %s: cr-kv %r, redis %r" % (c, fa[:3], fb[:3]))
    for p in ("lua-time-limit", "busy-reply-threshold"):
        for args in (("CONFIG", "SET", p, "abc"), ("CONFIG", "SET", p, "-1"),
                     ("CONFIG", "SET", p, "250"), ("CONFIG", "GET", p),
                     ("CONFIG", "SET", p, "5000")):
            x, y = Conn(o.kv.port).cmd(*args), Conn(r.port).cmd(*args)
            if x != y:
                bad.append("%r: cr-kv %r, redis %r" % (args, x, y))
    check(not bad, "%d differences:\n  %s" % (len(bad), "\n  ".join(bad[:30])))


def t_undeclared(o):
    c = Conn(o.kv.port)
    got = c.cmd("EVAL", "return redis.call('get', 'other')", "0")
    check(got.startswith(b"-ERR cr-kv: script accessed undeclared key 'other'") and
          b"script: " in got, "undeclared key: %r" % got)
    got = c.cmd("EVAL", "return redis.pcall('set', KEYS[1] .. 'x', 1)", "1", "k")
    check(got.startswith(b"-ERR cr-kv: script accessed undeclared key 'kx'"), "pcall: %r" % got)
    got = c.cmd("EVAL", "return redis.call('keys', '*')", "0")
    check(got.startswith(b"-ERR cr-kv: this command reads or writes the whole keyspace"),
          "keys: %r" % got)
    check(c.cmd("EXISTS", "kx") == b":0\r\n", "nothing written")
    # many keys (KEYS looked up as a set): each declared one written, an undeclared refused
    keys = ["many:%d" % i for i in range(40)]
    got = c.cmd("EVAL", "for i, k in ipairs(KEYS) do redis.call('set', k, i) end"
                " return redis.call('mget', KEYS[1], KEYS[40])", "40", *keys)
    check(got == b"*2\r\n$1\r\n1\r\n$2\r\n40\r\n", "40 keys: %r" % got)
    got = c.cmd("EVAL", "return redis.call('get', 'many:40')", "40", *keys)
    check(got.startswith(b"-ERR cr-kv: script accessed undeclared key 'many:40'"), "%r" % got)


def t_redis_py(o):
    try:
        import redis
    except ImportError:
        log("SKIP: python3-redis is not installed")
        sys.exit(kv_test.SKIP)
    clients = [redis.Redis(port=o.kv.port) for _ in range(4)]
    held, errors = [0], []
    lk = threading.Lock()

    def worker(cl, n):
        try:
            for _ in range(n):
                with cl.lock("py:lock", timeout=5, blocking_timeout=10):
                    with lk:
                        held[0] += 1
                        check(held[0] == 1, "two holders of the lock")
                    v = int(cl.get("py:counter") or 0)
                    cl.set("py:counter", v + 1)
                    with lk:
                        held[0] -= 1
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ts = [threading.Thread(target=worker, args=(cl, 50)) for cl in clients]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    check(not errors, "lock errors: %s" % errors[:3])
    check(int(clients[0].get("py:counter")) == 200, "counter %r" % clients[0].get("py:counter"))
    incr = clients[0].register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    check(incr(keys=["py:a"], args=[5]) == 5, "register_script")
    clients[1].script_flush()
    check(incr(keys=["py:a"], args=[5]) == 10, "register_script after a flush (EVAL again)")
    lock = clients[2].lock("py:l2", timeout=10)
    check(lock.acquire(blocking=False), "acquire")
    check(not clients[3].lock("py:l2").acquire(blocking=False), "held elsewhere")
    check(lock.extend(5), "extend")
    lock.release()
    check(clients[3].lock("py:l2").acquire(blocking=False), "released")


TRANSFER = """
local a = tonumber(redis.call('get', KEYS[1]))
local b = tonumber(redis.call('get', KEYS[2]))
local n = tonumber(ARGV[1])
if a < n then return 0 end
redis.call('set', KEYS[1], a - n)
redis.call('set', KEYS[2], b + n)
return 1
"""
SUM = """
local s = 0
for i, k in ipairs(KEYS) do s = s + tonumber(redis.call('get', k)) end
return s
"""


def t_stress(o, seconds=15.0, per_client=400):
    ncnt = 8
    counters = [named("st:c", i % max(2, o.lcores), max(2, o.lcores), str(i)) for i in range(ncnt)]
    incrk = [named("st:i", i % max(2, o.lcores), max(2, o.lcores), str(i)) for i in range(2)]
    c0 = Conn(o.kv.port)
    for k in counters:
        c0.cmd("SET", k, "1000")
    for k in incrk:
        c0.cmd("SET", k, "0")
    total = 1000 * ncnt
    sha = c0.cmd("SCRIPT", "LOAD", TRANSFER).split(b"\r\n")[1].decode()
    deadline = time.time() + seconds
    errors, applied, incs = [], [0], [0]
    lk = threading.Lock()
    stop = threading.Event()

    def mover(w):
        rnd = random.Random(SEED * 100 + w)
        c = conn_on_lcore(o.kv.port, w % o.lcores)
        ok = 0
        for _ in range(per_client):
            if time.time() > deadline:
                break
            a, b = rnd.sample(counters, 2)
            n = str(rnd.randint(1, 50))
            if rnd.random() < 0.5:
                got = c.cmd("EVALSHA", sha, "2", a, b, n)
            else:
                got = c.cmd("EVAL", TRANSFER, "2", a, b, n)
            if got not in (b":0\r\n", b":1\r\n"):
                errors.append("transfer: %r" % got)
                break
            ok += got == b":1\r\n"
            if rnd.random() < 0.5:
                got = c.cmd("EVAL", "return {redis.call('incr', KEYS[1]),"
                            " redis.call('incr', KEYS[2])}", "2", incrk[0], incrk[1])
                if not got.startswith(b"*2\r\n"):
                    errors.append("incr: %r" % got)
                    break
                with lk:
                    incs[0] += 1
        with lk:
            applied[0] += ok

    reads = [0]

    def reader(lc):
        c = conn_on_lcore(o.kv.port, lc)
        while not stop.is_set() and time.time() < deadline + 5:
            got = c.cmd("EVAL_RO", SUM, str(ncnt), *counters)
            if got != b":%d\r\n" % total:
                errors.append("script sum %r" % got)
                return
            got = kv_test.parse_array(c.cmd("MGET", *counters))
            s = sum(int(x.split(b"\r\n")[1]) for x in got)
            if s != total:
                errors.append("MGET sum %d" % s)
                return
            i = kv_test.parse_array(c.cmd("MGET", *incrk))
            a, b = (int(x.split(b"\r\n")[1]) for x in i)
            if a != b:
                errors.append("incr pair %d %d" % (a, b))
                return
            reads[0] += 1

    ms = [threading.Thread(target=mover, args=(w,)) for w in range(6)]
    rs = [threading.Thread(target=reader, args=(lc,)) for lc in range(o.lcores)]
    for t in ms + rs:
        t.start()
    for t in ms:
        t.join(seconds + 30)
    stop.set()
    for t in rs:
        t.join(30)
    check(not errors, "%d errors: %s" % (len(errors), errors[:5]))
    vals = [int(c0.cmd("GET", k).split(b"\r\n")[1]) for k in counters]
    check(sum(vals) == total, "final sum %d" % sum(vals))
    for k in incrk:
        check(c0.cmd("GET", k) == b"$%d\r\n%d\r\n" % (len(str(incs[0])), incs[0]),
              "incr %s: %r, %d scripts" % (k, c0.cmd("GET", k), incs[0]))
    check(reads[0] > 0, "the readers read")
    log("stress: %d transfers applied, %d incr scripts, %d reads" % (applied[0], incs[0],
                                                                       reads[0]))


LOOP = "local i = 0 while true do i = i + 1 end"
WLOOP = "redis.call('set', KEYS[1], 1) local i = 0 while true do i = i + 1 end"


def busy_run(port, lcore_of, lc_script, lc_kill, script, keys):
    """Start @script on lcore @lc_script; once busy, see what another client of that lcore
    gets, then SCRIPT KILL from lcore @lc_kill. Returns the observed replies."""
    runner = lcore_of(lc_script)
    other = lcore_of(lc_script)
    killer = lcore_of(lc_kill)
    runner.send(kv_test.resp("EVAL", script, str(len(keys)), *keys))
    t0 = time.time()
    got = {}
    while time.time() - t0 < 10:
        r = other.cmd("PING")
        if r.startswith(b"-BUSY"):
            got["busy"] = r
            break
        time.sleep(0.02)
    got["get"] = other.cmd("GET", "x")
    got["multi"] = other.cmd("MULTI")
    got["queued"] = other.cmd("GET", "x")
    got["exec"] = other.cmd("EXEC")
    got["kill"] = killer.cmd("SCRIPT", "KILL")
    return runner, got


def t_busy(o):
    r = o.redis()
    bad = []
    for port in (o.kv.port, r.port):
        Conn(port).cmd("CONFIG", "SET", "lua-time-limit", "100")
    # redis-server's replies for the same steps (one lcore there)
    theirs = {}
    rr, theirs = busy_run(r.port, lambda lc: Conn(r.port), 0, 0, LOOP, [])
    t_end = rr.replies(1, 10)[0]
    theirs["end"] = t_end
    theirs["after"] = Conn(r.port).cmd("SCRIPT", "KILL")
    for lc_kill in range(o.lcores):
        rk, ours = busy_run(o.kv.port, lambda lc: conn_on_lcore(o.kv.port, lc), 0, lc_kill, LOOP,
                            [])
        ours["end"] = rk.replies(1, 10)[0]
        ours["after"] = Conn(o.kv.port).cmd("SCRIPT", "KILL")
        for k in theirs:
            x, y = ours.get(k), theirs.get(k)
            # the script's line and sha are the same script's: byte for byte
            if x != y:
                bad.append("kill from lcore %d, %s: cr-kv %r, redis %r" % (lc_kill, k, x, y))
    # a script that wrote cannot be killed: UNKILLABLE, then it is stopped by... it is not:
    # give it a bounded loop instead
    wl = "redis.call('set', KEYS[1], 1) local t = redis.call('time')[1] local i = 0" \
         " while i < 30000000 do i = i + 1 end return i"
    for port, lcore_of in ((r.port, lambda lc: Conn(r.port)),
                           (o.kv.port, lambda lc: conn_on_lcore(o.kv.port, lc))):
        rk, got = busy_run(port, lcore_of, 0, o.lcores - 1, wl, ["w{x}"])
        end = rk.replies(1, 60)[0]
        if port == r.port:
            theirs_w = (got["kill"], end)
        else:
            ours_w = (got["kill"], end)
    if ours_w != theirs_w:
        bad.append("unkillable: cr-kv %r, redis %r" % (ours_w, theirs_w))
    # a kill caught by pcall: the script goes on to the end of that line, and no further
    for sc in ("local ok, e = pcall(function() " + LOOP + " end) return {ok, e}",
               "local ok, e = pcall(function() " + LOOP + " end)\nreturn {ok, e}"):
        outs = []
        for port, lcore_of in ((r.port, lambda lc: Conn(r.port)),
                               (o.kv.port, lambda lc: conn_on_lcore(o.kv.port, lc))):
            rk, got = busy_run(port, lcore_of, 0, o.lcores - 1, sc, [])
            outs.append((got["kill"], rk.replies(1, 10)[0]))
        if outs[0] != outs[1]:
            bad.append("%r: cr-kv %r, redis %r" % (sc, outs[1], outs[0]))
    for port in (o.kv.port, r.port):
        Conn(port).cmd("CONFIG", "SET", "lua-time-limit", "5000")
    if o.lcores == 2:
        # a busy script on lcore 0 does not stop lcore 1's clients
        Conn(o.kv.port).cmd("CONFIG", "SET", "lua-time-limit", "50")
        rk = conn_on_lcore(o.kv.port, 0)
        c1 = conn_on_lcore(o.kv.port, 1)  # before: CLIENT INFO on lcore 0 would be BUSY
        rk.send(kv_test.resp("EVAL", LOOP, "0"))
        time.sleep(0.3)
        got = c1.cmd("PING")
        check(got == b"+PONG\r\n", "lcore 1 served while lcore 0 is busy: %r" % got)
        check(c1.cmd("SCRIPT", "KILL") == b"+OK\r\n", "kill")
        rk.replies(1, 10)
    check(not bad, "%d differences:\n  %s" % (len(bad), "\n  ".join(bad[:20])))


def t_flush(o):
    cs = [conn_on_lcore(o.kv.port, lc) for lc in range(o.lcores)]
    for rnd in range(20):
        body = "return %d" % rnd
        loader = cs[rnd % len(cs)]
        sha = loader.cmd("SCRIPT", "LOAD", body).split(b"\r\n")[1].decode()
        for c in cs:
            check(c.cmd("EVALSHA", sha, "0") == b":%d\r\n" % rnd, "EVALSHA after LOAD")
            check(c.cmd("SCRIPT", "EXISTS", sha) == b"*1\r\n:1\r\n", "EXISTS")
        flusher = cs[(rnd + 1) % len(cs)]
        check(flusher.cmd("SCRIPT", "FLUSH", "SYNC" if rnd % 2 else "ASYNC") == b"+OK\r\n",
              "flush")
        for c in cs:
            check(c.cmd("EVALSHA", sha, "0") ==
                  b"-NOSCRIPT No matching script. Please use EVAL.\r\n", "NOSCRIPT after FLUSH")
            check(c.cmd("SCRIPT", "EXISTS", sha) == b"*1\r\n:0\r\n", "EXISTS after FLUSH")
        check(cs[-1].cmd("EVAL", body, "0") == b":%d\r\n" % rnd, "EVAL caches it again")
        for c in cs:
            check(c.cmd("EVALSHA", sha, "0") == b":%d\r\n" % rnd, "EVALSHA after EVAL")
        cs[0].cmd("SCRIPT", "FLUSH")


def need_two(o):
    if o.lcores != 2:
        log("SKIP: needs a second shard")
        raise SystemExit(kv_test.SKIP)


KILL_OK = b"+OK\r\n"
NOTBUSY = b"-NOTBUSY No scripts in execution right now.\r\n"


def t_kill_state(o):
    """Two busy scripts on lcore 0: A writes and ends, B never wrote. SCRIPT KILL then
    stops B (it answered UNKILLABLE for ever when A's write stuck to the lcore)."""
    need_two(o)
    o.restart(["--lua-time-limit", "200"])
    a, b = conn_on_lcore(o.kv.port, 0), conn_on_lcore(o.kv.port, 0)
    k = conn_on_lcore(o.kv.port, 1)
    remote, w = kv_test.on_shard("r", 1), kv_test.on_shard("w", 0)
    # A waits for the other shard (a yield) so B starts; both go past the limit
    A = ("local function now() local t = redis.call('TIME')"
         " return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 end\n"
         "local t0 = now()\n"
         "while now() - t0 < 400 do redis.call('GET', KEYS[1]) for i = 1, 2000 do end end\n"
         "redis.call('SET', KEYS[2], 'x') for i = 1, 3000000 do end\n"
         "while now() - t0 < 800 do redis.call('GET', KEYS[1]) end\n"
         "return 'A done'")
    a.send(kv_test.resp("EVAL", A, "2", remote, w))
    time.sleep(0.05)
    b.send(kv_test.resp("EVAL", LOOP, "0"))
    got = a.replies(1, 10)[0]
    check(got == b"$6\r\nA done\r\n", "A: %r" % got)
    got = k.cmd("SCRIPT", "KILL")
    check(got == KILL_OK, "SCRIPT KILL once the writer ended: %r" % got)
    got = b.replies(1, 10)[0]
    check(got.startswith(b"-ERR Script killed by user with SCRIPT KILL"), "B: %r" % got)
    got = k.cmd("SCRIPT", "KILL")
    check(got == NOTBUSY, "SCRIPT KILL after: %r" % got)
    check(b.cmd("PING") == b"+PONG\r\n", "B's client goes on")


CANNOT_WAIT = b"cr-kv: a redis.call for another shard cannot wait inside a metamethod"


def t_callback(o):
    """A redis.call for another shard, or a time slice, inside a C call of the VM (a gsub
    or sort callback, a metamethod) wrapped in pcall or a coroutine: refused before it is
    sent (it used to be sent, then the yield failed and the script ended with its locks
    released while the call was under way: a use after free); the same nesting without
    the C call waits as it should."""
    o.restart(["--lua-time-limit", "50"])
    c = conn_on_lcore(o.kv.port, 0)
    # a slice is not taken inside the callback: the script runs on (it ended in an error)
    slow = ("local r; string.gsub('a', 'a', function() r = {pcall(function()"
            " for i = 1, 3e7 do end return 'ok' end)} end) return r")
    got = c.cmd("EVAL", slow, "0")
    check(got == b"*2\r\n:1\r\n$2\r\nok\r\n", "slow loop in a gsub callback: %r" % got)
    if o.lcores == 1:
        return
    k0, k1 = kv_test.on_shard("a", 0), kv_test.on_shard("b", 1)
    check(c.cmd("SET", k1, "remote") == b"+OK\r\n", "SET")
    refused = [
        "local r; string.gsub('a', 'a', function() r = {pcall(redis.call, 'GET', KEYS[2])}"
        " end) return r",
        "local t = {3, 1, 2} local r; table.sort(t, function(a, b) if not r then"
        " r = {pcall(redis.call, 'GET', KEYS[2])} end return a < b end) return r",
        "local m = setmetatable({}, {__index = function(t, k) local co = coroutine.wrap("
        "function() return redis.pcall('GET', KEYS[2]) end) return {co()} end}) return m.x",
        "local r; string.gsub('a', 'a', function() r = {coroutine.resume(coroutine.create("
        "function() return pcall(redis.call, 'GET', KEYS[2]) end))} end) return r",
    ]
    for sc in refused:
        for _ in range(3):
            got = c.cmd("EVAL", sc, "2", k0, k1)
            check(CANNOT_WAIT in got, "%s: %r" % (sc, got))
            check(c.cmd("PING") == b"+PONG\r\n", "PING after %s" % sc)
    waits = [
        ("return {pcall(redis.call, 'GET', KEYS[2])}", b"*2\r\n:1\r\n$6\r\nremote\r\n"),
        ("return {pcall(function() return pcall(redis.call, 'GET', KEYS[2]) end)}",
         b"*3\r\n:1\r\n:1\r\n$6\r\nremote\r\n"),
        ("local co = coroutine.wrap(function() return pcall(redis.call, 'GET', KEYS[2]) end)"
         " return {co()}", b"*2\r\n:1\r\n$6\r\nremote\r\n"),
    ]
    for sc, want in waits:
        got = c.cmd("EVAL", sc, "2", k0, k1)
        check(got == want, "%s: %r" % (sc, got))
    # the keys' locks were released once, at the script's end: others go on
    check(conn_on_lcore(o.kv.port, 1).cmd("SET", k0, "v") == b"+OK\r\n", "SET after")


def t_lockfail(o):
    """EVAL over a shard whose lcore retired: the client gets an answer and its next
    command is answered. Before shards moved on retire, the locks could not be taken
    there and the next command was never answered (the script's hold on the connection
    was not released); now the shard is served elsewhere and this checks the EVALs
    work. The failure itself is txn_ut's (a shard that cannot be reached)."""
    need_two(o)
    import tempfile
    d = tempfile.mkdtemp(prefix="kvscript.")
    o.tmpdirs.append(d)
    tp = os.path.join(d, "tel.sock")
    o.restart(["--telemetry", tp])
    c = conn_on_lcore(o.kv.port, 0)
    k0, k1 = kv_test.on_shard("a", 0), kv_test.on_shard("b", 1)
    kv_test.telemetry_cmd(tp, "/lcore/retire,1")
    t0 = time.time()
    while time.time() - t0 < 10:
        lc = [x for x in kv_test.telemetry_cmd(tp, "/lcores")["/lcores"] if x["lcore"] == 1]
        if lc and lc[0]["state"] == "OFFLINE":
            break
        time.sleep(0.05)
    for sc, keys in (("return 1", [k0, k1]), ("return redis.call('GET', KEYS[1])", [k1]),
                     ("return 2", [k1, k0])):
        got = c.cmd("EVAL", sc, str(len(keys)), *keys)
        log("lockfail: %s: %r" % (sc, got))
        # the shard is unreachable (or, once shards move on retire, served elsewhere)
        check(got.startswith(b"-") or got.startswith(b":") or got.startswith(b"$"),
              "EVAL: %r" % got)
        check(c.cmd("PING") == b"+PONG\r\n", "PING after %s" % sc)
    kv_test.telemetry_cmd(tp, "/lcore/start,1")


STOPPED = b"-ERR cr-kv: script stopped: its lcore shuts down or retires"
WRITER = "redis.call('SET', KEYS[1], 'w') " + LOOP


def wait_busy(c, lc):
    t0 = time.time()
    while time.time() - t0 < 10:
        if c.cmd("PING").startswith(b"-BUSY"):
            return
        time.sleep(0.02)
    raise Failure("lcore %d never busy" % lc)


def t_closing(o):
    """A shutdown stops the running scripts, one that wrote too (as Redis's SHUTDOWN
    NOSAVE): one SIGTERM, the process exits well within its --shutdown-timeout plus a
    bound, each script's client answered. A retire stops a script that did not write.
    (They ran on for ever: a busy script's slices kept the lcore from closing.)"""
    for first in (LOOP, WRITER):
        o.restart(["--lua-time-limit", "100", "--shutdown-timeout", "1"])
        # every connection first: one made once an lcore is busy could not tell its lcore
        runs = [conn_on_lcore(o.kv.port, lc) for lc in range(o.lcores)]
        others = [conn_on_lcore(o.kv.port, lc) for lc in range(o.lcores)]
        for lc in range(o.lcores):
            sc = first if lc == 0 else (WRITER if first == LOOP else LOOP)
            k = kv_test.on_shard("c", lc, o.lcores) if o.lcores == 2 else "c0"
            runs[lc].send(kv_test.resp("EVAL", sc, "1", k))
            wait_busy(others[lc], lc)
        o.kv.proc.send_signal(signal.SIGTERM)
        try:
            o.kv.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise Failure("%s: still running 10 s after SIGTERM" % first)
        for c in runs:
            try:
                got = c.replies(1, 5)[0]
            except Failure:
                got = b""  # closed at the end of the shutdown, unanswered
            check(got.startswith(STOPPED), "%s: the script's reply %r" % (first, got))
    if o.lcores == 1:
        return
    import tempfile
    d = tempfile.mkdtemp(prefix="kvscript.")
    o.tmpdirs.append(d)
    tp = os.path.join(d, "tel.sock")
    o.restart(["--lua-time-limit", "100", "--telemetry", tp])
    c, other = conn_on_lcore(o.kv.port, 1), conn_on_lcore(o.kv.port, 1)
    c.send(kv_test.resp("EVAL", LOOP, "0"))
    wait_busy(other, 1)
    kv_test.telemetry_cmd(tp, "/lcore/retire,1")
    got = c.replies(1, 10)[0]
    check(got.startswith(STOPPED), "retire: the script's reply %r" % got)
    t0 = time.time()
    while time.time() - t0 < 10:
        st = [x["state"] for x in kv_test.telemetry_cmd(tp, "/lcores")["/lcores"]
              if x["lcore"] == 1]
        if st and st[0] == "OFFLINE":
            break
        time.sleep(0.05)
    else:
        raise Failure("lcore 1 not OFFLINE 10 s after its retire")
    check(c.cmd("PING") == b"+PONG\r\n", "the client goes on (moved)")
    # started again, the lcore runs scripts to their end (its closing state is gone)
    kv_test.telemetry_cmd(tp, "/lcore/start,1")
    t0 = time.time()
    while time.time() - t0 < 10:
        st = [x["state"] for x in kv_test.telemetry_cmd(tp, "/lcores")["/lcores"]
              if x["lcore"] == 1]
        if st and st[0] == "RUNNING":
            break
        time.sleep(0.05)
    else:
        raise Failure("lcore 1 not RUNNING 10 s after its start")
    c1 = conn_on_lcore(o.kv.port, 1)
    got = c1.cmd("EVAL", "redis.call('SET', KEYS[1], 'y') local i = 0"
                 " while i < 3000000 do i = i + 1 end return i", "1", "c1")
    check(got == b":3000000\r\n", "a script on the restarted lcore: %r" % got)


TESTS = {
    "oracle": t_oracle,
    "undeclared": t_undeclared,
    "redis_py": t_redis_py,
    "stress": t_stress,
    "busy": t_busy,
    "flush": t_flush,
    "kill_state": t_kill_state,
    "callback": t_callback,
    "lockfail": t_lockfail,
    "closing": t_closing,
}

SEED = 18


def main():
    global SEED
    if "--seed" in sys.argv[:-1]:
        SEED = int(sys.argv[sys.argv.index("--seed") + 1])
    return kv_test.main(TESTS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
