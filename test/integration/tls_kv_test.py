#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of cr-kv's --tls-listen with redis-cli --tls and redis-py over TLS.

  tls_kv_test.py CR_KV TEST [--driver uring|epoll]

TEST is one of: redis_cli, python. The replies over TLS are compared with the replies of
the same commands on cr-kv's plain port (the TLS layer must change nothing). Certificates
are made with openssl req in a temporary directory. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import re
import select
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

import apptest

SKIP = 77

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_test import Failure, check, log  # noqa: E402


def make_cert(d):
    crt, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt,
                        "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check(r.returncode == 0, "openssl req: %s" % r.stderr)
    return crt, key


class Server:
    def __init__(self, exe, driver, crt, key):
        self.proc = subprocess.Popen(
            [exe, "--io-driver", driver, "--listen", "127.0.0.1:0", "--telemetry", "off",
             "--tls-listen", "127.0.0.1:0", "--tls-cert", crt, "--tls-key", key],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, deadline = b"", time.monotonic() + 10
        while b"(resp over tls)" not in out:
            check(time.monotonic() < deadline and self.proc.poll() is None,
                  "cr-kv not ready: %r" % out)
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                out += os.read(self.proc.stdout.fileno(), 4096)
        text = out.decode()
        self.plain = int(re.search(r"listening on 127\.0\.0\.1:(\d+) \(resp\)", text).group(1))
        self.tls = int(re.search(r"listening on 127\.0\.0\.1:(\d+) \(resp over tls\)",
                                 text).group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=20)
        check(self.proc.returncode == 0, "cr-kv exit %d: %s" % (self.proc.returncode, err))


COMMANDS = [["PING"], ["SET", "k", "v"], ["GET", "k"], ["INCR", "n"], ["INCRBY", "n", "41"],
            ["RPUSH", "l", "a", "b", "c"], ["LRANGE", "l", "0", "-1"], ["DEL", "k"],
            ["GET", "k"], ["SET", "big", "x" * 100000], ["STRLEN", "big"],
            ["HSET", "h", "f", "1"], ["HGETALL", "h"], ["NOSUCH"]]


def t_redis_cli(exe, driver, crt, key):
    if shutil.which("redis-cli") is None:
        return SKIP
    srv = Server(exe, driver, crt, key)
    try:
        outs = {}
        for name, args in (("plain", ["-p", str(srv.plain)]),
                           ("tls", ["--tls", "--cacert", crt, "-p", str(srv.tls)])):
            lines = []
            subprocess.run(["redis-cli", "-h", "127.0.0.1"] + args + ["FLUSHALL"],
                           stdout=subprocess.PIPE, timeout=20)
            for c in COMMANDS:
                r = subprocess.run(["redis-cli", "-h", "127.0.0.1"] + args + c,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=20)
                check(r.returncode == 0, "redis-cli %s %s: %s" % (name, c[0], r.stderr))
                lines.append(r.stdout)
            outs[name] = lines
        check(outs["tls"] == outs["plain"], "TLS replies differ from plain ones")
        check(outs["tls"][0].strip() == "PONG" and outs["tls"][2].strip() == "v",
              "replies: %r" % outs["tls"][:3])
        # The server's certificate is checked: without the CA redis-cli refuses it.
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "--tls", "-p", str(srv.tls),
                            "PING"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=20)
        check("PONG" not in r.stdout, "redis-cli trusted an unknown certificate")
    finally:
        srv.stop()
    return 0


def t_python(exe, driver, crt, key):
    try:
        import redis
    except ImportError:
        # python3-redis is a Debian package: reachable from another python3 too.
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import redis
        except ImportError:
            log("SKIP: no redis-py (python3-redis)")
            return SKIP
    srv = Server(exe, driver, crt, key)
    try:
        c = redis.Redis(host="localhost", port=srv.tls, ssl=True, ssl_ca_certs=crt,
                        socket_timeout=10)
        check(c.ping(), "PING over TLS")
        p = c.pipeline(transaction=False)
        for i in range(2000):
            p.set("key:%d" % i, "v%d" % i)
        for i in range(2000):
            p.get("key:%d" % i)
        res = p.execute()
        check(all(r is True for r in res[:2000]), "SETs over TLS")
        check(res[2000:] == [("v%d" % i).encode() for i in range(2000)], "GETs over TLS")
        plain = redis.Redis(host="127.0.0.1", port=srv.plain, socket_timeout=10)
        check(plain.get("key:1999") == b"v1999", "what TLS wrote, read in plain")
        c.close()
        plain.close()
    finally:
        srv.stop()
    return 0


TESTS = {"redis_cli": t_redis_cli, "python": t_python}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exe")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if shutil.which("openssl") is None:
        return SKIP
    if apptest.skip_if_refused(a.exe, a.driver, log):
        return SKIP
    signal.alarm(100)
    d = tempfile.mkdtemp(prefix="tls_kv_test.")
    try:
        crt, key = make_cert(d)
        rc = TESTS[a.test](a.exe, a.driver, crt, key)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
        shutil.rmtree(d, ignore_errors=True)
    if rc == SKIP:
        return SKIP
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
