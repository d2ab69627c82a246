#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of app/cr-kv against redis-server 7 as the oracle, on loopback.

  kv_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

Each test starts its own cr-kv (on -l 0 or -l 0-1) and, where it compares, a
redis-server (persistence off, one database) on free loopback ports, sends the same
bytes to both and compares the reply bytes. Exits 0 (pass), 1 (fail), 77 (skip: the
redis-server / redis-cli / redis-benchmark / python3-redis package is missing).
Every wait is bounded.
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import apptest

SKIP = 77
TEST_TIMEOUT = 140


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def log(msg):
    print(msg, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure("server exited with %s before listening" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Failure("port %d not listening after %.0f s" % (port, timeout))


class KV:
    """A cr-kv child; stop() checks it exits cleanly."""

    def __init__(self, exe, lcores, extra=(), driver="auto"):
        self.port = free_port()
        corelist = "0" if lcores == 1 else "0-%d" % (lcores - 1)
        self.args = [exe, "-l", corelist, "--io-driver", driver, "--listen",
                     "127.0.0.1:%d" % self.port, "--telemetry", "off"] + list(extra)
        if "--hash-seed" not in extra:
            # A known layout: scripts place keys on chosen shards (key_shard()).
            self.args += ["--hash-seed", HASH_SEED]
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "exitcode=23")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise Failure("cr-kv did not stop within 15 s of SIGTERM")
        check(self.proc.returncode == 0,
              "cr-kv exited with %s: %s" % (self.proc.returncode, err.decode(errors="replace")))
        return out.decode(errors="replace"), err.decode(errors="replace")


class Redis:
    """The oracle: redis-server with persistence off."""

    def __init__(self, extra=()):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--databases", "1",
             "--maxclients", "10000", "--protected-mode", "no"] + list(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def resp(*args):
    """Encode a multibulk request."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def reply_end(buf, i=0):
    """Index just past the complete reply starting at buf[i], or None."""
    nl = buf.find(b"\r\n", i)
    if nl < 0:
        return None
    t = buf[i:i + 1]
    if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):  # (RESP3's null, double, bool, big)
        return nl + 2
    n = int(buf[i + 1:nl])
    if t in (b"$", b"=", b"!"):  # (RESP3's verbatim string, blob error)
        if n < 0:
            return nl + 2
        end = nl + 2 + n + 2
        return end if len(buf) >= end else None
    if t in (b"*", b"~", b">", b"%", b"|"):  # (RESP3's set, push; map, attribute: pairs)
        j = nl + 2
        for _ in range(max(n, 0) * (2 if t in (b"%", b"|") else 1)):
            j = reply_end(buf, j)
            if j is None:
                return None
        return j
    raise Failure("bad reply byte %r in %r" % (t, buf[i:i + 40]))


class Conn:
    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def replies(self, n, timeout=10.0):
        """Read exactly n complete replies; return them as a list of bytes."""
        out, chunks = [], []
        deadline = time.monotonic() + timeout
        retry_at = 0  # parse again once the buffer is this long: a big reply is not
        while len(out) < n:  # re-parsed from its start on every recv (quadratic)
            if chunks:
                self.buf += b"".join(chunks)
                chunks = []
            end = reply_end(self.buf) if self.buf and len(self.buf) >= retry_at else None
            if end is not None:
                out.append(self.buf[:end])
                self.buf = self.buf[end:]
                retry_at = 0
                continue
            if self.buf and len(self.buf) >= retry_at:
                retry_at = len(self.buf) + len(self.buf) // 2
            if time.monotonic() > deadline:
                raise Failure("timed out waiting for reply %d of %d (have %r)"
                              % (len(out) + 1, n, self.buf[:80]))
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            d = self.s.recv(1 << 20)
            if not d:
                raise Failure("connection closed after %d of %d replies (%r)"
                              % (len(out), n, self.buf[:80]))
            chunks.append(d)
            got = len(d)
            self.s.setblocking(False)
            try:  # what else is there already, up to retry_at
                while len(self.buf) + got < retry_at:
                    d = self.s.recv(1 << 20)
                    if not d:
                        break
                    chunks.append(d)
                    got += len(d)
                else:
                    continue
            except BlockingIOError:
                pass
            finally:
                self.s.setblocking(True)
            retry_at = 0  # nothing more for now: parse what came
        return out

    def cmd(self, *args):
        self.send(resp(*args))
        return self.replies(1)[0]

    def closed(self, timeout=5.0):
        """Read until EOF; return what came before it (fails if it does not close)."""
        deadline = time.monotonic() + timeout
        got = self.buf
        while time.monotonic() < deadline:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return got
            if not d:
                return got
            got += d
        raise Failure("connection not closed within %.0f s (got %r)" % (timeout, got[:120]))

    def close(self):
        self.s.close()


# ---- where cr-kv places a key (with --hash-seed) ----

HASH_SEED = "000102030405060708090a0b0c0d0e0f"
M64 = (1 << 64) - 1


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M64


def siphash13(key, data):
    """SipHash-1-3 as app/cr-kv/siphash.c (checked against OpenSSL in kv_siphash_ut)."""
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d,
         k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573]

    def rnd():
        v[0] = (v[0] + v[1]) & M64; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64; v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64; v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)

    n = len(data)
    tail = data[n - n % 8:] + bytes(7 - n % 8) + bytes([n & 0xff])
    for i in range(0, n - n % 8, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m; rnd(); v[0] ^= m
    m = int.from_bytes(tail, "little")
    v[3] ^= m; rnd(); v[0] ^= m
    v[2] ^= 0xff
    for _ in range(3):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def key_shard(key, nshards, seed=HASH_SEED):
    """The shard cr-kv started with --hash-seed @seed puts @key on (its hash tag's)."""
    if isinstance(key, str):
        key = key.encode()
    o = key.find(b"{")
    if o >= 0:
        c = key.find(b"}", o + 1)
        if c > o + 1:
            key = key[o + 1:c]
    return (siphash13(bytes.fromhex(seed), key) >> 40) % nshards


def on_shard(prefix, shard, nshards=2, n=1):
    """The first @n names prefix0, prefix1... that live on @shard of @nshards."""
    out, i = [], 0
    while len(out) < n:
        if key_shard("%s%d" % (prefix, i), nshards) == shard:
            out.append("%s%d" % (prefix, i))
        i += 1
    return out if n > 1 else out[0]


def telemetry_cmd(path, cmd):
    """The reply to telemetry command @cmd on the socket at @path, parsed."""
    import json
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(10)
    u.connect(path)
    u.sendall(cmd.encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        d = u.recv(65536)
        check(d, "telemetry closed: %r" % data)
        data += d
    u.close()
    return json.loads(data)


def telemetry_app(path):
    """The app counters of /stats from the telemetry socket at @path."""
    return telemetry_cmd(path, "/stats")["/stats"]["total"]["app"]


# ---- the command list compared with the oracle ----

def command_script():
    """(args, mode): mode 'exact' compares bytes, 'near' integers within 2 (s) or 2000
    (ms), 'sorted' arrays as sets, 'type' only the reply's type byte."""
    now = int(time.time())
    c = []

    def a(mode, *args):
        c.append((args, mode))

    a(E, "FLUSHALL")
    # strings: SET and its options
    a(E, "SET", "s1", "hello"); a(E, "GET", "s1"); a(E, "GET", "nokey")
    a(E, "SET", "s1", "world", "XX"); a(E, "SET", "s2", "x", "XX"); a(E, "SET", "s2", "x", "NX")
    a(E, "SET", "s2", "y", "NX"); a(E, "SET", "s1", "v", "GET"); a(E, "SET", "s3", "v", "GET")
    a(E, "SET", "s4", "v", "NX", "GET"); a(E, "SET", "s4", "w", "NX", "GET")
    a(E, "SET", "s1", "a", "EX", "100"); a(E, "TTL", "s1")
    a(E, "SET", "s1", "a", "PX", "100000"); a(N, "PTTL", "s1")
    a(E, "SET", "s1", "a", "EXAT", str(now + 1000)); a(N, "TTL", "s1")
    a(E, "SET", "s1", "a", "PXAT", str((now + 1000) * 1000)); a(N, "PTTL", "s1")
    a(E, "SET", "s1", "b", "KEEPTTL"); a(N, "TTL", "s1"); a(E, "SET", "s1", "c"); a(E, "TTL", "s1")
    a(E, "SET", "s1", "a", "EX", "0"); a(E, "SET", "s1", "a", "EX", "-5")
    a(E, "SET", "s1", "a", "EX", "abc"); a(E, "SET", "s1", "a", "PX", "9223372036854775807")
    a(E, "SET", "s1", "a", "EX", "9223372036854775807"); a(E, "SET", "s1", "a", "NX", "XX")
    a(E, "SET", "s1", "a", "EX", "10", "PX", "10"); a(E, "SET", "s1", "a", "KEEPTTL", "EX", "10")
    a(E, "SET", "s1", "a", "EX"); a(E, "SET", "s1", "a", "foo"); a(E, "SET", "s1")
    a(E, "SET", "s1", "a", "ex", "10", "get"); a(E, "SET", "s1", "a", "EXAT", "1"); a(E, "GET", "s1")
    a(E, "SET", "bin", b"a\x00b\r\nc"); a(E, "GET", "bin"); a(E, "SET", "", "empty"); a(E, "GET", "")
    a(E, "SETNX", "n1", "1"); a(E, "SETNX", "n1", "2"); a(E, "GET", "n1"); a(E, "SETNX", "n1")
    a(E, "SETEX", "e1", "100", "v"); a(E, "TTL", "e1"); a(E, "SETEX", "e1", "0", "v")
    a(E, "SETEX", "e1", "x", "v"); a(E, "SETEX", "e1", "100")
    a(E, "PSETEX", "e2", "100000", "v"); a(N, "PTTL", "e2"); a(E, "PSETEX", "e2", "-1", "v")
    a(E, "GETSET", "s1", "new"); a(E, "GETSET", "nokey2", "v"); a(E, "GET", "nokey2")
    a(E, "GETSET", "s1")
    a(E, "GETDEL", "s1"); a(E, "GETDEL", "s1"); a(E, "GETDEL", "s1", "x")
    a(E, "GETEX", "e1"); a(E, "GETEX", "e1", "PERSIST"); a(E, "TTL", "e1")
    a(E, "GETEX", "e1", "EX", "100"); a(E, "TTL", "e1"); a(E, "GETEX", "e1", "PX", "100000")
    a(N, "PTTL", "e1"); a(E, "GETEX", "e1", "EXAT", str(now + 100)); a(N, "TTL", "e1")
    a(E, "GETEX", "e1", "PXAT", str((now + 200) * 1000)); a(N, "TTL", "e1")
    a(E, "GETEX", "nokey", "EX", "10"); a(E, "GETEX", "e1", "EX", "0")
    a(E, "GETEX", "e1", "KEEPTTL"); a(E, "GETEX", "e1", "PERSIST", "EX", "10")
    a(E, "GETEX", "e1", "EX"); a(E, "GETEX", "e1", "EXAT", "1"); a(E, "EXISTS", "e1"); a(E, "GETEX")
    # multi-key strings
    a(E, "MSET", "m1", "1", "m2", "2", "m3", "3"); a(E, "MGET", "m1", "m2", "m3", "nokey")
    a(E, "MSET", "m1"); a(E, "MSET", "m1", "1", "m2"); a(E, "MGET")
    a(E, "MSETNX", "m1", "x", "m4", "y"); a(E, "MSETNX", "m4", "x", "m5", "y")
    a(E, "MGET", "m4", "m5", "m1"); a(E, "MSETNX", "m6"); a(E, "MSETNX", "m6", "1", "m7")
    keys = ["k%d" % i for i in range(40)]
    mset = []
    for i, k in enumerate(keys):
        mset += [k, "v%d" % i]
    a(E, "MSET", *mset); a(E, "MGET", *(keys + ["nokey"] + keys[::-1]))
    a(E, "MSETNX", *(["new%d" % i for i in range(10) for _ in (0, 1)]))
    a(E, "MGET", *["new%d" % i for i in range(10)])
    # APPEND, STRLEN, GETRANGE, SETRANGE
    a(E, "APPEND", "ap", "hello"); a(E, "APPEND", "ap", " world"); a(E, "GET", "ap")
    a(E, "APPEND", "ap"); a(E, "STRLEN", "ap"); a(E, "STRLEN", "nokey"); a(E, "STRLEN")
    a(E, "GETRANGE", "ap", "0", "4"); a(E, "GETRANGE", "ap", "-5", "-1"); a(E, "GETRANGE", "ap", "5", "1")
    a(E, "GETRANGE", "ap", "-1", "-5"); a(E, "GETRANGE", "ap", "0", "100"); a(E, "GETRANGE", "nokey", "0", "1")
    a(E, "GETRANGE", "ap", "a", "1"); a(E, "GETRANGE", "ap", "0", "b"); a(E, "GETRANGE", "ap", "-100", "-50")
    a(E, "GETRANGE", "ap", "0")
    a(E, "SETRANGE", "ap", "6", "WORLD"); a(E, "GET", "ap"); a(E, "SETRANGE", "sr", "5", "x"); a(E, "GET", "sr")
    a(E, "SETRANGE", "sr", "-1", "x"); a(E, "SETRANGE", "sr", "0", ""); a(E, "SETRANGE", "newsr", "0", "")
    a(E, "EXISTS", "newsr"); a(E, "SETRANGE", "ap", "536870911", "xx"); a(E, "SETRANGE", "ap", "x", "y")
    a(E, "SETRANGE", "ap", "2", "")
    # counters
    a(E, "INCR", "i1"); a(E, "INCR", "i1"); a(E, "DECR", "i1"); a(E, "INCRBY", "i1", "10")
    a(E, "DECRBY", "i1", "5"); a(E, "INCRBY", "i1", "abc"); a(E, "INCR", "ap")
    a(E, "SET", "big", "9223372036854775807"); a(E, "INCR", "big"); a(E, "DECRBY", "big", "-1")
    a(E, "SET", "small", "-9223372036854775808"); a(E, "DECR", "small")
    a(E, "SET", "i2", " 1"); a(E, "INCR", "i2"); a(E, "SET", "i3", "01"); a(E, "INCR", "i3")
    a(E, "DECRBY", "i1", "-9223372036854775808"); a(E, "INCRBY", "i1", "9223372036854775808")
    a(E, "SET", "ttlc", "5", "EX", "1000"); a(E, "INCR", "ttlc"); a(E, "TTL", "ttlc")
    a(E, "INCR"); a(E, "INCRBY", "i1"); a(E, "DECR", "a", "b")
    a(E, "INCRBYFLOAT", "f1", "1.5"); a(E, "INCRBYFLOAT", "f1", "0.1"); a(E, "INCRBYFLOAT", "f1", "-1.6")
    a(E, "INCRBYFLOAT", "f1", "abc"); a(E, "INCRBYFLOAT", "f2", "3.0e3"); a(E, "SET", "f3", "1.5e2")
    a(E, "INCRBYFLOAT", "f3", "1"); a(E, "INCRBYFLOAT", "ap", "1"); a(E, "INCRBYFLOAT", "f1", "inf")
    a(E, "INCRBYFLOAT", "f1", " 1"); a(E, "INCRBYFLOAT", "f4", "10.50"); a(E, "INCRBYFLOAT", "f4", "-10.5")
    a(E, "INCRBYFLOAT", "f5", "5.0e-3"); a(E, "INCRBYFLOAT", "f1")
    # keys
    a(E, "DEL", "m1", "m2", "nokey"); a(E, "DEL", "m1"); a(E, "DEL", *keys[:20]); a(E, "DEL")
    a(E, "UNLINK", "m3", "m4"); a(E, "UNLINK", *keys[20:]); a(E, "UNLINK")
    a(E, "EXISTS", "m5", "m5", "nokey"); a(E, "EXISTS"); a(E, "TYPE", "m5"); a(E, "TYPE", "nokey")
    a(E, "TYPE")
    a(E, "EXPIRE", "m5", "100"); a(E, "TTL", "m5"); a(E, "EXPIRE", "m5", "100", "NX")
    a(E, "EXPIRE", "m5", "200", "XX"); a(E, "EXPIRE", "m5", "50", "GT"); a(E, "EXPIRE", "m5", "300", "GT")
    a(E, "EXPIRE", "m5", "10", "LT"); a(E, "EXPIRE", "m5", "20", "lt"); a(E, "TTL", "m5")
    a(E, "EXPIRE", "m5", "10", "NX", "XX"); a(E, "EXPIRE", "m5", "10", "GT", "LT")
    a(E, "EXPIRE", "m5", "10", "FOO"); a(E, "EXPIRE", "nokey", "10"); a(E, "EXPIRE", "m5", "abc")
    a(E, "EXPIRE", "m5", "9223372036854775807"); a(E, "EXPIRE", "m5")
    a(E, "SET", "nottl", "1"); a(E, "EXPIRE", "nottl", "10", "XX"); a(E, "EXPIRE", "nottl", "10", "GT")
    a(E, "EXPIRE", "nottl", "10", "LT"); a(E, "TTL", "nottl"); a(E, "EXPIRE", "nottl", "10", "NX")
    a(E, "PEXPIRE", "m5", "100000"); a(N, "PTTL", "m5"); a(E, "PEXPIRE", "m5", "x")
    a(E, "EXPIREAT", "m5", str(now + 1000)); a(N, "TTL", "m5")
    a(E, "PEXPIREAT", "m5", str((now + 1000) * 1000)); a(N, "PTTL", "m5")
    a(E, "EXPIREAT", "m5", "x"); a(E, "PEXPIREAT", "m5", "9223372036854775807")
    a(E, "PERSIST", "m5"); a(E, "PERSIST", "m5"); a(E, "PERSIST", "nokey"); a(E, "TTL", "m5")
    a(E, "PTTL", "nokey"); a(E, "TTL", "nokey"); a(E, "PTTL", "m5"); a(E, "TTL")
    a(E, "EXPIRE", "m5", "-1"); a(E, "EXISTS", "m5"); a(E, "SET", "pa", "1")
    a(E, "PEXPIREAT", "pa", "1"); a(E, "GET", "pa")
    # RENAME / RENAMENX (across shards for some of the pairs when there are two)
    a(E, "RENAME", "r1", "r2"); a(E, "SET", "r1", "v"); a(E, "EXPIRE", "r1", "1000")
    a(E, "RENAME", "r1", "r2"); a(E, "TTL", "r2"); a(E, "GET", "r1"); a(E, "GET", "r2")
    a(E, "RENAME", "r2", "r2"); a(E, "RENAMENX", "r2", "r2"); a(E, "SET", "r3", "x")
    a(E, "RENAMENX", "r2", "r3"); a(E, "RENAMENX", "r2", "r4"); a(E, "GET", "r4"); a(E, "GET", "r2")
    a(E, "RENAMENX", "nokey", "r9"); a(E, "RENAME", "r4"); a(E, "RENAMENX", "r4")
    for i in range(12):
        a(E, "SET", "ra%d" % i, "val%d" % i); a(E, "SET", "rc%d" % i, "old")
        a(E, "RENAME", "ra%d" % i, "rb%d" % i); a(E, "MGET", "ra%d" % i, "rb%d" % i)
        a(E, "RENAMENX", "rb%d" % i, "rc%d" % i); a(E, "RENAME", "rb%d" % i, "rc%d" % i)
        a(E, "GET", "rc%d" % i); a(E, "RENAMENX", "rc%d" % i, "rd%d" % i)
        a(E, "MGET", "rb%d" % i, "rc%d" % i, "rd%d" % i)
    # whole keyspace
    a(S, "KEYS", "*"); a(S, "KEYS", "r*"); a(S, "KEYS", "[a-f]*"); a(S, "KEYS", "?1")
    a(S, "KEYS", "nomatch*"); a(E, "KEYS"); a(E, "DBSIZE"); a(E, "DBSIZE", "x"); a(T, "RANDOMKEY")
    a(E, "SCAN", "x"); a(E, "SCAN", "0", "COUNT", "0"); a(E, "SCAN", "0", "COUNT", "x")
    a(E, "SCAN", "0", "FOO"); a(E, "SCAN", "0", "MATCH"); a(E, "SCAN")
    a(E, "FLUSHDB", "foo"); a(E, "FLUSHDB", "ASYNC"); a(E, "DBSIZE"); a(E, "SET", "x", "1")
    a(E, "FLUSHDB", "SYNC"); a(E, "FLUSHDB", "a", "b"); a(E, "RANDOMKEY"); a(E, "SET", "x", "1")
    a(E, "RANDOMKEY"); a(E, "FLUSHALL"); a(E, "FLUSHALL", "bad"); a(E, "DBSIZE")
    a(E, "SCAN", "0"); a(E, "KEYS", "*")
    # server and connection
    a(E, "PING"); a(E, "PING", "hi"); a(E, "PING", "a", "b"); a(E, "ping")
    a(E, "ECHO", "x"); a(E, "ECHO"); a(E, "ECHO", b"\x00\xff")
    a(E, "SELECT", "0"); a(E, "SELECT", "1"); a(E, "SELECT", "x"); a(E, "SELECT", "99999999999")
    a(E, "SELECT", "-1"); a(E, "SELECT")
    a(E, "CLIENT", "GETNAME"); a(E, "CLIENT", "SETNAME", "foo"); a(E, "CLIENT", "GETNAME")
    a(E, "CLIENT", "SETNAME", "a b"); a(E, "CLIENT", "SETNAME", "a\nb"); a(E, "CLIENT", "SETNAME", "")
    a(E, "CLIENT", "GETNAME"); a(E, "CLIENT", "FOO"); a(E, "CLIENT"); a(E, "CLIENT", "SETNAME")
    a(E, "CLIENT", "GETNAME", "x"); a(T, "CLIENT", "ID"); a(E, "CLIENT", "ID", "x")
    a(E, "HELLO", "4"); a(E, "HELLO", "1"); a(E, "HELLO", "x"); a(E, "HELLO", "2", "FOO")
    a(E, "HELLO", "2", "SETNAME", "a b"); a(E, "HELLO", "2", "AUTH", "nobody", "pw")
    a(E, "CONFIG", "GET", "maxclients"); a(E, "CONFIG", "GET", "maxmemory")
    a(E, "CONFIG", "GET", "save"); a(E, "CONFIG", "GET", "appendonly")
    a(E, "CONFIG", "GET", "nonexistent"); a(E, "CONFIG", "GET", "maxmemory-policy")
    a(E, "CONFIG", "GET", "databases"); a(E, "CONFIG"); a(E, "CONFIG", "FOO"); a(E, "CONFIG", "GET")
    a(T, "TIME"); a(E, "TIME", "x"); a(T, "COMMAND", "COUNT"); a(T, "COMMAND", "INFO", "get")
    a(T, "COMMAND", "DOCS", "get"); a(E, "COMMAND", "FOO"); a(E, "COMMAND", "COUNT", "x")
    a(E, "INFO", "nosuchsection")
    a(E, "FOO"); a(E, "FOO", "bar", "baz"); a(E, "foo", "x" * 200); a(E, "FOO", "a\r\nb")
    a(E, "GET"); a(E, "GET", "a", "b")
    for sec in (hash_script, list_script, set_script, zset_script, multi_script):
        c += sec()
    return c


def _script():
    c = []

    def a(mode, *args):
        c.append((args, mode))
    return c, a


E, N, S, T, P, X = "exact", "near", "sorted", "type", "pairs", "scan"


def wrongtype(a, *cmds):
    """Each command against a key of another type: WRONGTYPE, byte for byte."""
    for cmd in cmds:
        a(E, *cmd)


def hash_script():
    c, a = _script()
    a(E, "DEL", "h", "h2", "hbig", "hstr")
    a(E, "HSET", "h", "f1", "v1", "f2", "v2"); a(E, "HSET", "h", "f1", "new", "f3", "v3")
    a(E, "HGET", "h", "f1"); a(E, "HGET", "h", "nof"); a(E, "HGET", "nokey", "f")
    a(E, "HGETALL", "h"); a(E, "HKEYS", "h"); a(E, "HVALS", "h"); a(E, "HLEN", "h")
    a(E, "HMGET", "h", "f1", "nof", "f3"); a(E, "HMGET", "nokey", "a", "b"); a(E, "HSTRLEN", "h", "f1")
    a(E, "HSTRLEN", "h", "nof"); a(E, "HEXISTS", "h", "f2"); a(E, "HEXISTS", "h", "x")
    a(E, "HSETNX", "h", "f1", "x"); a(E, "HSETNX", "h", "f9", "x"); a(E, "HGET", "h", "f9")
    a(E, "HMSET", "h", "m1", "1", "m2", "2"); a(E, "HMSET", "h", "m1"); a(E, "HSET", "h", "a")
    a(E, "HSET", "h", "a", "b", "c"); a(E, "HSET", "h"); a(E, "HGET", "h")
    a(E, "HINCRBY", "h", "n", "5"); a(E, "HINCRBY", "h", "n", "-7"); a(E, "HINCRBY", "h", "f1", "1")
    a(E, "HINCRBY", "h", "n", "x"); a(E, "HSET", "h", "big", "9223372036854775807")
    a(E, "HINCRBY", "h", "big", "1"); a(E, "HINCRBYFLOAT", "h", "fl", "1.5")
    a(E, "HINCRBYFLOAT", "h", "fl", "0.1"); a(E, "HINCRBYFLOAT", "h", "f1", "1")
    a(E, "HINCRBYFLOAT", "h", "fl", "x"); a(E, "HINCRBYFLOAT", "h", "fl", "inf")
    a(E, "HINCRBYFLOAT", "h", "fl", "-1.6"); a(E, "HINCRBYFLOAT", "h", "n", "2.5e3")
    a(E, "HINCRBYFLOAT", "h", "big", "1e308"); a(P, "HGETALL", "h")
    a(E, "HDEL", "h", "f1", "nof", "f2"); a(E, "HDEL", "h"); a(E, "HDEL", "nokey", "a")
    a(E, "HLEN", "h"); a(E, "OBJECT", "ENCODING", "h"); a(E, "TYPE", "h")
    a(E, "HDEL", "h", "f3", "f9", "m1", "m2", "n", "big", "fl"); a(E, "EXISTS", "h")
    a(E, "HRANDFIELD", "nokey"); a(E, "HRANDFIELD", "nokey", "5"); a(E, "HRANDFIELD", "h", "x")
    a(E, "HRANDFIELD", "h", "1", "foo"); a(E, "HRANDFIELD", "h", "1", "WITHVALUES", "x")
    a(E, "HRANDFIELD", "h", "-9223372036854775808")
    a(E, "HRANDFIELD", "h", "9223372036854775807", "WITHVALUES")
    a(E, "HSET", "h2", "a", "1", "b", "2", "c", "3")
    a(E, "HRANDFIELD", "h2", "10"); a(E, "HRANDFIELD", "h2", "3", "WITHVALUES"); a(E, "HRANDFIELD", "h2", "0")
    a(T, "HRANDFIELD", "h2"); a(T, "HRANDFIELD", "h2", "-5"); a(T, "HRANDFIELD", "h2", "2", "WITHVALUES")
    a(E, "HSCAN", "h2", "0"); a(E, "HSCAN", "h2", "0", "MATCH", "a*"); a(E, "HSCAN", "h2", "0", "COUNT", "1")
    a(E, "HSCAN", "h2", "x"); a(E, "HSCAN", "nokey", "0"); a(E, "HSCAN", "h2", "0", "COUNT", "0")
    a(E, "HSCAN", "h2", "0", "TYPE", "hash"); a(E, "HSCAN", "h2", "0", "FOO"); a(E, "HSCAN", "h2")
    # 512 fields stay a listpack; the 513th or a value of 65 bytes makes a hashtable
    for i in range(0, 512, 64):
        args = []
        for j in range(i, i + 64):
            args += ["f%d" % j, "v"]
        a(E, "HSET", "hbig", *args)
    a(E, "OBJECT", "ENCODING", "hbig"); a(E, "HLEN", "hbig"); a(E, "HSET", "hbig", "f512", "v")
    a(E, "OBJECT", "ENCODING", "hbig"); a(S, "HKEYS", "hbig"); a(E, "HGET", "hbig", "f300")
    a(E, "HSET", "h2", "long", "x" * 65); a(E, "OBJECT", "ENCODING", "h2"); a(P, "HGETALL", "h2")
    a(E, "HSET", "h3", "x" * 65, "v"); a(E, "OBJECT", "ENCODING", "h3")
    a(E, "HSET", "h5", "f", "v"); a(E, "HSETNX", "h5", "f", "x" * 65); a(E, "OBJECT", "ENCODING", "h5")
    a(E, "HSETNX", "h5", "g", "x" * 65); a(E, "OBJECT", "ENCODING", "h5")
    a(E, "HSET", "h4", "a", "b"); a(E, "HDEL", "h4", "a"); a(E, "TYPE", "h4"); a(E, "EXISTS", "h4")
    a(E, "SET", "hstr", "x")
    wrongtype(a, ("HSET", "hstr", "a", "b"), ("HGET", "hstr", "a"), ("HMGET", "hstr", "a"),
              ("HDEL", "hstr", "a"), ("HLEN", "hstr"), ("HSTRLEN", "hstr", "a"),
              ("HEXISTS", "hstr", "a"), ("HINCRBY", "hstr", "a", "1"),
              ("HINCRBYFLOAT", "hstr", "a", "1"), ("HKEYS", "hstr"), ("HVALS", "hstr"),
              ("HGETALL", "hstr"), ("HSETNX", "hstr", "a", "b"), ("HMSET", "hstr", "a", "b"),
              ("HRANDFIELD", "hstr"), ("HRANDFIELD", "hstr", "2"), ("HSCAN", "hstr", "0"),
              ("GET", "h2"), ("APPEND", "h2", "x"), ("STRLEN", "h2"), ("INCR", "h2"),
              ("INCRBYFLOAT", "h2", "1"), ("GETRANGE", "h2", "0", "1"), ("SETRANGE", "h2", "0", "x"),
              ("GETSET", "h2", "x"), ("GETDEL", "h2"), ("GETEX", "h2"), ("SET", "h2", "x", "GET"),
              ("MGET", "h2", "hstr"), ("DECRBY", "h2", "1"), ("TYPE", "h2"))
    a(E, "SET", "h2", "now a string"); a(E, "TYPE", "h2"); a(E, "GET", "h2")
    # RENAME keeps the value and its encoding, on one shard and across two
    for dst in (on_shard("hr", 0), on_shard("hr", 1)):
        a(E, "DEL", dst); a(E, "HSET", "hsrc", "a", "1", "b", "2"); a(E, "EXPIRE", "hsrc", "1000")
        a(E, "RENAME", "hsrc", dst); a(E, "HGETALL", dst); a(E, "TTL", dst); a(E, "EXISTS", "hsrc")
        a(E, "OBJECT", "ENCODING", dst); a(E, "RENAMENX", dst, "hsrc"); a(E, "HGETALL", "hsrc")
    a(E, "RENAME", "hbig", on_shard("hbr", 1)); a(E, "OBJECT", "ENCODING", on_shard("hbr", 1))
    a(E, "HLEN", on_shard("hbr", 1))
    objects(a)
    return c


def list_script():
    c, a = _script()
    a(E, "DEL", "l", "l2", "lbig", "lstr")
    a(E, "RPUSH", "l", "a", "b", "c"); a(E, "LPUSH", "l", "z", "y"); a(E, "LRANGE", "l", "0", "-1")
    a(E, "LLEN", "l"); a(E, "LLEN", "nokey"); a(E, "OBJECT", "ENCODING", "l"); a(E, "TYPE", "l")
    a(E, "LPUSHX", "l", "x"); a(E, "RPUSHX", "l", "w"); a(E, "LPUSHX", "nokey", "x")
    a(E, "RPUSHX", "nokey", "x"); a(E, "EXISTS", "nokey"); a(E, "LPUSH", "l"); a(E, "RPUSH")
    for r in (("0", "0"), ("-1", "-1"), ("-3", "-1"), ("2", "100"), ("5", "2"), ("-100", "1"),
              ("100", "200"), ("-100", "-50"), ("1", "-2"), ("x", "1"), ("0", "y")):
        a(E, "LRANGE", "l", *r)
    a(E, "LRANGE", "nokey", "0", "-1"); a(E, "LRANGE", "l", "0")
    for i in ("0", "3", "-1", "-8", "7", "-9", "100", "x"):
        a(E, "LINDEX", "l", i)
    a(E, "LINDEX", "nokey", "0"); a(E, "LINDEX", "nokey", "x")
    a(E, "LSET", "l", "0", "first"); a(E, "LSET", "l", "-1", "last"); a(E, "LSET", "l", "100", "x")
    a(E, "LSET", "l", "x", "y"); a(E, "LSET", "nokey", "0", "x"); a(E, "LRANGE", "l", "0", "-1")
    a(E, "LINSERT", "l", "BEFORE", "a", "pre"); a(E, "LINSERT", "l", "after", "c", "post")
    a(E, "LINSERT", "l", "before", "nope", "x"); a(E, "LINSERT", "l", "middle", "a", "x")
    a(E, "LINSERT", "nokey", "before", "a", "x"); a(E, "LRANGE", "l", "0", "-1")
    a(E, "RPUSH", "l2", "a", "b", "a", "c", "a", "b", "a")
    a(E, "LPOS", "l2", "a"); a(E, "LPOS", "l2", "a", "RANK", "2"); a(E, "LPOS", "l2", "a", "RANK", "-1")
    a(E, "LPOS", "l2", "a", "COUNT", "0"); a(E, "LPOS", "l2", "a", "COUNT", "2", "RANK", "2")
    a(E, "LPOS", "l2", "a", "RANK", "-2", "COUNT", "2"); a(E, "LPOS", "l2", "a", "MAXLEN", "3", "COUNT", "0")
    a(E, "LPOS", "l2", "zz"); a(E, "LPOS", "l2", "zz", "COUNT", "1"); a(E, "LPOS", "nokey", "a")
    a(E, "LPOS", "nokey", "a", "COUNT", "1"); a(E, "LPOS", "l2", "a", "RANK", "0")
    a(E, "LPOS", "l2", "a", "RANK", "x"); a(E, "LPOS", "l2", "a", "COUNT", "-1")
    a(E, "LPOS", "l2", "a", "COUNT", "x"); a(E, "LPOS", "l2", "a", "MAXLEN", "-1")
    a(E, "LPOS", "l2", "a", "FOO"); a(E, "LPOS", "l2", "a", "RANK")
    a(E, "LPOS", "l2", "a", "RANK", "-9223372036854775808")
    a(E, "LPOS", "l2", "a", "RANK", "-9223372036854775808", "COUNT", "0")
    a(E, "LPOS", "l2", "a", "RANK", "-9223372036854775808", "COUNT", "2")
    a(E, "LREM", "l2", "2", "a"); a(E, "LRANGE", "l2", "0", "-1"); a(E, "LREM", "l2", "-1", "a")
    a(E, "LRANGE", "l2", "0", "-1"); a(E, "LREM", "l2", "0", "b"); a(E, "LRANGE", "l2", "0", "-1")
    a(E, "LREM", "l2", "x", "a"); a(E, "LREM", "nokey", "0", "a"); a(E, "LREM", "l2", "0", "a")
    a(E, "LREM", "l2", "0", "c"); a(E, "EXISTS", "l2")
    a(E, "LPOP", "l"); a(E, "RPOP", "l"); a(E, "LPOP", "l", "2"); a(E, "RPOP", "l", "0")
    a(E, "LPOP", "l", "-1"); a(E, "LPOP", "l", "x"); a(E, "LPOP", "l", "1", "2"); a(E, "LPOP", "nokey")
    a(E, "LPOP", "nokey", "0"); a(E, "LPOP", "nokey", "3"); a(E, "RPOP", "l", "100"); a(E, "EXISTS", "l")
    a(E, "RPUSH", "l", "1", "2", "3", "4", "5", "6")
    for r in (("1", "-2"), ("0", "100"), ("-2", "-1"), ("5", "2")):
        a(E, "LTRIM", "l", *r); a(E, "LRANGE", "l", "0", "-1")
    a(E, "LTRIM", "l", "x", "1"); a(E, "LTRIM", "nokey", "0", "1"); a(E, "EXISTS", "l")
    # a list of many nodes: 3,000 elements of 100 bytes (8 KB nodes), then ranges and edits
    for i in range(0, 3000, 500):
        a(E, "RPUSH", "lbig", *["%s%04d" % ("e" * 96, j) for j in range(i, i + 500)])
    a(E, "LLEN", "lbig"); a(E, "LINDEX", "lbig", "1234"); a(E, "LINDEX", "lbig", "-1001")
    a(E, "LRANGE", "lbig", "995", "1005"); a(E, "LRANGE", "lbig", "-7", "-3")
    a(E, "LINSERT", "lbig", "BEFORE", "e" * 96 + "1500", "mid"); a(E, "LINDEX", "lbig", "1500")
    a(E, "LSET", "lbig", "2000", "x" * 9000); a(E, "LRANGE", "lbig", "1999", "2001")
    a(E, "LREM", "lbig", "0", "mid"); a(E, "LTRIM", "lbig", "100", "-100"); a(E, "LLEN", "lbig")
    a(E, "LINDEX", "lbig", "0"); a(E, "LPOS", "lbig", "e" * 96 + "2500")
    a(E, "RPUSH", "lbig", "x" * 20000); a(E, "LINDEX", "lbig", "-1"); a(E, "RPOP", "lbig", "2")
    a(E, "LPOP", "lbig", "1000"); a(E, "LLEN", "lbig"); a(E, "OBJECT", "ENCODING", "lbig")
    a(E, "SET", "lstr", "x")
    wrongtype(a, ("LPUSH", "lstr", "a"), ("RPUSH", "lstr", "a"), ("LPUSHX", "lstr", "a"),
              ("RPUSHX", "lstr", "a"), ("LPOP", "lstr"), ("RPOP", "lstr", "2"), ("LLEN", "lstr"),
              ("LRANGE", "lstr", "0", "1"), ("LINDEX", "lstr", "0"), ("LSET", "lstr", "0", "a"),
              ("LINSERT", "lstr", "before", "a", "b"), ("LREM", "lstr", "0", "a"),
              ("LTRIM", "lstr", "0", "1"), ("LPOS", "lstr", "a"), ("LINDEX", "lstr", "x"),
              ("LPOP", "lstr", "0"), ("HGET", "lbig", "a"), ("GET", "lbig"))
    return c


def set_script():
    c, a = _script()
    a(E, "DEL", "s", "s2", "sbig", "sstr")
    a(E, "SADD", "s", "3", "1", "2", "2"); a(E, "SMEMBERS", "s"); a(E, "OBJECT", "ENCODING", "s")
    a(E, "SCARD", "s"); a(E, "SISMEMBER", "s", "2"); a(E, "SISMEMBER", "s", "02"); a(E, "TYPE", "s")
    a(E, "SMISMEMBER", "s", "1", "9", "3"); a(E, "SMISMEMBER", "nokey", "a"); a(E, "SCARD", "nokey")
    a(E, "SADD", "s", "-9223372036854775808", "9223372036854775807"); a(E, "SMEMBERS", "s")
    a(E, "OBJECT", "ENCODING", "s"); a(E, "SADD", "s", "x"); a(E, "OBJECT", "ENCODING", "s")
    a(S, "SMEMBERS", "s"); a(E, "SREM", "s", "x", "nope", "1"); a(E, "OBJECT", "ENCODING", "s")
    a(E, "SREM", "nokey", "a"); a(E, "SREM", "s"); a(E, "SADD", "s"); a(E, "SISMEMBER", "nokey", "a")
    a(E, "SADD", "s2", "b", "a"); a(E, "OBJECT", "ENCODING", "s2"); a(S, "SMEMBERS", "s2")
    a(E, "SADD", "s3", "10"); a(E, "SADD", "s3", "9223372036854775808"); a(E, "OBJECT", "ENCODING", "s3")
    a(E, "SADD", "s4", "1", "01"); a(E, "OBJECT", "ENCODING", "s4"); a(E, "SREM", "s4", "01", "1")
    a(E, "EXISTS", "s4")
    a(E, "SPOP", "nokey"); a(E, "SPOP", "nokey", "2"); a(E, "SPOP", "s", "1", "2"); a(E, "SPOP", "s", "x")
    a(E, "SPOP", "s", "-1"); a(E, "SPOP", "s2", "0"); a(E, "SRANDMEMBER", "nokey")
    a(E, "SRANDMEMBER", "nokey", "3"); a(E, "SRANDMEMBER", "s", "1", "2"); a(E, "SRANDMEMBER", "s", "x")
    a(E, "SRANDMEMBER", "s", "-9223372036854775808"); a(E, "SRANDMEMBER", "s2", "0")
    a(S, "SRANDMEMBER", "s2", "5"); a(T, "SRANDMEMBER", "s2"); a(T, "SRANDMEMBER", "s2", "-5")
    a(E, "SADD", "s5", "1", "2", "3"); a(E, "SRANDMEMBER", "s5", "10"); a(E, "SPOP", "s5", "3")
    a(E, "EXISTS", "s5"); a(E, "SADD", "s5", "7"); a(E, "SPOP", "s5"); a(E, "EXISTS", "s5")
    a(X, "SSCAN", "s2", "0"); a(E, "SSCAN", "s2", "x"); a(E, "SSCAN", "nokey", "0"); a(E, "SSCAN", "s2")
    a(E, "SSCAN", "s2", "0", "TYPE", "set"); a(E, "SSCAN", "s2", "0", "COUNT", "0")
    a(E, "SADD", "s6", "1", "2", "3", "4"); a(E, "SSCAN", "s6", "0", "MATCH", "[12]")
    # 512 integers stay an intset; the 513th makes it a hashtable
    for i in range(0, 512, 128):
        a(E, "SADD", "sbig", *[str(j * 3) for j in range(i, i + 128)])
    a(E, "OBJECT", "ENCODING", "sbig"); a(E, "SCARD", "sbig"); a(E, "SMEMBERS", "sbig")
    a(E, "SADD", "sbig", "5000"); a(E, "OBJECT", "ENCODING", "sbig"); a(E, "SISMEMBER", "sbig", "300")
    a(S, "SMEMBERS", "sbig"); a(E, "SET", "sstr", "x")
    wrongtype(a, ("SADD", "sstr", "a"), ("SREM", "sstr", "a"), ("SMEMBERS", "sstr"),
              ("SISMEMBER", "sstr", "a"), ("SMISMEMBER", "sstr", "a"), ("SCARD", "sstr"),
              ("SPOP", "sstr"), ("SPOP", "sstr", "2"), ("SRANDMEMBER", "sstr"),
              ("SRANDMEMBER", "sstr", "2"), ("SSCAN", "sstr", "0"), ("HGET", "s2", "a"),
              ("LPUSH", "s2", "a"), ("GET", "s2"))
    return c


def zset_script():
    c, a = _script()
    a(E, "DEL", "z", "z2", "zbig", "zstr", "zl")
    a(E, "ZADD", "z", "1", "a", "2", "b", "3", "c"); a(E, "ZADD", "z", "0.1", "d", "1e20", "e")
    a(E, "ZADD", "z", "-0.0", "f", "inf", "g", "-inf", "h", "5e-324", "i")
    a(E, "ZRANGE", "z", "0", "-1", "WITHSCORES"); a(E, "OBJECT", "ENCODING", "z"); a(E, "TYPE", "z")
    a(E, "ZCARD", "z"); a(E, "ZCARD", "nokey"); a(E, "ZSCORE", "z", "d"); a(E, "ZSCORE", "z", "no")
    a(E, "ZSCORE", "nokey", "a"); a(E, "ZMSCORE", "z", "a", "no", "g"); a(E, "ZMSCORE", "nokey", "a")
    a(E, "ZRANK", "z", "c"); a(E, "ZREVRANK", "z", "c"); a(E, "ZRANK", "z", "no"); a(E, "ZRANK", "nokey", "a")
    # ZADD flags and errors
    for args in (("NX", "10", "a"), ("XX", "10", "a"), ("XX", "1", "new"), ("CH", "11", "a", "1", "n1"),
                 ("GT", "5", "a"), ("GT", "50", "a"), ("LT", "60", "a"), ("LT", "1", "a"),
                 ("INCR", "2", "a"), ("INCR", "2", "nope2"), ("NX", "INCR", "1", "a"),
                 ("XX", "INCR", "1", "nn"), ("GT", "INCR", "-1", "a"), ("GT", "CH", "0", "b", "9", "c"),
                 ("XX", "GT", "100", "a"), ("nx", "ch", "1", "zz", "2", "a"),
                 ("NX", "XX", "1", "a"), ("GT", "LT", "1", "a"), ("GT", "NX", "1", "a"),
                 ("INCR", "1", "a", "2", "b"), ("1",), ("1", "a", "2"), ("x", "a"), ("nan", "a"),
                 ("1e400", "a"), (" 1", "a"), ("INCR", "inf", "g"), ("INCR", "-inf", "g"), ("FOO", "1", "a")):
        a(E, "ZADD", "z", *args)
    a(E, "ZADD", "nokey", "XX", "1", "a"); a(E, "EXISTS", "nokey"); a(E, "ZADD", "nokey", "XX", "INCR", "1", "a")
    a(E, "ZINCRBY", "z", "1.5", "b"); a(E, "ZINCRBY", "z", "x", "b"); a(E, "ZINCRBY", "z", "1", "newm")
    a(E, "ZINCRBY", "z", "-inf", "g"); a(E, "ZINCRBY", "zi", "0.1", "m"); a(E, "ZINCRBY", "zi", "0.2", "m")
    a(E, "ZRANGE", "z", "0", "-1", "WITHSCORES")
    # ranges by rank, score and member, forward and reverse, with LIMIT
    for r in (("0", "2"), ("-3", "-1"), ("5", "1"), ("0", "100"), ("-100", "-50"), ("x", "1")):
        a(E, "ZRANGE", "z", *r); a(E, "ZREVRANGE", "z", *r, "WITHSCORES")
    for r in (("-inf", "+inf"), ("(1", "3"), ("1", "(3"), ("(1", "(1"), ("3", "1"), ("0x1", "2"),
              ("", ""), ("x", "1"), (" 1", "2"), ("-inf", "(0"), ("1e20", "inf"), ("(-inf", "(+inf")):
        a(E, "ZRANGEBYSCORE", "z", *r, "WITHSCORES"); a(E, "ZREVRANGEBYSCORE", "z", r[1], r[0])
        a(E, "ZCOUNT", "z", *r); a(E, "ZRANGE", "z", *r, "BYSCORE", "LIMIT", "1", "2")
    for lim in (("0", "1"), ("1", "-1"), ("-1", "5"), ("100", "1"), ("0", "0"), ("x", "1")):
        a(E, "ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", *lim)
        a(E, "ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", *lim, "WITHSCORES")
    a(E, "DEL", "zl"); a(E, "ZADD", "zl", *sum([["0", m] for m in "abcdefg"], []))
    for r in (("-", "+"), ("[b", "[d"), ("(b", "(d"), ("[b", "(b"), ("+", "-"), ("[d", "[b"),
              ("-", "[c"), ("(c", "+"), ("b", "c"), ("[a", "x"), ("-x", "+"), ("[", "(")):
        a(E, "ZRANGEBYLEX", "zl", *r); a(E, "ZREVRANGEBYLEX", "zl", r[1], r[0]); a(E, "ZLEXCOUNT", "zl", *r)
        a(E, "ZRANGE", "zl", *r, "BYLEX", "LIMIT", "1", "2")
    a(E, "ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "2", "3"); a(E, "ZRANGEBYLEX", "zl", "-", "+", "WITHSCORES")
    a(E, "ZRANGE", "zl", "-", "+", "BYLEX", "WITHSCORES"); a(E, "ZRANGE", "z", "0", "1", "LIMIT", "0", "1")
    a(E, "ZRANGEBYSCORE", "z", "1", "2", "REV"); a(E, "ZRANGE", "z", "0", "-1", "BYLEX")
    a(E, "ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"); a(E, "ZRANGE", "z", "0", "1", "REV", "REV")
    a(E, "ZRANGE", "z", "0", "1", "LIMIT", "1"); a(E, "ZRANGE", "z", "0"); a(E, "ZRANGE", "nokey", "0", "-1")
    a(E, "ZRANGE", "z", "0", "-1", "REV", "WITHSCORES"); a(E, "ZRANGE", "nokey", "x", "1")
    # removals and pops
    a(E, "ZADD", "z2", *sum([[str(i), "m%02d" % i] for i in range(20)], []))
    a(E, "ZREMRANGEBYRANK", "z2", "0", "1"); a(E, "ZREMRANGEBYRANK", "z2", "-2", "-1")
    a(E, "ZREMRANGEBYRANK", "z2", "5", "2"); a(E, "ZREMRANGEBYRANK", "z2", "x", "1")
    a(E, "ZREMRANGEBYSCORE", "z2", "(5", "8"); a(E, "ZREMRANGEBYSCORE", "z2", "x", "1")
    a(E, "ZREMRANGEBYLEX", "z2", "[m10", "(m12"); a(E, "ZREMRANGEBYLEX", "z2", "x", "+")
    a(E, "ZREMRANGEBYRANK", "nokey", "0", "1"); a(E, "ZRANGE", "z2", "0", "-1", "WITHSCORES")
    a(E, "ZPOPMIN", "z2"); a(E, "ZPOPMAX", "z2"); a(E, "ZPOPMIN", "z2", "2"); a(E, "ZPOPMAX", "z2", "0")
    a(E, "ZPOPMIN", "z2", "-1"); a(E, "ZPOPMIN", "z2", "x"); a(E, "ZPOPMIN", "z2", "1", "2")
    a(E, "ZPOPMIN", "nokey"); a(E, "ZPOPMIN", "nokey", "0"); a(E, "ZPOPMAX", "z2", "100")
    a(E, "EXISTS", "z2"); a(E, "ZREM", "z", "a", "no", "b"); a(E, "ZREM", "nokey", "a")
    a(E, "ZREM", "zl", *"abcdefg"); a(E, "EXISTS", "zl")
    a(E, "ZRANDMEMBER", "nokey"); a(E, "ZRANDMEMBER", "nokey", "3"); a(E, "ZRANDMEMBER", "z", "x")
    a(E, "ZRANDMEMBER", "z", "1", "foo"); a(E, "ZRANDMEMBER", "z", "-9223372036854775808")
    a(E, "ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"); a(E, "ZRANDMEMBER", "z", "0")
    a(E, "ZRANDMEMBER", "z", "100", "WITHSCORES"); a(T, "ZRANDMEMBER", "z"); a(T, "ZRANDMEMBER", "z", "-3")
    a(E, "ZSCAN", "z", "0"); a(E, "ZSCAN", "z", "0", "MATCH", "[a-e]*"); a(E, "ZSCAN", "z", "x")
    a(E, "ZSCAN", "nokey", "0"); a(E, "ZSCAN", "z", "0", "COUNT", "0"); a(E, "ZSCAN", "z")
    # 128 members stay a listpack; the 129th or a 65-byte member makes a skiplist
    a(E, "ZADD", "zbig", *sum([[str(i % 7), "m%03d" % i] for i in range(128)], []))
    a(E, "OBJECT", "ENCODING", "zbig"); a(E, "ZADD", "zbig", "3.5", "m128"); a(E, "OBJECT", "ENCODING", "zbig")
    a(E, "ZRANGE", "zbig", "0", "-1", "WITHSCORES"); a(E, "ZRANGE", "zbig", "(2", "4", "BYSCORE", "REV")
    a(E, "ZRANDMEMBER", "zbig", "500", "WITHSCORES")
    a(E, "ZRANK", "zbig", "m050"); a(E, "ZREVRANK", "zbig", "m050"); a(E, "ZCOUNT", "zbig", "1", "(3")
    a(E, "ZRANGEBYSCORE", "zbig", "2", "2", "LIMIT", "3", "4"); a(E, "ZREMRANGEBYSCORE", "zbig", "6", "6")
    a(E, "ZADD", "zbig", "-0.0", "negzero"); a(E, "ZSCORE", "zbig", "negzero")
    a(E, "ZREMRANGEBYRANK", "zbig", "10", "100"); a(E, "ZRANGE", "zbig", "0", "-1", "WITHSCORES")
    a(E, "OBJECT", "ENCODING", "zbig"); a(X, "ZSCAN", "zbig", "0", "COUNT", "1000")
    a(E, "ZADD", "zlong", "1", "x" * 65); a(E, "OBJECT", "ENCODING", "zlong"); a(E, "ZADD", "z3", "1", "a")
    a(E, "ZADD", "z3", "2", "x" * 65); a(E, "OBJECT", "ENCODING", "z3"); a(E, "ZRANGE", "z3", "0", "-1")
    a(E, "ZPOPMAX", "zbig", "3"); a(E, "ZPOPMIN", "zbig", "3")
    a(E, "SET", "zstr", "x")
    wrongtype(a, ("ZADD", "zstr", "1", "a"), ("ZINCRBY", "zstr", "1", "a"), ("ZREM", "zstr", "a"),
              ("ZCARD", "zstr"), ("ZSCORE", "zstr", "a"), ("ZMSCORE", "zstr", "a"),
              ("ZRANK", "zstr", "a"), ("ZREVRANK", "zstr", "a"), ("ZCOUNT", "zstr", "1", "2"),
              ("ZLEXCOUNT", "zstr", "-", "+"), ("ZRANGE", "zstr", "0", "1"),
              ("ZRANGEBYSCORE", "zstr", "1", "2"), ("ZREVRANGEBYSCORE", "zstr", "2", "1"),
              ("ZRANGEBYLEX", "zstr", "-", "+"), ("ZREVRANGEBYLEX", "zstr", "+", "-"),
              ("ZREVRANGE", "zstr", "0", "1"), ("ZREMRANGEBYRANK", "zstr", "0", "1"),
              ("ZREMRANGEBYSCORE", "zstr", "1", "2"), ("ZREMRANGEBYLEX", "zstr", "-", "+"),
              ("ZPOPMIN", "zstr"), ("ZPOPMAX", "zstr", "2"), ("ZPOPMIN", "zstr", "0"),
              ("ZRANDMEMBER", "zstr"), ("ZRANDMEMBER", "zstr", "2"), ("ZSCAN", "zstr", "0"),
              ("ZADD", "zstr", "x", "a"), ("ZCOUNT", "zstr", "x", "1"), ("GET", "z"), ("SADD", "z", "a"))
    return c


def multi_script():
    """Multi-key commands, each with its keys on one shard and across two (the names are
    placed with on_shard(): on one lcore every key is local)."""
    c, a = _script()
    for layout in ("one", "two"):
        if layout == "one":
            k = ["{mk}%d" % i for i in range(6)]
        else:
            k = [on_shard("mk%s" % i, i % 2) for i in range(6)]
        a(E, "DEL", *k)
        # sets
        a(E, "SADD", k[0], "1", "2", "3", "x"); a(E, "SADD", k[1], "2", "3", "4"); a(E, "SADD", k[2], "3", "9")
        for cmd in ("SINTER", "SUNION", "SDIFF"):
            a(S, cmd, k[0], k[1]); a(S, cmd, k[0], k[1], k[2]); a(S, cmd, k[0], k[5]); a(S, cmd, k[5], k[0])
            a(E, cmd + "STORE", k[3], k[0], k[1]); a(S, "SMEMBERS", k[3]); a(E, "OBJECT", "ENCODING", k[3])
            a(E, cmd + "STORE", k[4], k[1], k[2]); a(E, "OBJECT", "ENCODING", k[4]); a(S, "SMEMBERS", k[4])
            a(E, cmd + "STORE", k[3], k[5], k[5]); a(E, "EXISTS", k[3])
        a(E, "SINTERSTORE", k[0], k[0], k[1]); a(S, "SMEMBERS", k[0])
        a(E, "SINTERCARD", "2", k[1], k[2]); a(E, "SINTERCARD", "3", k[0], k[1], k[2], "LIMIT", "1")
        a(E, "SINTERCARD", "2", k[1], k[5]); a(E, "SINTERCARD", "0", k[1]); a(E, "SINTERCARD", "3", k[1], k[2])
        a(E, "SINTERCARD", "2", k[1], k[2], "LIMIT", "-1"); a(E, "SINTERCARD", "2", k[1], k[2], "FOO")
        a(E, "SINTERCARD", "x", k[1]); a(E, "SINTERCARD", "2", k[1], k[2], "LIMIT", "0")
        a(E, "SADD", k[5], "7"); a(E, "SMOVE", k[5], k[4], "7"); a(E, "EXISTS", k[5]); a(S, "SMEMBERS", k[4])
        a(E, "SMOVE", k[4], k[5], "nope"); a(E, "SMOVE", k[5], k[4], "7"); a(E, "SMOVE", k[4], k[5], "7")
        a(E, "SMOVE", k[4], k[4], "3"); a(E, "OBJECT", "ENCODING", k[5])
        a(E, "SET", k[3], "str")
        wrongtype(a, ("SINTER", k[1], k[3]), ("SUNION", k[5], k[3]), ("SDIFF", k[1], k[3]),
                  ("SINTERSTORE", k[4], k[1], k[3]), ("SINTERCARD", "2", k[1], k[3]),
                  ("SMOVE", k[3], k[1], "2"), ("SMOVE", k[1], k[3], "2"), ("SINTER", "nokey", k[3]))
        a(E, "SMOVE", "nokey", k[3], "2"); a(E, "SUNIONSTORE", k[3], k[1], k[2]); a(E, "TYPE", k[3])
        # sorted sets
        a(E, "DEL", *k)
        a(E, "ZADD", k[0], "1", "a", "2", "b", "3", "c"); a(E, "ZADD", k[1], "10", "b", "20", "c", "30", "d")
        a(E, "SADD", k[2], "a", "d")
        for op in ("ZUNION", "ZINTER", "ZDIFF"):
            a(E, op, "2", k[0], k[1], "WITHSCORES"); a(E, op, "3", k[0], k[1], k[2], "WITHSCORES")
            a(E, op, "2", k[0], k[5]); a(E, op + "STORE", k[3], "2", k[0], k[1]); a(E, "ZRANGE", k[3], "0", "-1", "WITHSCORES")
            a(E, "OBJECT", "ENCODING", k[3]); a(E, op + "STORE", k[3], "2", k[5], k[5]); a(E, "EXISTS", k[3])
        for tail in (("WEIGHTS", "2", "0.5"), ("AGGREGATE", "MIN"), ("AGGREGATE", "max", "WEIGHTS", "-1", "1"),
                     ("WEIGHTS", "1"), ("WEIGHTS", "1", "x"), ("AGGREGATE", "foo"), ("FOO",), ("WITHSCORES",)):
            a(E, "ZUNION", "2", k[0], k[1], *tail); a(E, "ZINTERSTORE", k[4], "2", k[0], k[1], *tail)
            a(E, "ZRANGE", k[4], "0", "-1", "WITHSCORES"); a(E, "ZDIFF", "2", k[0], k[1], *tail)
        a(E, "ZINTERCARD", "2", k[0], k[1]); a(E, "ZINTERCARD", "2", k[0], k[1], "LIMIT", "1")
        a(E, "ZINTERCARD", "0", k[0]); a(E, "ZINTERCARD", "3", k[0]); a(E, "ZUNIONSTORE", k[3], "0", k[0])
        a(E, "ZUNIONSTORE", k[3], "x", k[0]); a(E, "ZUNION", "3", k[0], k[1]); a(E, "ZINTERCARD", "2", k[0], k[1], "LIMIT", "-1")
        a(E, "ZADD", k[5], "inf", "a"); a(E, "ZADD", k[4], "-inf", "a"); a(E, "ZUNION", "2", k[4], k[5], "WITHSCORES")
        a(E, "ZINTER", "2", k[4], k[5], "WITHSCORES", "AGGREGATE", "SUM")
        a(E, "ZRANGESTORE", k[3], k[1], "0", "1"); a(E, "ZRANGE", k[3], "0", "-1", "WITHSCORES")
        a(E, "ZRANGESTORE", k[3], k[1], "(10", "+inf", "BYSCORE", "LIMIT", "0", "1"); a(E, "ZRANGE", k[3], "0", "-1")
        a(E, "ZRANGESTORE", k[3], k[1], "[c", "+", "BYLEX", "REV"); a(E, "ZRANGESTORE", k[3], "nokey", "0", "-1")
        a(E, "EXISTS", k[3]); a(E, "ZRANGESTORE", k[3], k[1], "0", "-1", "WITHSCORES")
        a(E, "ZRANGESTORE", k[3], k[1], "5", "1"); a(E, "ZRANGESTORE", k[3], k[1], "x", "1")
        a(E, "SET", k[3], "str")
        wrongtype(a, ("ZUNION", "2", k[0], k[3]), ("ZINTERSTORE", k[4], "2", k[3], k[0]),
                  ("ZDIFF", "1", k[3]), ("ZINTERCARD", "2", k[0], k[3]), ("ZRANGESTORE", k[4], k[3], "0", "1"))
        a(E, "ZRANGESTORE", k[3], k[0], "0", "-1"); a(E, "TYPE", k[3]); a(E, "ZRANGE", k[3], "0", "-1")
        # lists
        a(E, "DEL", *k)
        a(E, "RPUSH", k[0], "a", "b", "c"); a(E, "LMOVE", k[0], k[1], "LEFT", "RIGHT"); a(E, "LMOVE", k[0], k[1], "right", "left")
        a(E, "LRANGE", k[1], "0", "-1"); a(E, "RPOPLPUSH", k[0], k[1]); a(E, "EXISTS", k[0]); a(E, "LRANGE", k[1], "0", "-1")
        a(E, "RPOPLPUSH", k[0], k[1]); a(E, "LMOVE", k[1], k[1], "LEFT", "RIGHT"); a(E, "LRANGE", k[1], "0", "-1")
        a(E, "LMOVE", k[1], k[2], "UP", "LEFT"); a(E, "LMOVE", k[1], k[2], "LEFT", "DOWN"); a(E, "SET", k[3], "x")
        wrongtype(a, ("LMOVE", k[1], k[3], "LEFT", "LEFT"), ("LMOVE", k[3], k[1], "LEFT", "LEFT"),
                  ("RPOPLPUSH", k[3], k[1]), ("RPOPLPUSH", k[1], k[3]))
        a(E, "LMOVE", "nokey", k[3], "LEFT", "LEFT"); a(E, "RPOPLPUSH", "nokey", k[1]); a(E, "LRANGE", k[1], "0", "-1")
        # LMPOP, ZMPOP: the first non-empty key in argument order
        a(E, "DEL", *k)
        a(E, "RPUSH", k[1], "a", "b", "c"); a(E, "ZADD", k[2], "1", "a", "2", "b", "3", "c")
        a(E, "LMPOP", "2", k[0], k[1], "LEFT"); a(E, "LMPOP", "3", k[0], k[5], k[1], "RIGHT", "COUNT", "5")
        a(E, "EXISTS", k[1]); a(E, "LMPOP", "1", k[0], "LEFT"); a(E, "LMPOP", "2", k[0], k[1], "left", "count", "1")
        for bad in (("0", k[0], "LEFT"), ("x", k[0], "LEFT"), ("-1", k[0], "LEFT"), ("2", k[0], "LEFT"),
                    ("1", k[0], "UP"), ("1", k[0], "LEFT", "COUNT", "0"), ("1", k[0], "LEFT", "COUNT", "x"),
                    ("1", k[0], "LEFT", "COUNT", "1", "COUNT", "1"), ("1", k[0], "LEFT", "FOO"),
                    ("1", k[0], "LEFT", "COUNT"), ("3", k[0], k[1], "LEFT")):
            a(E, "LMPOP", *bad); a(E, "ZMPOP", *[("MIN" if x == "LEFT" else x) for x in bad])
        a(E, "ZMPOP", "2", k[0], k[2], "MIN"); a(E, "ZMPOP", "2", k[0], k[2], "MAX", "COUNT", "10")
        a(E, "EXISTS", k[2]); a(E, "ZMPOP", "1", k[2], "MIN"); a(E, "ZMPOP", "1", k[2], "LEFT")
        a(E, "SET", k[3], "x"); a(E, "RPUSH", k[1], "x"); a(E, "ZADD", k[2], "1", "m")
        wrongtype(a, ("LMPOP", "2", k[3], k[1], "LEFT"), ("ZMPOP", "2", k[3], k[2], "MIN"),
                  ("LMPOP", "2", k[2], k[1], "LEFT"), ("ZMPOP", "3", k[0], k[1], k[2], "MAX"))
        a(E, "LMPOP", "2", k[1], k[3], "LEFT"); a(E, "ZMPOP", "2", k[2], k[3], "MIN")
        # the blocking pops when there is something to pop, or with a short timeout
        a(E, "RPUSH", k[1], "a", "b"); a(E, "BLPOP", k[0], k[1], "0"); a(E, "BRPOP", k[0], k[1], "0")
        a(E, "BLPOP", k[0], k[1], "0.01"); a(E, "BRPOP", k[0], "0.01"); a(E, "BLPOP", k[0], "0.0001")
        a(E, "ZADD", k[2], "1", "a", "2", "b"); a(E, "BZPOPMIN", k[0], k[2], "0"); a(E, "BZPOPMAX", k[2], "0")
        a(E, "BZPOPMIN", k[2], "0.01"); a(E, "BZPOPMAX", k[0], k[2], "0.01")
        a(E, "RPUSH", k[1], "a", "b", "c"); a(E, "BLMOVE", k[1], k[4], "LEFT", "RIGHT", "0")
        a(E, "BRPOPLPUSH", k[1], k[4], "0"); a(E, "LRANGE", k[4], "0", "-1"); a(E, "BLMOVE", k[1], k[1], "LEFT", "RIGHT", "1")
        a(E, "BLMOVE", k[0], k[4], "LEFT", "RIGHT", "0.01"); a(E, "BRPOPLPUSH", k[0], k[4], "0.01")
        a(E, "BLMOVE", k[0], k[3], "LEFT", "RIGHT", "0.01"); a(E, "BLMPOP", "0", "2", k[0], k[1], "LEFT", "COUNT", "5")
        a(E, "BLMPOP", "0.01", "2", k[0], k[1], "LEFT"); a(E, "ZADD", k[2], "1", "a", "3", "c")
        a(E, "BZMPOP", "0", "2", k[0], k[2], "MAX", "COUNT", "1"); a(E, "BZMPOP", "1", "2", k[5], k[2], "MIN", "COUNT", "9")
        a(E, "BZMPOP", "0.01", "1", k[2], "MIN"); a(E, "RPUSH", k[1], "a")
        wrongtype(a, ("BLPOP", k[3], k[1], "0"), ("BRPOP", k[0], k[3], "0"), ("BZPOPMIN", k[3], "0"),
                  ("BZPOPMAX", k[1], "0"), ("BLMOVE", k[3], k[1], "LEFT", "LEFT", "0"),
                  ("BLMOVE", k[1], k[3], "LEFT", "LEFT", "0"), ("BRPOPLPUSH", k[3], k[1], "0"),
                  ("BLMPOP", "0", "2", k[3], k[1], "LEFT"), ("BZMPOP", "0", "1", k[1], "MIN"))
        for t in ("x", "-1", "-0.5", "inf", "-inf", "nan", "1e300", "9223372036854776", "1 ", ""):
            a(E, "BLPOP", k[0], t); a(E, "BZPOPMIN", k[0], t); a(E, "BLMOVE", k[0], k[1], "LEFT", "LEFT", t)
            a(E, "BLMPOP", t, "1", k[0], "LEFT"); a(E, "BRPOPLPUSH", k[0], k[1], t)
        a(E, "BLMOVE", k[0], k[1], "UP", "LEFT", "x"); a(E, "BLMOVE", k[0], k[1], "LEFT", "DOWN", "0")
        for bad in (("0", k[0], "LEFT"), ("x", k[0], "LEFT"), ("2", k[0], "LEFT"), ("1", k[0], "UP"),
                    ("1", k[0], "LEFT", "COUNT", "0"), ("1", k[0], "LEFT", "FOO")):
            a(E, "BLMPOP", "0", *bad); a(E, "BZMPOP", "0", *[("MIN" if x == "LEFT" else x) for x in bad])
        a(E, "BLPOP", k[0]); a(E, "BLMOVE", k[0], k[1], "LEFT", "LEFT"); a(E, "BLMPOP", "0", "1", k[0])
        # COPY, RENAME of every type, with TTLs
        a(E, "DEL", *k)
        a(E, "HSET", k[0], "f", "v"); a(E, "EXPIRE", k[0], "500"); a(E, "COPY", k[0], k[1]); a(E, "HGETALL", k[1])
        a(E, "TTL", k[1]); a(E, "COPY", k[0], k[1]); a(E, "COPY", k[0], k[1], "REPLACE"); a(E, "COPY", "nokey", k[1])
        a(E, "COPY", k[0], k[0]); a(E, "COPY", k[0], k[2], "DB", "0"); a(E, "COPY", k[0], k[2], "DB", "1")
        a(E, "COPY", k[0], k[2], "DB", "x"); a(E, "COPY", k[0], k[2], "FOO"); a(E, "OBJECT", "ENCODING", k[2])
        a(E, "SADD", k[3], "1", "2"); a(E, "COPY", k[3], k[4]); a(E, "OBJECT", "ENCODING", k[4]); a(E, "SMEMBERS", k[4])
        a(E, "ZADD", k[5], "1", "m"); a(E, "RENAME", k[5], k[4]); a(E, "TYPE", k[4]); a(E, "ZRANGE", k[4], "0", "-1", "WITHSCORES")
        a(E, "RPUSH", k[5], "x", "y"); a(E, "RENAMENX", k[5], k[4]); a(E, "RENAMENX", k[5], k[3] + "new")
        a(E, "LRANGE", k[3] + "new", "0", "-1"); a(E, "SET", k[5], "5"); a(E, "RENAME", k[5], k[0])
        a(E, "OBJECT", "ENCODING", k[0]); a(E, "GET", k[0]); a(E, "MSETNX", k[1], "a", k[2], "b")
        a(E, "MSETNX", k[5], "a", k[3] + "x", "b"); a(E, "MGET", k[5], k[3] + "x"); a(E, "TYPE", k[1])
        a(E, "DEL", *k); a(E, "EXISTS", *k)
    return c


def objects(a):
    """OBJECT and string encodings, as Redis decides them."""
    for v in ("0", "-1", "123", "9223372036854775807", "-9223372036854775808",
              "9223372036854775808", "-0", "+1", " 1", "00", "1.0", "x" * 44, "x" * 45, ""):
        a(E, "SET", "enc", v); a(E, "OBJECT", "ENCODING", "enc"); a(E, "OBJECT", "REFCOUNT", "enc")
    a(E, "SET", "enc", "5"); a(E, "APPEND", "enc", "6"); a(E, "OBJECT", "ENCODING", "enc")
    a(E, "APPEND", "newap", "12"); a(E, "OBJECT", "ENCODING", "newap")
    a(E, "APPEND", "newap", ""); a(E, "OBJECT", "ENCODING", "newap")
    a(E, "SETRANGE", "nsr", "0", "ab"); a(E, "OBJECT", "ENCODING", "nsr")
    a(E, "SET", "sr2", "abc"); a(E, "SETRANGE", "sr2", "0", "x"); a(E, "OBJECT", "ENCODING", "sr2")
    a(E, "INCR", "inc"); a(E, "OBJECT", "ENCODING", "inc"); a(E, "INCRBYFLOAT", "incf", "3.0e3")
    a(E, "OBJECT", "ENCODING", "incf"); a(E, "GET", "incf"); a(E, "MSET", "m1", "7", "m2", "x")
    a(E, "OBJECT", "ENCODING", "m1"); a(E, "OBJECT", "ENCODING", "m2"); a(E, "GETSET", "m2", "8")
    a(E, "OBJECT", "ENCODING", "m2"); a(E, "SETNX", "snx", "9"); a(E, "OBJECT", "ENCODING", "snx")
    a(E, "OBJECT", "ENCODING", "nokey"); a(E, "OBJECT", "FREQ", "enc"); a(E, "OBJECT", "FREQ", "nokey")
    a(N, "OBJECT", "IDLETIME", "enc"); a(E, "OBJECT", "IDLETIME", "nokey")
    a(E, "OBJECT", "REFCOUNT", "nokey"); a(E, "OBJECT", "HELP"); a(E, "OBJECT", "FOO", "x")
    a(E, "OBJECT", "ENCODING"); a(E, "OBJECT", "ENCODING", "a", "b"); a(E, "OBJECT")
    a(E, "OBJECT", "HELP", "x"); a(E, "TOUCH", "enc", "nokey", "m1"); a(E, "TOUCH")


def compare(mode, ours, theirs):
    if mode == "exact" or (mode in ("sorted", "pairs", "scan") and
                           (ours[:1] != b"*" or theirs[:1] != b"*")):
        return ours == theirs  # an error, say: byte for byte
    if mode == "type":
        return ours[:1] == theirs[:1]
    if mode == "near":
        if ours[:1] != b":" or theirs[:1] != b":":
            return ours == theirs
        o, t = int(ours[1:-2]), int(theirs[1:-2])
        return abs(o - t) <= (2000 if abs(t) > 10000 else 2)
    if mode == "sorted":
        return sorted(parse_array(ours)) == sorted(parse_array(theirs))
    if mode == "scan":
        po, pt = parse_array(ours), parse_array(theirs)
        return po[0] == pt[0] and sorted(parse_array(po[1])) == sorted(parse_array(pt[1]))
    if mode == "pairs":
        po, pt = parse_array(ours), parse_array(theirs)
        return sorted(zip(po[0::2], po[1::2])) == sorted(zip(pt[0::2], pt[1::2]))
    raise Failure("mode " + mode)


def parse_array(b):
    check(b[:1] == b"*", "not an array: %r" % b[:60])
    items = []
    nl = b.find(b"\r\n")
    i = nl + 2
    for _ in range(int(b[1:nl])):
        j = reply_end(b, i)
        items.append(b[i:j])
        i = j
    return items


def run_script(ours_port, theirs_port, script, pipelined):
    a, b = Conn(ours_port), Conn(theirs_port)
    bad = []
    if pipelined:
        data = b"".join(resp(*args) for args, _ in script)
        a.send(data)
        b.send(data)
        ra, rb = a.replies(len(script), 30), b.replies(len(script), 30)
    else:
        ra, rb = [], []
        for args, _ in script:
            ra.append(a.cmd(*args))
            rb.append(b.cmd(*args))
    for (args, mode), x, y in zip(script, ra, rb):
        if not compare(mode, x, y):
            bad.append("%r: cr-kv %r, redis %r" % (args, x[:200], y[:200]))
    a.close()
    b.close()
    return bad


# ---- a seeded random command stream over every type ----

def random_stream(seed, n):
    """@n commands (args, mode) drawn with random.Random(@seed) over a small key and member
    space, so that types collide (WRONGTYPE), sets cross their encodings' thresholds, and
    multi-key commands mix keys of both shards. Only commands whose replies are the same
    on any correct server: no random picks, no TTL readings, no BYLEX over mixed scores;
    replies in hash-table order are compared as multisets."""
    rnd = random.Random(seed)
    pools = {t: ["r:%s%d" % (t, i) for i in range(6)] for t in "shltz"}
    allkeys = sum(pools.values(), [])
    mem = [str(i) for i in range(12)] + list("abcdefgh") + ["m" * 70]
    out = []
    kind = ["s"]

    def k():
        # the command's own type's keys, and now and then any key (WRONGTYPE, moves)
        return rnd.choice(allkeys if rnd.random() < 0.08 else pools[kind[0]])

    def m():
        return rnd.choice(mem)

    def num():
        return str(rnd.choice([0, 1, 2, 3, -1, 5, 10, 100, -7]))

    def score():
        return rnd.choice(["0", "1", "2", "1.5", "-3", "10", "(2", "+inf", "-inf"])

    def rng():
        return rnd.choice(["0", "1", "-1", "2", "-3", "5", "100"])

    gens = [
        # strings (kind s)
        lambda: (E, ("SET", k(), m())), lambda: (E, ("GET", k())), lambda: (E, ("APPEND", k(), m())),
        lambda: (E, ("INCR", k())), lambda: (E, ("INCRBY", k(), num())), lambda: (E, ("STRLEN", k())),
        lambda: (E, ("GETRANGE", k(), rng(), rng())), lambda: (E, ("SETRANGE", k(), str(rnd.randrange(4)), m())),
        lambda: (E, ("GETSET", k(), m())), lambda: (E, ("GETDEL", k())), lambda: (E, ("SETNX", k(), m())),
        lambda: (E, ("MSET", k(), m(), k(), m())), lambda: (E, ("MGET", k(), k(), k())),
        lambda: (E, ("MSETNX", k(), m(), k(), m())),
        lambda: (E, ("INCRBYFLOAT", k(), rnd.choice(["1.5", "0.1", "-3e-2"]))),
        # keys
        lambda: (E, ("DEL", k(), k())), lambda: (E, ("EXISTS", k(), k(), k())), lambda: (E, ("TYPE", k())),
        lambda: (E, ("RENAME", k(), k())), lambda: (E, ("RENAMENX", k(), k())),
        lambda: (E, ("COPY", k(), k()) + (("REPLACE",) if rnd.random() < 0.5 else ())),
        lambda: (E, ("OBJECT", "ENCODING", k())), lambda: (E, ("EXPIRE", k(), "1000")),
        lambda: (E, ("PERSIST", k())), lambda: (E, ("TOUCH", k(), k())),
        # hashes
        lambda: (E, ("HSET", k(), m(), m(), m(), m())), lambda: (E, ("HGET", k(), m())),
        lambda: (E, ("HDEL", k(), m(), m())), lambda: (E, ("HLEN", k())), lambda: (E, ("HINCRBY", k(), m(), num())),
        lambda: (E, ("HMGET", k(), m(), m())), lambda: (E, ("HEXISTS", k(), m())),
        lambda: (E, ("HSTRLEN", k(), m())), lambda: (P, ("HGETALL", k())), lambda: (S, ("HKEYS", k())),
        lambda: (S, ("HVALS", k())), lambda: (E, ("HSETNX", k(), m(), m())),
        lambda: (E, ("HINCRBYFLOAT", k(), m(), rnd.choice(["0.25", "0.1"]))),
        # lists
        lambda: (E, ("LPUSH", k(), m(), m())), lambda: (E, ("RPUSH", k(), m(), m(), m())),
        lambda: (E, ("LPOP", k())), lambda: (E, ("RPOP", k(), str(rnd.randrange(4)))),
        lambda: (E, ("LRANGE", k(), rng(), rng())), lambda: (E, ("LINDEX", k(), rng())),
        lambda: (E, ("LSET", k(), rng(), m())), lambda: (E, ("LINSERT", k(), rnd.choice(["BEFORE", "AFTER"]), m(), m())),
        lambda: (E, ("LREM", k(), num(), m())), lambda: (E, ("LTRIM", k(), rng(), rng())),
        lambda: (E, ("LLEN", k())), lambda: (E, ("LPOS", k(), m(), "RANK", rnd.choice(["1", "-1", "2"]))),
        lambda: (E, ("LMOVE", k(), k(), rnd.choice(["LEFT", "RIGHT"]), rnd.choice(["LEFT", "RIGHT"]))),
        lambda: (E, ("RPOPLPUSH", k(), k())),
        lambda: (E, ("LMPOP", "2", k(), k(), rnd.choice(["LEFT", "RIGHT"])) + rnd.choice([(), ("COUNT", "2")])),
        # blocking pops: with a timeout short enough that one finding nothing costs little
        lambda: (E, (rnd.choice(["BLPOP", "BRPOP"]), k(), k(), "0.001")),
        lambda: (E, ("BLMOVE", k(), k(), rnd.choice(["LEFT", "RIGHT"]), rnd.choice(["LEFT", "RIGHT"]), "0.001")),
        # sets
        lambda: (E, ("SADD", k(), m(), m(), m())), lambda: (E, ("SREM", k(), m(), m())),
        lambda: (E, ("SISMEMBER", k(), m())), lambda: (E, ("SMISMEMBER", k(), m(), m())),
        lambda: (E, ("SCARD", k())), lambda: (S, ("SMEMBERS", k())), lambda: (S, ("SINTER", k(), k())),
        lambda: (S, ("SUNION", k(), k(), k())), lambda: (S, ("SDIFF", k(), k())),
        lambda: (E, ("SINTERSTORE", k(), k(), k())), lambda: (E, ("SUNIONSTORE", k(), k(), k())),
        lambda: (E, ("SDIFFSTORE", k(), k(), k())), lambda: (E, ("SINTERCARD", "2", k(), k())),
        lambda: (E, ("SMOVE", k(), k(), m())),
        # sorted sets
        lambda: (E, ("ZADD", k()) + rnd.choice([(), ("NX",), ("XX",), ("GT", "CH"), ("LT",)]) +
                 (rnd.choice(["1", "2", "3.5", "-1", "0"]), m(), rnd.choice(["1", "5", "-2"]), m())),
        lambda: (E, ("ZINCRBY", k(), rnd.choice(["1", "-2", "0.5", "0.1", "1e-3"]), m())),
        lambda: (E, ("ZREM", k(), m(), m())),
        lambda: (E, ("ZSCORE", k(), m())), lambda: (E, ("ZMSCORE", k(), m(), m())),
        lambda: (E, ("ZRANK", k(), m())), lambda: (E, ("ZREVRANK", k(), m())), lambda: (E, ("ZCARD", k())),
        lambda: (E, ("ZCOUNT", k(), score(), score())),
        lambda: (E, ("ZRANGE", k(), rng(), rng()) + rnd.choice([(), ("REV",), ("WITHSCORES",)])),
        lambda: (E, ("ZRANGE", k(), score(), score(), "BYSCORE") + rnd.choice([(), ("REV",), ("LIMIT", "1", "2")])),
        lambda: (E, ("ZRANGEBYSCORE", k(), score(), score(), "WITHSCORES")),
        lambda: (E, ("ZREMRANGEBYRANK", k(), rng(), rng())), lambda: (E, ("ZREMRANGEBYSCORE", k(), score(), score())),
        lambda: (E, (rnd.choice(["ZPOPMIN", "ZPOPMAX"]), k()) + rnd.choice([(), ("2",)])),
        lambda: (E, (rnd.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), k(), "2", k(), k())),
        lambda: (E, (rnd.choice(["ZUNION", "ZINTER"]), "2", k(), k(), "WEIGHTS", "2", "3", "WITHSCORES")),
        lambda: (E, ("ZDIFF", "2", k(), k(), "WITHSCORES")), lambda: (E, ("ZINTERCARD", "2", k(), k())),
        lambda: (E, ("ZRANGESTORE", k(), k(), rng(), rng())),
        lambda: (E, ("ZMPOP", "2", k(), k(), rnd.choice(["MIN", "MAX"])) + rnd.choice([(), ("COUNT", "3")])),
        lambda: (E, (rnd.choice(["BZPOPMIN", "BZPOPMAX"]), k(), k(), "0.001")),
    ]
    gen_kind = 'ssssssssssssssssssssssssshhhhhhhhhhhhhlllllllllllllllllttttttttttttttzzzzzzzzzzzzzzzzzzzzzz'
    check(len(gen_kind) == len(gens), "gen_kind")
    for _ in range(n):
        g = rnd.randrange(len(gens))
        kind[0] = gen_kind[g]
        mode, args = gens[g]()
        out.append((args, mode))
    return out


def t_random(o, count=10000, seed=18):
    """A seeded random stream of every type's commands (kv_test.py ... random --count
    100000 by hand), pipelined in batches against cr-kv and redis: identical replies."""
    need("redis-server")
    script = [(("FLUSHALL",), E)] + random_stream(seed, count)
    a, b = Conn(o.kv.port, timeout=60), Conn(o.redis().port, timeout=60)
    bad = []
    for i in range(0, len(script), 500):
        chunk = script[i:i + 500]
        data = b"".join(resp(*args) for args, _ in chunk)
        a.send(data)
        b.send(data)
        ra, rb = a.replies(len(chunk), 60), b.replies(len(chunk), 60)
        for j, ((args, mode), x, y) in enumerate(zip(chunk, ra, rb)):
            if not compare(mode, x, y):
                bad.append("#%d %r: cr-kv %r, redis %r" % (i + j, args, x[:150], y[:150]))
        if len(bad) > 5:
            break
    check(not bad, "%d replies differ (seed %d):\n  " % (len(bad), seed) + "\n  ".join(bad[:5]))
    log("%d commands, identical replies" % count)
    a.close()
    b.close()


# ---- tests ----

def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            log("SKIP: %s not installed" % t)
            sys.exit(SKIP)


def cross_shard_locks(port):
    m = re.search(rb"cross_shard_locks_granted:(\d+)", Conn(port).cmd("INFO", "stats"))
    return int(m.group(1)) if m else -1


def t_oracle(o):
    """Every command and its errors, one at a time, byte for byte against redis; on two
    lcores the keys placed on two shards go through transactions (counted in INFO)."""
    need("redis-server")
    bad = run_script(o.kv.port, o.redis().port, command_script(), False)
    check(not bad, "%d replies differ:\n  " % len(bad) + "\n  ".join(bad))
    n = cross_shard_locks(o.kv.port)
    check(n > 200 if o.lcores > 1 else n == 0, "cross_shard_locks_granted: %d" % n)


def t_pipeline(o):
    """The whole script in one write: replies in request order across lcores."""
    need("redis-server")
    bad = run_script(o.kv.port, o.redis().port, command_script(), True)
    check(not bad, "%d replies differ:\n  " % len(bad) + "\n  ".join(bad))


def t_order(o):
    """Many clients pipelining writes and reads of keys on every shard: each client's
    replies come back in its own request order and agree with redis."""
    need("redis-server")
    rnd = random.Random(6)
    conns = []
    for i in range(8):
        script = []
        for j in range(400):
            k = "c%d:k%d" % (i, rnd.randrange(50))
            op = rnd.randrange(6)
            if op == 0:
                script.append(("SET", k, "v%d" % j))
            elif op == 1:
                script.append(("GET", k))
            elif op == 2:
                script.append(("INCR", "c%d:n%d" % (i, rnd.randrange(20))))
            elif op == 3:
                script.append(("APPEND", k, "x"))
            elif op == 4:
                script.append(("MGET", k, "c%d:k%d" % (i, rnd.randrange(50)), "c%d:n1" % i))
            else:
                script.append(("DEL", k))
        conns.append(script)
    r = o.redis()
    pairs = [(Conn(o.kv.port), Conn(r.port), s) for s in conns]
    for a, b, s in pairs:
        data = b"".join(resp(*x) for x in s)
        a.send(data)
        b.send(data)
    for a, b, s in pairs:
        ra, rb = a.replies(len(s), 30), b.replies(len(s), 30)
        for x, y, cmd in zip(ra, rb, s):
            check(x == y, "%r: cr-kv %r, redis %r" % (cmd, x, y))


def t_scan(o):
    """SCAN from 0 back to 0 returns every key exactly as KEYS does (across shards)."""
    c = Conn(o.kv.port)
    names = ["scan:%d" % i for i in range(500)]
    for i in range(0, 500, 50):
        mset = []
        for n in names[i:i + 50]:
            mset += [n, "1"]
        check(c.cmd("MSET", *mset) == b"+OK\r\n", "MSET")
    seen = set()
    cursor = b"0"
    for _ in range(2000):
        r = c.cmd("SCAN", cursor, "COUNT", "7")
        items = parse_array(r)
        cursor = items[0].split(b"\r\n")[1]
        for k in parse_array(items[1]):
            seen.add(k.split(b"\r\n")[1].decode())
        if cursor == b"0":
            break
    check(cursor == b"0", "SCAN did not finish")
    check(seen == set(names), "SCAN missed %d keys" % len(set(names) - seen))
    r = c.cmd("SCAN", "0", "MATCH", "scan:1?", "COUNT", "1000")
    got = set()
    cursor = b"0"
    for _ in range(100):
        items = parse_array(c.cmd("SCAN", cursor, "MATCH", "scan:1?", "COUNT", "1000"))
        cursor = items[0].split(b"\r\n")[1]
        got |= {k.split(b"\r\n")[1].decode() for k in parse_array(items[1])}
        if cursor == b"0":
            break
    check(got == {"scan:1%d" % i for i in range(10)}, "SCAN MATCH: %r" % sorted(got))
    items = parse_array(c.cmd("SCAN", "0", "TYPE", "hash", "COUNT", "1000"))
    check(items[1] == b"*0\r\n", "SCAN TYPE hash: %r" % items[1])
    r = parse_array(c.cmd("RANDOMKEY").join([b"*1\r\n", b""]))
    check(r[0].split(b"\r\n")[1].decode() in names, "RANDOMKEY: %r" % r)
    c.close()


def t_expiry(o):
    """Lazy expiry (a read of an expired key) and active expiry (keys nobody reads go
    away by themselves, as in redis, within a second or two)."""
    c = Conn(o.kv.port)
    check(c.cmd("SET", "lazy", "1", "PX", "50") == b"+OK\r\n", "SET PX")
    time.sleep(0.2)
    check(c.cmd("GET", "lazy") == b"$-1\r\n", "lazy expiry: GET still finds the key")
    check(c.cmd("TTL", "lazy") == b":-2\r\n", "TTL of an expired key")
    for i in range(0, 300, 50):
        c.send(b"".join(resp("SET", "act:%d" % j, "v", "PX", "1500") for j in range(i, i + 50)))
        c.replies(50)
    check(c.cmd("SET", "keep", "1") == b"+OK\r\n", "SET keep")
    check(c.cmd("DBSIZE") == b":301\r\n", "DBSIZE before expiry")
    deadline = time.monotonic() + 10
    n = None
    while time.monotonic() < deadline:
        n = c.cmd("DBSIZE")
        if n == b":1\r\n":
            break
        time.sleep(0.1)
    check(n == b":1\r\n", "active expiry left %r keys after 10 s" % n)
    info = c.cmd("INFO", "stats").decode()
    m = re.search(r"expired_keys:(\d+)", info)
    check(m is not None and int(m.group(1)) >= 301, "INFO expired_keys: %r" % info)
    c.close()


def t_info(o):
    """INFO has the sections the issue names, with this server's figures."""
    c = Conn(o.kv.port)
    # An empty server's figure after its shards' first 100 ms ticks (which shrink and
    # rehash tables): never below zero.
    time.sleep(0.35)
    m = re.search(rb"used_memory:(-?\d+)\r\n", c.cmd("INFO", "memory"))
    check(m is not None and int(m.group(1)) >= 0, "empty server's used_memory: %r" % m)
    c.cmd("MSET", "a", "1", "b", "2", "c", "3")
    c.cmd("EXPIRE", "a", "100")
    info = c.cmd("INFO")
    body = info[info.find(b"\r\n") + 2:-2].decode()
    for sec in ("# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"):
        check(sec in body, "INFO lacks %s" % sec)
    check("db0:keys=3,expires=1," in body, "INFO keyspace: %r" % body)
    check(re.search(r"connected_clients:1\r\n", body), "connected_clients")
    check(re.search(r"used_memory:[1-9]\d*\r\n", body), "used_memory")
    check(re.search(r"lcores:%d\r\n" % o.lcores, body), "lcores")
    only = c.cmd("INFO", "keyspace").decode()
    check("# Server" not in only and "db0:keys=3" in only, "INFO keyspace alone: %r" % only)
    c.close()


def info_field(conn, section, name):
    m = re.search(rb"\r\n" + name.encode() + rb":([^\r]*)\r\n", conn.cmd("INFO", section))
    check(m is not None, "INFO %s has no %s" % (section, name))
    return m.group(1).decode()


def proc_rss(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")


def load_types(c, scale=1):
    """About 100 MB (scale 1) of every type, pipelined: strings, listpack hashes, long
    lists, hashtable sets, skiplist sorted sets."""
    def pipe(cmds):
        for i in range(0, len(cmds), 2000):
            chunk = cmds[i:i + 2000]
            c.send(b"".join(resp(*x) for x in chunk))
            for r in c.replies(len(chunk), 60):
                check(r[:1] != b"-", "loading: %r" % r[:80])
    pipe([("SET", "m:s:%d" % i, "v" * 100) for i in range(100000 * scale)])
    pipe([("HSET", "m:h:%d" % i) + tuple(x for f in range(20) for x in ("f%d" % f, "value%d" % f))
          for i in range(20000 * scale)])
    pipe([("RPUSH", "m:l:%d" % i) + tuple("element:%d" % e for e in range(1000))
          for i in range(2000 * scale)])
    pipe([("SADD", "m:t:%d" % i) + tuple("member:%d" % e for e in range(200))
          for i in range(2000 * scale)])
    pipe([("ZADD", "m:z:%d" % i) + tuple(x for e in range(200) for x in (str(e), "member:%d" % e))
          for i in range(2000 * scale)])


def t_memory(o):
    """INFO memory: used_memory_rss is the process's RSS; used_memory follows what the
    keyspace takes: after ~100 MB of every type its growth is within 15 % of the RSS's
    growth over the empty server's; after FLUSHALL it is back near zero."""
    libs = subprocess.run(["ldd", o.exe], capture_output=True, timeout=10).stdout
    if b"libasan" in libs or b"libtsan" in libs:
        log("SKIP: a sanitizer build: its RSS holds the sanitizer's shadow memory")
        sys.exit(SKIP)
    c = Conn(o.kv.port, timeout=60)
    time.sleep(0.3)  # the shards' first ticks
    rss0 = int(info_field(c, "memory", "used_memory_rss"))
    used0 = int(info_field(c, "memory", "used_memory"))
    check(abs(rss0 - proc_rss(o.kv.proc.pid)) <= 256 * 1024,
          "used_memory_rss %d, /proc says %d" % (rss0, proc_rss(o.kv.proc.pid)))
    load_types(c)
    used1 = int(info_field(c, "memory", "used_memory"))
    rss1 = int(info_field(c, "memory", "used_memory_rss"))
    real = proc_rss(o.kv.proc.pid)
    check(abs(rss1 - real) <= 256 * 1024, "used_memory_rss %d, /proc says %d" % (rss1, real))
    grew, counted = rss1 - rss0, used1 - used0
    log("rss grew %.1f MB, used_memory %.1f MB (%.1f %%)" % (grew / 1e6, counted / 1e6,
                                                           100.0 * counted / grew))
    check(grew > 50e6, "the load grew RSS by only %d bytes" % grew)
    check(abs(counted - grew) <= 0.15 * grew,
          "used_memory grew %d, RSS %d: more than 15 %% apart" % (counted, grew))
    check(c.cmd("FLUSHALL") == b"+OK\r\n", "FLUSHALL")
    # Its big values are freed a bounded step per turn: wait for the queue to empty.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and info_field(c, "memory", "lazyfree_pending_objects") != "0":
        time.sleep(0.05)
    check(info_field(c, "memory", "lazyfree_pending_objects") == "0", "lazy free never finished")
    used2 = int(info_field(c, "memory", "used_memory"))
    check(used2 <= used0 + 64 * 1024, "after FLUSHALL used_memory %d (empty: %d)" % (used2, used0))
    c.close()


def _ping_loop(port, lcore, pipe):
    """In a process of its own (no GIL shared with the client under test): PING on a
    connection of @lcore until told to stop; send back the longest wait for a reply."""
    c = conn_on_lcore(port, lcore) if lcore is not None else Conn(port)
    pipe.send("ready")
    worst = 0.0
    while not pipe.poll():
        t0 = time.monotonic()
        c.cmd("PING")
        worst = max(worst, time.monotonic() - t0)
    pipe.send(worst)
    c.close()


class Pinger:
    """PING in a loop in another process while the block runs; .worst in seconds."""

    def __init__(self, port, lcore):
        import multiprocessing
        self.mine, theirs = multiprocessing.Pipe()
        self.p = multiprocessing.Process(target=_ping_loop, args=(port, lcore, theirs))
        self.worst = None

    def __enter__(self):
        self.p.start()
        check(self.mine.poll(30) and self.mine.recv() == "ready", "pinger did not start")
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        time.sleep(0.05)
        self.mine.send("stop")
        check(self.mine.poll(30), "pinger did not answer")
        self.worst = self.mine.recv()
        self.p.join(30)


def read_raw(conn, n, timeout=60):
    """Read exactly @n reply bytes without parsing them."""
    deadline = time.monotonic() + timeout
    while len(conn.buf) < n:
        check(time.monotonic() < deadline, "timed out reading %d bytes" % n)
        conn.s.settimeout(max(0.05, deadline - time.monotonic()))
        d = conn.s.recv(1 << 20)
        check(d, "closed while reading")
        conn.buf += d
    conn.buf = conn.buf[n:]


def conn_on_lcore(port, lcore, tries=200):
    """A connection accepted on @lcore (SO_REUSEPORT spreads them: retry until one is)."""
    for _ in range(tries):
        c = Conn(port, timeout=60)
        m = re.search(rb"lcore=(\d+)", c.cmd("CLIENT", "INFO"))
        if m is None or int(m.group(1)) == lcore:
            return c
        c.close()
    raise Failure("no connection landed on lcore %d" % lcore)


def load_huge(c, n):
    """A set, a list, a sorted set and a hash of @n elements each (on one shard: {big})."""
    for i in range(0, n, 2000):
        r = range(i, min(i + 2000, n))
        c.send(resp("SADD", "{big}s", *["member:%d" % j for j in r]) +
               resp("RPUSH", "{big}l", *["element:%d" % j for j in r]) +
               resp("ZADD", "{big}z", *[x for j in r for x in (str(j), "member:%d" % j)]) +
               resp("HSET", "{big}h", *[x for j in r for x in ("field:%d" % j, "v")]))
        for rep in c.replies(4, 60):
            check(rep[:1] == b":", "loading: %r" % rep[:60])


def t_stall(o, n=300000):
    """With huge collections (300,000 elements of each type here; 10 M by hand with
    --count), the worst PING latency of a client on the same lcore while (a) commands
    that touch a bounded part (SADD, LPUSH, ZADD, LRANGE 0 9, ZRANGE 0 9, HSET) run, is a
    few ms, and while (b) whole-collection commands (SMEMBERS, HGETALL, LRANGE 0 -1, DEL
    of each big key) run, is no longer than redis-server's on the same data (bounds
    generous for a shared machine: 3x redis's plus 50 ms plus twice the worst PING of the
    idle server, measured first)."""
    need("redis-server")
    r = o.redis()
    lcore = key_shard("big", o.lcores)  # the shard, and so the lcore, of {big}
    ours, theirs = conn_on_lcore(o.kv.port, lcore), Conn(r.port, timeout=60)
    for c in (ours, theirs):
        load_huge(c, n)
    bounded = [("SADD", "{big}s", "new"), ("LPUSH", "{big}l", "new"), ("ZADD", "{big}z", "7", "new"),
               ("LRANGE", "{big}l", "0", "9"), ("ZRANGE", "{big}z", "0", "9"), ("HSET", "{big}h", "f", "v"),
               ("SISMEMBER", "{big}s", "member:5"), ("ZSCORE", "{big}z", "member:5")]
    whole = [("SMEMBERS", "{big}s"), ("HGETALL", "{big}h"), ("LRANGE", "{big}l", "0", "-1"),
             ("ZRANGE", "{big}z", "0", "-1"), ("DEL", "{big}s"), ("DEL", "{big}l"), ("DEL", "{big}z"),
             ("UNLINK", "{big}h")]
    results = []
    with Pinger(o.kv.port, lcore) as p:
        time.sleep(1.0)  # nothing runs: what this machine's load alone costs a PING
    noise = p.worst
    for name, port, conn in (("cr-kv", o.kv.port, ours), ("redis", r.port, theirs)):
        pl = lcore if name == "cr-kv" else None
        with Pinger(port, pl) as p:
            for _ in range(200):
                for cmd in bounded:
                    conn.cmd(*cmd)
        b_worst = p.worst
        per = {}
        for cmd in whole:
            size = 4  # ":1\r\n" for DEL / UNLINK
            if cmd[0] not in ("DEL", "UNLINK"):
                conn.send(resp(*cmd))  # first unmeasured, for the reply's length
                size = len(conn.replies(1, 120)[0])
            with Pinger(port, pl) as p:
                conn.send(resp(*cmd))
                read_raw(conn, size)
            per[cmd[0] + " " + cmd[1]] = p.worst
        results.append((name, b_worst, per))
    (_, ob, op), (_, rb, rp) = results
    log("idle: worst PING %.1f ms (the machine's noise)" % (noise * 1e3))
    log("bounded commands: worst PING cr-kv %.1f ms, redis %.1f ms" % (ob * 1e3, rb * 1e3))
    for k in op:
        log("%-16s worst PING cr-kv %6.1f ms, redis %6.1f ms" % (k, op[k] * 1e3, rp[k] * 1e3))
    slack = 0.050 + 2 * noise
    check(ob < slack, "bounded commands stalled a PING for %.1f ms" % (ob * 1e3))
    for k in op:
        check(op[k] <= 3 * rp[k] + slack,
              "%s stalled a PING for %.1f ms, redis %.1f ms" % (k, op[k] * 1e3, rp[k] * 1e3))
    ours.close()
    theirs.close()


def t_telemetry(o):
    """The app counters reach the telemetry socket: commands run, parts handed to another
    lcore (2 lcores), protocol errors."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="kv-tel.")
    o.tmpdirs.append(tmp)
    path = os.path.join(tmp, "kv.sock")
    o.restart(["--telemetry", path])
    c = Conn(o.kv.port)
    mset = []
    for i in range(40):
        mset += ["tel:%d" % i, "v"]
    c.cmd("MSET", *mset)
    c.cmd("MGET", *["tel:%d" % i for i in range(40)])
    for _ in range(10):
        c.cmd("PING")
    c.close()
    bad = Conn(o.kv.port)
    bad.send(b"*1\r\n$x\r\n")
    bad.closed()
    app = telemetry_app(path)
    check(app.get("kv_commands", 0) >= 12, "kv_commands: %r" % app)
    check(app.get("kv_protocol_errors") == 1, "kv_protocol_errors: %r" % app)
    if o.lcores > 1:
        check(app.get("kv_remote_parts", 0) > 0, "kv_remote_parts: %r" % app)
    else:
        check(app.get("kv_remote_parts") == 0, "kv_remote_parts on 1 lcore: %r" % app)


def t_placement(o):
    """With --hash-seed, keys land on the shard SipHash-1-3 of that seed names (as
    key_shard() computes it here), and keys with one hash tag share their tag's shard:
    each GET of a key on the other shard is one part handed to the other lcore, counted in
    kv_remote_parts, and no other GET is."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="kv-tel.")
    o.tmpdirs.append(tmp)
    path = os.path.join(tmp, "kv.sock")
    o.restart(["--telemetry", path, "--hash-seed", HASH_SEED])
    c = Conn(o.kv.port)
    m = re.search(rb"lcore=(\d+)", c.cmd("CLIENT", "INFO"))
    check(m is not None, "CLIENT INFO has no lcore")
    here = int(m.group(1))  # -l 0 or -l 0-1: shard index == lcore id
    keys = ["pl:%d" % i for i in range(60)] + ["{tag%d}:%d" % (i % 3, i) for i in range(30)]
    remote = sum(1 for k in keys if key_shard(k, o.lcores) != here)
    if o.lcores > 1:
        check(0 < remote < len(keys), "all %d keys on one shard?" % len(keys))
        check(all(key_shard("{tag%d}:%d" % (i % 3, i), 2) == key_shard("tag%d" % (i % 3), 2)
                  for i in range(30)), "hash tags")
    before = telemetry_app(path).get("kv_remote_parts", 0)
    for k in keys:
        check(c.cmd("GET", k) == b"$-1\r\n", "GET %s" % k)
    after = telemetry_app(path).get("kv_remote_parts", 0)
    check(after - before == remote, "remote parts %d, expected %d" % (after - before, remote))
    c.close()


def _pump(port, fn, n, errors):
    """Run fn(conn, i) n times on its own connection, in a thread; collect failures."""
    import threading

    def run():
        try:
            c = Conn(port, timeout=30)
            for i in range(n):
                fn(c, i)
            c.close()
        except Exception as e:  # noqa: BLE001 (reported by the test)
            errors.append(repr(e))
    t = threading.Thread(target=run)
    t.start()
    return t


def t_atomic_mset(o):
    """MSET and MGET over keys of two shards are atomic to other clients: a reader never
    sees the keys of one MSET half applied (the values it reads are always equal)."""
    k0, k1 = on_shard("am", 0), on_shard("am", 1)
    seen, errors = [], []
    c = Conn(o.kv.port)
    c.cmd("MSET", k0, "0", k1, "0")

    def write(c, i):
        check(c.cmd("MSET", k0, str(i), k1, str(i)) == b"+OK\r\n", "MSET")

    def read(c, i):
        items = parse_array(c.cmd("MGET", k0, k1))
        if items[0] != items[1]:
            seen.append(items)

    threads = [_pump(o.kv.port, write, 3000, errors), _pump(o.kv.port, read, 3000, errors),
               _pump(o.kv.port, read, 3000, errors)]
    for t in threads:
        t.join(60)
    check(not errors, "clients failed: %r" % errors[:3])
    check(not seen, "%d MGETs saw a half-applied MSET, e.g. %r" % (len(seen), seen[:3]))
    c.close()


def t_atomic_rename(o):
    """RENAME between keys of two shards is atomic: EXISTS over both names always counts
    exactly one (the key is never in neither place, nor in both)."""
    a, b = on_shard("ar", 0), on_shard("ar", 1)
    bad, errors = [], []
    c = Conn(o.kv.port)
    c.cmd("DEL", a, b)
    c.cmd("SET", a, "v")

    def flip(c, i):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        r = c.cmd("RENAME", src, dst)
        check(r == b"+OK\r\n", "RENAME %s %s: %r" % (src, dst, r))

    def count(c, i):
        r = c.cmd("EXISTS", a, b)
        if r != b":1\r\n":
            bad.append(r)

    threads = [_pump(o.kv.port, flip, 2000, errors), _pump(o.kv.port, count, 3000, errors)]
    for t in threads:
        t.join(60)
    check(not errors, "clients failed: %r" % errors[:3])
    check(not bad, "%d EXISTS saw the key in neither or both places: %r" % (len(bad), bad[:3]))
    check(c.cmd("GET", a if c.cmd("EXISTS", a) == b":1\r\n" else b) == b"$1\r\nv\r\n", "value")
    c.close()


def t_atomic_msetnx(o):
    """Two clients race MSETNX over overlapping keys of two shards: exactly one wins each
    round and its keys are all set, never a mixture of both."""
    ka, kb, kc = on_shard("an", 0), on_shard("an", 1), on_shard("ao", 0)
    c = Conn(o.kv.port)
    mixed = []
    for rnd in range(300):
        c.cmd("DEL", ka, kb, kc)
        errors, wins = [], []

        def one(c, i, args=None):
            r = c.cmd("MSETNX", *args)
            wins.append(r)
        t1 = _pump(o.kv.port, lambda c, i: one(c, i, (ka, "1", kb, "1")), 1, errors)
        t2 = _pump(o.kv.port, lambda c, i: one(c, i, (kb, "2", kc, "2")), 1, errors)
        t1.join(30)
        t2.join(30)
        check(not errors, "clients failed: %r" % errors)
        state = parse_array(c.cmd("MGET", ka, kb, kc))
        if sorted(wins) != [b":0\r\n", b":1\r\n"] or state not in (
                [b"$1\r\n1\r\n", b"$1\r\n1\r\n", b"$-1\r\n"],
                [b"$-1\r\n", b"$1\r\n2\r\n", b"$1\r\n2\r\n"]):
            mixed.append((wins, state))
    check(not mixed, "%d rounds not atomic, e.g. %r" % (len(mixed), mixed[:2]))
    c.close()


def t_hello(o):
    """HELLO 2 answers with redis's map (id aside); HELLO 4 is refused with -NOPROTO (HELLO 3:
    kv_resp3_test.py)."""
    c = Conn(o.kv.port)
    r = c.cmd("HELLO", "2", "SETNAME", "me")
    items = parse_array(r)
    check([x.split(b"\r\n")[1] for x in items[0:14:2]] ==
          [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"],
          "HELLO keys: %r" % r)
    check(items[5] == b":2\r\n" and items[13] == b"*0\r\n", "HELLO 2: %r" % r)
    check(c.cmd("CLIENT", "GETNAME") == b"$2\r\nme\r\n", "HELLO SETNAME")
    check(c.cmd("HELLO", "4") == b"-NOPROTO unsupported protocol version\r\n", "HELLO 4")
    idr = c.cmd("CLIENT", "ID")
    check(items[7] == idr, "HELLO id %r != CLIENT ID %r" % (items[7], idr))
    c.close()


def t_quit(o):
    c = Conn(o.kv.port)
    c.send(resp("SET", "q", "1") + resp("QUIT") + resp("GET", "q"))
    got = c.closed()
    check(got == b"+OK\r\n+OK\r\n", "QUIT: %r" % got)


def t_redis_cli(o):
    """redis-cli, unmodified, against cr-kv and redis: the same output."""
    need("redis-cli", "redis-server")
    r = o.redis()
    cmds = [["SET", "cli", "hello"], ["GET", "cli"], ["INCR", "n"], ["MGET", "cli", "n", "x"],
            ["DEL", "cli"], ["GET", "cli"], ["PING"], ["EXISTS", "n"], ["TTL", "n"],
            ["SET", "e", "1", "EX", "100"], ["PERSIST", "e"], ["FOO"], ["GET"],
            ["CONFIG", "GET", "maxclients"], ["DBSIZE"], ["TYPE", "n"], ["ECHO", "a b"],
            ["HSET", "h", "a", "1", "b", "2"], ["HGETALL", "h"], ["HGET", "h", "a"], ["TYPE", "h"],
            ["RPUSH", "l", "x", "y"], ["LRANGE", "l", "0", "-1"], ["LPOP", "l"], ["TYPE", "l"],
            ["SADD", "s", "3", "1", "2"], ["SMEMBERS", "s"], ["SISMEMBER", "s", "2"], ["TYPE", "s"],
            ["ZADD", "z", "1.5", "a", "2", "b"], ["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            ["ZSCORE", "z", "a"], ["TYPE", "z"], ["OBJECT", "ENCODING", "z"], ["GET", "h"],
            ["LMOVE", "l", "l2", "LEFT", "LEFT"], ["SINTER", "s", "nokey"],
            ["RPUSH", "bl", "p", "q"], ["BLPOP", "nol", "bl", "1"], ["BRPOP", "nol", "0.05"],
            ["BLMOVE", "bl", "l2", "LEFT", "RIGHT", "0"], ["ZADD", "bz", "1", "m"],
            ["BZPOPMIN", "bz", "1"], ["BZPOPMAX", "bz", "0.05"], ["LMPOP", "1", "l2", "LEFT"]]
    for cmd in cmds:
        outs = []
        for port in (o.kv.port, r.port):
            p = subprocess.run(["redis-cli", "-p", str(port)] + cmd, capture_output=True,
                               timeout=10)
            outs.append((p.returncode, p.stdout))
        check(outs[0] == outs[1], "redis-cli %r: cr-kv %r, redis %r" % (cmd, outs[0], outs[1]))
    # Interactive mode fetches COMMAND DOCS first; piping commands through it must work.
    p = subprocess.run(["redis-cli", "-p", str(o.kv.port)], input=b"SET a 1\nGET a\nPING\n",
                       capture_output=True, timeout=10)
    check(p.returncode == 0 and p.stdout == b"OK\n1\nPONG\n", "redis-cli stdin: %r" % (p,))
    p = subprocess.run(["redis-cli", "-p", str(o.kv.port), "--scan"], capture_output=True,
                       timeout=10)
    check(p.returncode == 0 and sorted(p.stdout.split()) == [b"a", b"e", b"h", b"l2", b"n", b"s", b"z"],
          "redis-cli --scan: %r" % (p.stdout,))
    # --bigkeys walks the keyspace with SCAN, TYPE and each type's length command.
    outs = []
    for port in (o.kv.port, r.port):
        p = subprocess.run(["redis-cli", "-p", str(port), "--bigkeys"], capture_output=True,
                           timeout=20)
        # the summary (which key of a size is met first depends on the scan's order)
        outs.append((p.returncode, [x.split(b"'")[0] + x.split(b"has")[-1]
                                    for x in p.stdout.split(b"\n") if x.startswith(b"Biggest")]))
    check(outs[0][0] == 0 and sorted(outs[0][1]) == sorted(outs[1][1]),
          "redis-cli --bigkeys: cr-kv %r, redis %r" % tuple(outs))


def t_redis_benchmark(o):
    """redis-benchmark, unmodified, with the tests cr-bench's kv pairing runs: SET, GET,
    HSET, HGET, LPUSH, LPOP, SADD, ZADD and ZRANGE, pipeline 1 and 16, no errors, and the
    collections they fill hold what they were sent."""
    need("redis-benchmark")
    tests = [["-t", "set,get,hset,lpush,sadd,zadd,lpop"],
             ["hget", "myhash", "element:__rand_int__"], ["zrange", "myzset", "0", "9"]]
    names = ['"SET"', '"GET"', '"HSET"', '"LPUSH"', '"SADD"', '"ZADD"', '"LPOP"']
    for pipe in ("1", "16"):
        for t in tests:
            p = subprocess.run(["redis-benchmark", "-p", str(o.kv.port), "-n", "5000",
                                "-c", "20", "-r", "1000", "-P", pipe, "--csv"] + t,
                               capture_output=True, timeout=60)
            out = p.stdout.decode()
            check(p.returncode == 0, "redis-benchmark -P %s %s: %s %s"
                  % (pipe, " ".join(t), out, p.stderr))
            want = names if t[0] == "-t" else ['"%s"' % " ".join(t)]
            check(all(x in out for x in want), "redis-benchmark output: %r" % out)
            check(b"ERR" not in p.stderr and b"rror" not in p.stdout, "errors: %r" % p.stderr)
    c = Conn(o.kv.port)
    n = int(c.cmd("DBSIZE")[1:-2])
    check(0 < n <= 1004, "DBSIZE after redis-benchmark -r 1000: %d" % n)
    for cmd in ("HLEN myhash", "SCARD myset", "ZCARD myzset"):
        n = int(c.cmd(*cmd.split())[1:-2])
        check(0 < n <= 1000, "%s after redis-benchmark -r 1000: %d" % (cmd, n))
    # Each run pushes 5,000 elements then pops 5,000: nothing is left over.
    check(c.cmd("LLEN", "mylist") == b":0\r\n", "LLEN mylist: %r" % c.cmd("LLEN", "mylist"))
    c.close()


def t_shutdown(o):
    """SIGTERM while clients pipeline across shards: cr-kv stops within the shutdown
    timeout with status 0 (and, in sanitizer builds, no report)."""
    need("redis-benchmark")
    bench = subprocess.Popen(["redis-benchmark", "-p", str(o.kv.port), "-t", "set,get,mset",
                              "-c", "30", "-r", "10000", "-n", "100000000", "-P", "16", "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        check(bench.poll() is None, "redis-benchmark ended early")
        t0 = time.monotonic()
        o.kv.proc.send_signal(signal.SIGTERM)
        try:
            o.kv.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raise Failure("cr-kv still running 15 s after SIGTERM under load")
        log("stopped in %.2f s" % (time.monotonic() - t0))
        check(o.kv.proc.returncode == 0, "exit status %s: %s" % (
            o.kv.proc.returncode, o.kv.proc.stderr.read().decode(errors="replace")[-2000:]))
    finally:
        bench.kill()
        bench.wait()


def t_python(o):
    """redis-py (python3-redis) drives every command and agrees with redis."""
    try:
        import redis
    except ImportError:
        # python3-redis is a Debian package: reachable from another python3 too.
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import redis
        except ImportError:
            log("SKIP: python3-redis not installed")
            sys.exit(SKIP)
    need("redis-server")
    srv = o.redis()
    ours = redis.Redis(port=o.kv.port, socket_timeout=10)
    theirs = redis.Redis(port=srv.port, socket_timeout=10)
    now = int(time.time())
    calls = [
        ("set", ("a", "1")), ("get", ("a",)), ("set", ("a", "2"), {"nx": True}),
        ("set", ("a", "3"), {"xx": True, "get": True}), ("set", ("b", "1"), {"ex": 100}),
        ("set", ("b", "1"), {"px": 100000, "keepttl": False}),
        ("set", ("c", "1"), {"exat": now + 100}), ("set", ("c", "1"), {"pxat": (now + 100) * 1000}),
        ("set", ("c", "2"), {"keepttl": True}), ("setnx", ("d", "1")), ("setex", ("e", 100, "v")),
        ("psetex", ("f", 100000, "v")), ("getset", ("a", "9")), ("getdel", ("a",)),
        ("getex", ("b",), {"persist": True}), ("getex", ("b",), {"ex": 50}),
        ("mset", ({"m1": "1", "m2": "2", "m3": "3"},)), ("mget", (["m1", "m2", "zz", "m3"],)),
        ("msetnx", ({"m1": "x", "m9": "y"},)), ("msetnx", ({"n1": "x", "n2": "y"},)),
        ("append", ("ap", "abc")), ("strlen", ("ap",)), ("getrange", ("ap", 0, 1)),
        ("setrange", ("ap", 1, "ZZ")), ("get", ("ap",)), ("incr", ("i",)), ("decr", ("i",)),
        ("incrby", ("i", 7)), ("decrby", ("i", 3)), ("incrbyfloat", ("fl", 2.5)),
        ("delete", ("m1", "m2")), ("unlink", ("m3",)), ("exists", ("n1", "n2", "zz")),
        ("type", ("n1",)), ("expire", ("n1", 100)), ("pexpire", ("n2", 100000)),
        ("expireat", ("d", now + 100)), ("pexpireat", ("e", (now + 100) * 1000)),
        ("ttl", ("n1",)), ("persist", ("n1",)), ("ttl", ("n1",)),
        ("rename", ("n1", "n3")), ("renamenx", ("n3", "n2")), ("renamenx", ("n3", "n4")),
        ("dbsize", ()), ("ping", ()), ("echo", ("hi",)), ("config_get", ("maxclients",)),
        ("client_setname", ("py",)), ("client_getname", ()),
        # hashes
        ("hset", ("h", "f", "v")), ("hset", ("h",), {"mapping": {"a": "1", "b": "2"}}),
        ("hget", ("h", "f")), ("hmget", ("h", ["a", "zz", "b"])), ("hgetall", ("h",)),
        ("hkeys", ("h",)), ("hvals", ("h",)), ("hlen", ("h",)), ("hexists", ("h", "a")),
        ("hincrby", ("h", "a", 5)), ("hincrbyfloat", ("h", "b", 0.5)), ("hsetnx", ("h", "a", "x")),
        ("hstrlen", ("h", "f")), ("hdel", ("h", "f", "zz")), ("hscan", ("h",)), ("type", ("h",)),
        # lists
        ("rpush", ("l", "a", "b", "c")), ("lpush", ("l", "z")), ("lrange", ("l", 0, -1)),
        ("llen", ("l",)), ("lindex", ("l", 1)), ("lset", ("l", 0, "y")), ("linsert", ("l", "BEFORE", "b", "x")),
        ("lpos", ("l", "b")), ("lrem", ("l", 0, "x")), ("ltrim", ("l", 0, 2)), ("lpop", ("l",)),
        ("rpop", ("l", 2)), ("rpush", ("l", "p", "q")), ("lmove", ("l", "l2", "LEFT", "RIGHT")),
        ("rpoplpush", ("l", "l2")), ("lrange", ("l2", 0, -1)), ("lpushx", ("nol", "a")),
        ("rpush", ("l3", "a", "b", "c", "d")), ("blpop", (["nol", "l3"],), {"timeout": 1}),
        ("brpop", (["l3"],), {"timeout": 0}), ("blpop", (["nol"],), {"timeout": 0.05}),
        ("blmove", ("l3", "l2", 1, "LEFT", "LEFT")), ("brpoplpush", ("nol", "l2", 0.05)),
        ("lmpop", (2, "nol", "l2"), {"direction": "RIGHT", "count": 2}),
        ("blmpop", (0.05, 2, "nol", "l2"), {"direction": "LEFT"}),
        # sets
        ("sadd", ("s", "1", "2", "3")), ("sadd", ("s2", "2", "3", "4")), ("smembers", ("s",)),
        ("sismember", ("s", "2")), ("smismember", ("s", ["1", "9"])), ("scard", ("s",)),
        ("sinter", (["s", "s2"],)), ("sunion", (["s", "s2"],)), ("sdiff", (["s", "s2"],)),
        ("sinterstore", ("s3", ["s", "s2"])), ("smembers", ("s3",)), ("sintercard", (2, ["s", "s2"])),
        ("smove", ("s", "s2", "1")), ("srem", ("s", "2")), ("sscan", ("s2",)),
        ("srandmember", ("s3", 10)), ("spop", ("s3", 10)), ("exists", ("s3",)),
        # sorted sets
        ("zadd", ("z", {"a": 1, "b": 2, "c": 3.5})), ("zadd", ("z", {"a": 5}), {"xx": True, "ch": True}),
        ("zscore", ("z", "c")), ("zmscore", ("z", ["a", "no"])), ("zrank", ("z", "b")),
        ("zrevrank", ("z", "b")), ("zcard", ("z",)), ("zcount", ("z", 1, 4)),
        ("zrange", ("z", 0, -1), {"withscores": True}), ("zrangebyscore", ("z", "(1", "+inf")),
        ("zrevrange", ("z", 0, 1)), ("zincrby", ("z", 0.5, "b")), ("zlexcount", ("z", "-", "+")),
        ("zadd", ("z2", {"b": 10, "d": 20})), ("zunionstore", ("z3", ["z", "z2"])),
        ("zrange", ("z3", 0, -1), {"withscores": True}), ("zinterstore", ("z4", {"z": 2, "z2": 1})),
        ("zrange", ("z4", 0, -1), {"withscores": True}), ("zpopmin", ("z3", 2)), ("zpopmax", ("z3",)),
        ("zremrangebyscore", ("z", 0, 1)), ("zrem", ("z", "c")), ("zscan", ("z",)),
        ("zrangestore", ("z5", "z2", 0, -1)), ("zrandmember", ("z5", 5)),
        ("copy", ("z5", "z6")), ("object", ("encoding", "z6")), ("type", ("z6",)),
        ("bzpopmin", (["noz", "z6"],), {"timeout": 1}), ("bzpopmax", (["z6"],), {"timeout": 0.05}),
        ("bzpopmin", (["noz"],), {"timeout": 0.05}), ("zadd", ("z7", {"a": 1, "b": 2, "c": 3})),
        ("zmpop", (2, ["noz", "z7"]), {"min": True, "count": 2}),
        ("bzmpop", (0.05, 1, ["z7"]), {"max": True}),
    ]
    for call in calls:
        name, args = call[0], call[1]
        kw = call[2] if len(call) > 2 else {}
        res = []
        for cl in (ours, theirs):
            try:
                res.append(("ok", getattr(cl, name)(*args, **kw)))
            except redis.ResponseError as e:
                res.append(("err", str(e)))
        check(res[0] == res[1], "%s%r: cr-kv %r, redis %r" % (name, args, res[0], res[1]))
    check(sorted(ours.keys("*")) == sorted(theirs.keys("*")), "KEYS *")
    check(sorted(ours.scan_iter(count=3)) == sorted(theirs.scan_iter(count=3)), "SCAN")
    check(ours.randomkey() in theirs.keys("*"), "RANDOMKEY")
    check(ours.select(0) if hasattr(ours, "select") else True, "SELECT 0")
    check(isinstance(ours.time(), tuple), "TIME")
    check(ours.client_id() > 0, "CLIENT ID")
    check("redis_version" in ours.info("server"), "INFO server")
    check(ours.info("keyspace")["db0"]["keys"] == theirs.info("keyspace")["db0"]["keys"],
          "INFO keyspace")
    check(ours.command_count() > 40, "COMMAND COUNT")
    check(ours.flushdb() and ours.dbsize() == 0, "FLUSHDB")
    check(ours.flushall() and ours.dbsize() == 0, "FLUSHALL")
    hello = ours.execute_command("HELLO", "2")
    check(len(hello) == 14 and hello[5] == 2, "HELLO 2: %r" % (hello,))
    check(ours.execute_command("QUIT") in (b"OK", "OK", True), "QUIT")


# ---- bad input: each its own test ----

def bad_case(o, data, expect, closes=True, extra_redis=(), compare_redis=True):
    """Send @data; cr-kv must answer @expect (bytes) and close (or stay open)."""
    targets = [("cr-kv", o.kv.port)]
    if compare_redis and shutil.which("redis-server"):
        targets.append(("redis", o.redis(extra_redis).port))
    for name, port in targets:
        c = Conn(port)
        c.send(data)
        if closes:
            got = c.closed(10)
            check(got == expect, "%s: expected %r then close, got %r" % (name, expect, got))
        else:
            got = b""
            deadline = time.monotonic() + 2
            while len(got) < len(expect) and time.monotonic() < deadline:
                c.s.settimeout(0.2)
                try:
                    d = c.s.recv(4096)
                except socket.timeout:
                    continue
                if not d:
                    raise Failure("%s closed the connection after %r" % (name, got))
                got += d
            check(got == expect, "%s: expected %r, got %r" % (name, expect, got))
            check(c.cmd("PING") == b"+PONG\r\n", "%s: not usable afterwards" % name)
        c.close()


def t_bad_mbulk_len(o):
    bad_case(o, b"*3000000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n")


def t_bad_mbulk_nonnum(o):
    bad_case(o, b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n")


def t_bad_bulk_negative(o):
    bad_case(o, b"*1\r\n$-10\r\n", b"-ERR Protocol error: invalid bulk length\r\n")


def t_bad_bulk_nonnum(o):
    bad_case(o, b"*1\r\n$blabla\r\n", b"-ERR Protocol error: invalid bulk length\r\n")


def t_bad_bulk_too_big(o):
    # 512 MB + 1, the default --proto-max-bulk-len: refused as soon as the length is read.
    bad_case(o, b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n")


def t_bad_bulk_over_limit(o):
    # With --proto-max-bulk-len 1mb (cr-kv restarted with it, redis configured alike).
    o.restart(["--proto-max-bulk-len", "1mb"])
    bad_case(o, b"*2\r\n$3\r\nGET\r\n$1048577\r\n",
             b"-ERR Protocol error: invalid bulk length\r\n",
             extra_redis=["--proto-max-bulk-len", "1mb"])
    c = Conn(o.kv.port)
    big = b"x" * (1024 * 1024)
    check(c.cmd("SET", "big", big) == b"+OK\r\n", "a 1 MiB value at the limit")
    check(c.cmd("STRLEN", "big") == b":1048576\r\n", "STRLEN of it")
    check(c.cmd("APPEND", "big", "y") ==
          b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n", "APPEND over")
    c.close()


def t_bad_expected_dollar(o):
    bad_case(o, b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n")


def t_bad_inline_too_big(o):
    bad_case(o, b"a" * (64 * 1024 + 10), b"-ERR Protocol error: too big inline request\r\n")


def t_bad_mbulk_count_too_big(o):
    bad_case(o, b"*" + b"1" * (64 * 1024 + 10),
             b"-ERR Protocol error: too big mbulk count string\r\n")


def t_bad_unbalanced_quotes(o):
    bad_case(o, b'SET "a b\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n")


def t_bad_empty_lines(o):
    # Empty inline lines and "*-10" / "*0" are ignored; the connection goes on.
    bad_case(o, b"\r\n\r\n\n*-10\r\n*0\r\nPING\r\n", b"+PONG\r\n", closes=False)


def t_bad_inline_ok(o):
    # Inline commands with quotes and escapes work as in redis.
    bad_case(o, b'SET "a b" "x\\x41\\ny"\r\nGET "a b"\r\nECHO \'it\\\'s\'\r\n',
             b"+OK\r\n$4\r\nxA\ny\r\n$4\r\nit's\r\n", closes=False)


def t_bad_nul_flood(o):
    """A NUL and then endless data without a newline: closed once 64 KiB have come,
    with the inline error, well before the data ends."""
    for port in [o.kv.port]:
        c = Conn(port)
        sent = 0
        closed = False
        chunk = b"\x00" + b"z" * 8191
        deadline = time.monotonic() + 10
        try:
            while sent < 64 * 1024 * 1024 and time.monotonic() < deadline:
                c.s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        if not closed:
            got = c.closed(5)
            check(b"too big inline request" in got, "NUL flood reply: %r" % got[:100])
        check(sent < 8 * 1024 * 1024, "still accepting after %d bytes" % sent)
        c.close()


def t_bad_qbuf_limit(o):
    """A query buffer over --client-query-buffer-limit: the client is closed and
    counted in INFO."""
    o.restart(["--client-query-buffer-limit", "1mb"])
    c = Conn(o.kv.port)
    # One bulk of 4 MiB announced: the buffer grows past 1 MiB before it is complete.
    c.send(b"*2\r\n$3\r\nGET\r\n$4194304\r\n")
    closed = False
    try:
        for _ in range(64):
            c.s.sendall(b"y" * 65536)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        c.closed(5)
    c.close()
    d = Conn(o.kv.port)
    info = d.cmd("INFO", "stats").decode()
    check("client_query_buffer_limit_disconnections:1\r\n" in info, "not counted: %r" % info)
    d.close()


def t_bad_maxclients(o):
    o.restart(["--maxclients", "3"])
    first = Conn(o.kv.port)
    # The readiness probe's connection may not be closed on the server side yet.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if b"connected_clients:1\r\n" in first.cmd("INFO", "clients"):
            break
        time.sleep(0.05)
    conns = [first] + [Conn(o.kv.port) for _ in range(2)]
    for c in conns:
        check(c.cmd("PING") == b"+PONG\r\n", "PING under the limit")
    extra = Conn(o.kv.port)
    got = extra.closed(5)
    check(got == b"-ERR max number of clients reached\r\n", "over the limit: %r" % got)
    conns[0].close()
    time.sleep(0.3)
    again = Conn(o.kv.port)
    check(again.cmd("PING") == b"+PONG\r\n", "a slot freed is usable again")
    info = again.cmd("INFO", "stats").decode()
    check("rejected_connections:1\r\n" in info, "rejected not counted: %r" % info)
    for c in conns[1:] + [again]:
        c.close()


def t_bad_http_post(o):
    bad_case(o, b"POST / HTTP/1.1\r\nHost: x\r\n\r\n", b"")


def t_bad_http_host(o):
    bad_case(o, b"Host: example.com\r\n\r\n", b"")


def t_bad_maxmemory(o):
    """Writes are refused with -OOM once the keyspace uses more than --maxmemory; reads
    and deletes still work."""
    o.restart(["--maxmemory", "1mb"])
    c = Conn(o.kv.port)
    val = b"v" * 10000
    oom = None
    for i in range(1000):
        r = c.cmd("SET", "mm:%d" % i, val)
        if r != b"+OK\r\n":
            oom = r
            break
    check(oom == b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
          "no OOM error: %r" % oom)
    check(c.cmd("GET", "mm:0") == b"$10000\r\n" + val + b"\r\n", "reads work")
    check(c.cmd("INCR", "mm:new") == oom, "INCR is refused too")
    check(c.cmd("DEL", "mm:0", "mm:1") == b":2\r\n", "deletes work")
    check(c.cmd("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$7\r\n1048576\r\n",
          "CONFIG GET maxmemory")
    c.close()


def t_cli(o):
    """--help tells the options; bad values exit 2 naming the value."""
    p = subprocess.run([o.exe, "--help"], capture_output=True, timeout=10)
    out = p.stdout.decode()
    check(p.returncode == 0, "--help exit %d" % p.returncode)
    for opt in ("--listen", "--maxclients", "--maxmemory", "--proto-max-bulk-len",
                "--client-query-buffer-limit", "--hash-seed", "--slowlog-log-slower-than",
                "--slowlog-max-len", "--corelist CORELIST"):
        check(opt in out, "--help lacks %s" % opt)
    for args, word in ((["--maxclients", "0"], "--maxclients 0"),
                       (["--maxmemory", "12qb"], "--maxmemory 12qb"),
                       (["--proto-max-bulk-len", "10"], "--proto-max-bulk-len 10"),
                       (["--listen", "nohost"], "--listen nohost"),
                       (["--client-query-buffer-limit", "x"], "--client-query-buffer-limit x"),
                       (["--hash-seed", "00ff"], "--hash-seed 00ff"),
                       (["--hash-seed", "x" * 32], "--hash-seed " + "x" * 32),
                       (["--slowlog-log-slower-than", "-2"], "--slowlog-log-slower-than -2"),
                       (["--slowlog-max-len", "-1"], "--slowlog-max-len -1"),
                       (["extra"], "extra")):
        p = subprocess.run([o.exe] + args, capture_output=True, timeout=10)
        err = p.stderr.decode()
        check(p.returncode == 2, "%r: exit %d" % (args, p.returncode))
        check(word in err, "%r: stderr %r does not name the value" % (args, err))


TESTS = {
    "oracle": t_oracle, "pipeline": t_pipeline, "order": t_order, "scan": t_scan,
    "expiry": t_expiry, "info": t_info, "hello": t_hello, "quit": t_quit,
    "redis_cli": t_redis_cli, "redis_benchmark": t_redis_benchmark, "python": t_python,
    "shutdown": t_shutdown, "telemetry": t_telemetry, "placement": t_placement,
    "atomic_mset": t_atomic_mset, "atomic_rename": t_atomic_rename,
    "atomic_msetnx": t_atomic_msetnx, "memory": t_memory, "random": t_random,
    "stall": t_stall,
    "bad_mbulk_len": t_bad_mbulk_len, "bad_mbulk_nonnum": t_bad_mbulk_nonnum,
    "bad_bulk_negative": t_bad_bulk_negative, "bad_bulk_nonnum": t_bad_bulk_nonnum,
    "bad_bulk_too_big": t_bad_bulk_too_big, "bad_bulk_over_limit": t_bad_bulk_over_limit,
    "bad_expected_dollar": t_bad_expected_dollar, "bad_inline_too_big": t_bad_inline_too_big,
    "bad_mbulk_count_too_big": t_bad_mbulk_count_too_big,
    "bad_unbalanced_quotes": t_bad_unbalanced_quotes, "bad_empty_lines": t_bad_empty_lines,
    "bad_inline_ok": t_bad_inline_ok, "bad_nul_flood": t_bad_nul_flood,
    "bad_qbuf_limit": t_bad_qbuf_limit, "bad_maxclients": t_bad_maxclients,
    "bad_http_post": t_bad_http_post, "bad_http_host": t_bad_http_host,
    "bad_maxmemory": t_bad_maxmemory, "cli": t_cli,
}


class Ctx:
    def __init__(self, exe, lcores, driver="auto"):
        self.exe = exe
        self.lcores = lcores
        self.driver = driver
        self.kv = None
        self._redis = []
        self.tmpdirs = []

    def start(self, extra=()):
        self.kv = KV(self.exe, self.lcores, extra, self.driver)

    def restart(self, extra):
        kv, self.kv = self.kv, None
        kv.stop()
        self.start(extra)

    def redis(self, extra=()):
        need("redis-server")
        r = Redis(extra)
        self._redis.append(r)
        return r

    def stop(self):
        for r in self._redis:
            r.stop()
        self._redis = []
        try:
            if self.kv is not None:
                kv, self.kv = self.kv, None
                kv.stop()
        finally:
            for d in self.tmpdirs:
                shutil.rmtree(d, ignore_errors=True)


def main(tests=None, doc=None):
    """Parse the command line and run one of @tests (TESTS; kv_block_test.py has its own)."""
    tests = TESTS if tests is None else tests
    ap = argparse.ArgumentParser(description=(doc or __doc__).split("\n")[0])
    ap.add_argument("exe")
    ap.add_argument("test", choices=sorted(tests))
    ap.add_argument("--lcores", type=int, default=1, choices=(1, 2))
    ap.add_argument("--driver", default="auto", choices=("auto", "uring", "epoll"))
    ap.add_argument("--count", type=int, default=10000, help="random: commands (100000 by hand)")
    ap.add_argument("--seed", type=int, default=18, help="random: the stream's seed")
    args = ap.parse_args()
    if args.lcores > (os.cpu_count() or 1):
        log("SKIP: %d lcores need %d CPUs" % (args.lcores, args.lcores))
        return SKIP
    if args.test != "cli" and apptest.skip_if_refused(args.exe, args.driver, log):
        return SKIP
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(Failure("test timed out")))
    signal.alarm(TEST_TIMEOUT)
    o = Ctx(args.exe, args.lcores, args.driver)
    status = 1
    try:
        if args.test != "cli":
            o.start()
        if args.test == "random" and tests is TESTS:
            t_random(o, args.count, args.seed)
        elif args.test == "stall" and tests is TESTS and args.count != 10000:
            t_stall(o, args.count)
        else:
            tests[args.test](o)
        status = 0
    except Failure as e:
        log("FAIL: %s" % e)
    except SystemExit as e:
        status = e.code
    finally:
        # Whatever happened (a skip, an exception), no server outlives the test.
        try:
            o.stop()
        except Failure as e:
            log("FAIL: %s" % e)
            status = 1
    if status == 0:
        log("PASS: %s (%d lcore%s)" % (args.test, args.lcores, "" if args.lcores == 1 else "s"))
    return status

if __name__ == "__main__":
    sys.exit(main())
