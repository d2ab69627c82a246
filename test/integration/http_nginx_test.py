#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-http against nginx (Debian's) as the oracle: the same requests to both, on loopback.

  http_nginx_test.py CR_HTTP TEST [--driver uring|epoll]

TEST is one of: access_log (the combined line, field by field, odd characters escaped,
and the reopen on SIGUSR1). nginx runs as its own child on a free port of 127.0.0.1 with
a private prefix; without /usr/sbin/nginx the test skips (77).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import http_test
from http_test import Failure, Reader, Server, check, log

SKIP = 77
NGINX = "/usr/sbin/nginx"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nginx:
    """nginx with its own prefix; /plaintext as cr-http answers it."""

    def __init__(self, d, root=None, extra=""):
        self.d = d
        for attempt in range(5):
            self.port = free_port()
            conf = os.path.join(d, "nginx.conf")
            temps = "".join("%s_temp_path %s/%s;\n" % (t, d, t)
                            for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            with open(conf, "w") as f:
                f.write("""daemon off; master_process off; worker_processes 1;
pid %(d)s/nginx.pid; error_log %(d)s/error.log;
events { worker_connections 64; }
http {
  %(temps)s
  access_log %(d)s/access.log combined;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:%(port)d;
    root %(root)s;
    location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
    %(extra)s
  }
}
""" % {"d": d, "temps": temps, "port": self.port, "root": root or d, "extra": extra})
            self.proc = subprocess.Popen([NGINX, "-p", d, "-c", conf],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    self.addr = ("127.0.0.1", self.port)
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()  # the port was taken meanwhile: another one
        raise Failure("nginx did not start: %r" % self.proc.stderr.read())

    def connect(self, timeout=5.0):
        return socket.create_connection(self.addr, timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ask(srv, raw, head_only=False):
    s = srv.connect()
    try:
        s.sendall(raw)
        return Reader(s).response(head_only)
    finally:
        s.close()


def wait_lines(path, n, what):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, "rb") as f:
                lines = f.read().splitlines()
            if len(lines) >= n:
                return lines
        time.sleep(0.05)
    raise Failure("%s: fewer than %d lines in %s" % (what, n, path))


COMBINED = re.compile(rb'^(\S+) - - \[(\d\d/\w\w\w/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] '
                      rb'"((?:[^"\\]|\\x[0-9A-F]{2})*)" (\d{3}) (\d+) '
                      rb'"((?:[^"\\]|\\x[0-9A-F]{2})*)" "((?:[^"\\]|\\x[0-9A-F]{2})*)"$')


def fields(line, what):
    m = COMBINED.match(line)
    check(m is not None, "%s: not a combined line: %r" % (what, line))
    return m.groups()


# (request, head_only, compare body bytes): odd characters in every quoted field.
REQUESTS = [
    (b"GET /plaintext HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/7.88.1\r\n"
     b"Referer: http://example.com/a?b=c\r\nConnection: close\r\n\r\n", False, True),
    (b"GET /plaintext?q=%22a%22&t=~x HTTP/1.1\r\nHost: x\r\n"
     b"User-Agent: a \"quoted\" \\back\tslash \xff\xc3\xa9\r\nReferer: r\"q\" \x80\r\n"
     b"Connection: close\r\n\r\n", False, True),
    (b"HEAD /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", True, True),
    (b"GET /plaintext HTTP/1.0\r\n\r\n", False, True),
    (b"GET /no-such-file HTTP/1.1\r\nHost: x\r\nUser-Agent: u\r\nConnection: close\r\n\r\n",
     False, False),
]


def t_access_log(exe, driver):
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return SKIP
    d = tempfile.mkdtemp(prefix="cr-http-acc-")
    www = os.path.join(d, "www")
    os.mkdir(www)
    ours = os.path.join(d, "ours.log")
    ng = Nginx(d, root=www)
    srv = Server(exe, driver, extra=["--root", www, "--access-log", ours])
    try:
        for raw, head_only, _ in REQUESTS:
            ask(ng, raw, head_only)
            ask(srv, raw, head_only)
        theirs = wait_lines(os.path.join(d, "access.log"), len(REQUESTS), "nginx")
        mine = wait_lines(ours, len(REQUESTS), "cr-http")
        for i, (raw, _, same_bytes) in enumerate(REQUESTS):
            a = fields(mine[i], "cr-http")
            b = fields(theirs[i], "nginx")
            what = "request %d %r" % (i, raw[:40])
            check(a[0] == b[0] == b"127.0.0.1", "%s: address %r vs nginx %r" % (what, a[0], b[0]))
            check(a[2] == b[2], "%s: request line %r vs nginx %r" % (what, a[2], b[2]))
            check(a[3] == b[3], "%s: status %r vs nginx %r" % (what, a[3], b[3]))
            if same_bytes:
                check(a[4] == b[4], "%s: body bytes %r vs nginx %r" % (what, a[4], b[4]))
            check(a[5] == b[5], "%s: referer %r vs nginx %r" % (what, a[5], b[5]))
            check(a[6] == b[6], "%s: user agent %r vs nginx %r" % (what, a[6], b[6]))
            # The same second, give or take the two requests' gap.
            ta = time.strptime(a[1].decode(), "%d/%b/%Y:%H:%M:%S %z")
            tb = time.strptime(b[1].decode(), "%d/%b/%Y:%H:%M:%S %z")
            check(abs(time.mktime(ta) - time.mktime(tb)) <= 2, "%s: time %r vs nginx %r"
                  % (what, a[1], b[1]))
        # logrotate: renamed, SIGUSR1, the next line goes to a new file at the path.
        os.rename(ours, ours + ".1")
        srv.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not os.path.exists(ours) and time.monotonic() < deadline:
            time.sleep(0.05)
        check(os.path.exists(ours), "no new access log after SIGUSR1")
        ask(srv, b"GET /plaintext?after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        new = wait_lines(ours, 1, "cr-http after the reopen")
        check(len(new) == 1 and b"/plaintext?after" in new[0], "after reopen: %r" % new)
        old = wait_lines(ours + ".1", len(REQUESTS), "the rotated file")
        check(len(old) == len(REQUESTS), "rotated file got more lines: %r" % old)
        srv.stop()
    finally:
        srv.kill()
        ng.stop()
        shutil.rmtree(d, ignore_errors=True)
    # Off by default and with "off"; a path that cannot be opened is one clear line.
    r = subprocess.run([exe, "--access-log", "/nonexistent/dir/x.log", "--listen",
                        "127.0.0.1:0", "--telemetry", "off"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    err = r.stderr.decode()
    check(r.returncode != 0 and "--access-log /nonexistent/dir/x.log" in err,
          "bad --access-log: exit %d, %r" % (r.returncode, err))
    return 0


TESTS = {"access_log": t_access_log}

if __name__ == "__main__":
    sys.exit(http_test.run(TESTS, __doc__))
