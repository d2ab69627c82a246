#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of cr-proxy's TLS termination (--tls-listen): TLS from the clients,
plain HTTP to a cr-http backend, with curl --cacert and python's ssl.

  tls_proxy_test.py CR_PROXY CR_HTTP TEST [--driver uring|epoll]

TEST is one of: curl, pipeline. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

import apptest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_test import Failure, check, log  # noqa: E402
import http_test  # noqa: E402
import tls_http_test  # noqa: E402

SKIP = 77


class Proxy:
    def __init__(self, exe, driver, certs, backend):
        self.proc = subprocess.Popen(
            [exe, "-l", str(min(os.sched_getaffinity(0))), "--io-driver", driver,
             "--telemetry", "off", "--listen", "127.0.0.1:0", "--backend",
             "%s:%d" % backend, "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert,
             "--tls-key", certs.key], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, deadline = b"", time.monotonic() + 10
        while b"(tls, plain to the backends)" not in out:
            check(time.monotonic() < deadline and self.proc.poll() is None,
                  "cr-proxy not ready: %r %r" % (out, self.proc.poll()))
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                out += os.read(self.proc.stdout.fileno(), 4096)
        m = re.search(rb"listening on 127\.0\.0\.1:(\d+) \(tls", out)
        self.port = int(m.group(1))
        self.url = "https://localhost:%d" % self.port

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        check(self.proc.returncode == 0, "cr-proxy exit %d: %s" % (self.proc.returncode, err))


def t_curl(proxy_exe, http_exe, driver, certs):
    if shutil.which("curl") is None:
        return SKIP
    be = http_test.Server(http_exe, driver)
    px = Proxy(proxy_exe, driver, certs, be.addr)
    try:
        r = subprocess.run(["curl", "-sS", "--cacert", certs.ca, "-w", "\n%{num_connects}\n",
                            px.url + "/plaintext", px.url + "/json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        check(r.returncode == 0, "curl through the proxy: %s" % r.stderr)
        lines = r.stdout.split("\n")
        check(lines[0] == "Hello, World!1" or lines[0].startswith("Hello, World!"),
              "curl: %r" % r.stdout)
        check('{"message":"Hello, World!"}' in r.stdout and lines[-2] == "0",
              "not two answers on one kept-alive connection: %r" % r.stdout)
    finally:
        px.stop()
        be.stop()
    return 0


def t_pipeline(proxy_exe, http_exe, driver, certs):
    be = http_test.Server(http_exe, driver)
    px = Proxy(proxy_exe, driver, certs, be.addr)
    try:
        raw = socket.create_connection(("127.0.0.1", px.port), timeout=10)
        s = tls_http_test.client_ctx(certs).wrap_socket(raw, server_hostname="localhost")
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" * 30)
        rs = tls_http_test.read_responses(s, 30)
        check(all(b == b"Hello, World!" for _, b in rs), "30 pipelined answers")
        s.close()
    finally:
        px.stop()
        be.stop()
    return 0


TESTS = {"curl": t_curl, "pipeline": t_pipeline}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("proxy")
    ap.add_argument("http")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if shutil.which("openssl") is None:
        return SKIP
    if apptest.skip_if_refused(a.proxy, a.driver, log):
        return SKIP
    signal.alarm(100)
    certs = tls_http_test.Certs()
    try:
        rc = TESTS[a.test](a.proxy, a.http, a.driver, certs)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
        certs.remove()
    if rc == SKIP:
        return SKIP
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
