#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cr-http against nginx (Debian's) as the oracle: the same requests to both, on loopback.

  http_nginx_test.py CR_HTTP TEST [--driver uring|epoll]

TEST is one of: access_log (the combined line, field by field, odd characters escaped,
and the reopen on SIGUSR1), basics (a directory without its slash -> 301, ETag and
If-None-Match -> 304, gzip_static, a body on error statuses, the built-in routes moved
or off under --root), https_redirect (the 301's Location over HTTPS). nginx runs as its own child on a free port of 127.0.0.1 with
a private prefix; without /usr/sbin/nginx the test skips (77).
"""
import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import apptest
import http_test
from http_test import Failure, Reader, Server, check, log

SKIP = 77
NGINX = "/usr/sbin/nginx"


class Nginx:
    """nginx with its own prefix; /plaintext as cr-http answers it."""

    def __init__(self, d, root=None, extra="", plain="/plaintext"):
        self.d = d
        for attempt in range(5):
            self.port = apptest.free_port()
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
    location = %(plain)s { default_type text/plain; return 200 "Hello, World!"; }
    %(extra)s
  }
}
""" % {"d": d, "temps": temps, "port": self.port, "root": root or d, "extra": extra,
                                  "plain": plain})
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


def nginx_dirs(prefix):
    """A private directory for nginx and its www/ path; (None, None) without nginx."""
    if not os.path.exists(NGINX):
        log("SKIP: no %s" % NGINX)
        return None, None
    d = tempfile.mkdtemp(prefix=prefix)
    return d, os.path.join(d, "www")


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
    d, www = nginx_dirs("cr-http-acc-")
    if d is None:
        return SKIP
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


def make_www(www):
    os.makedirs(os.path.join(www, "dir"))
    with open(os.path.join(www, "dir", "index.html"), "w") as f:
        f.write("<p>dir</p>\n")
    with open(os.path.join(www, "a.txt"), "w") as f:
        f.write("plain text, " * 50)
    with open(os.path.join(www, "a.txt.gz"), "wb") as f:
        f.write(gzip.compress(b"compressed text, " * 50))
    with open(os.path.join(www, "only.txt.gz"), "wb") as f:
        f.write(gzip.compress(b"only the gz"))
    with open(os.path.join(www, "plaintext"), "w") as f:
        f.write("the file named plaintext\n")
    t = time.time() - 3600
    for dp, dn, fn in os.walk(www):
        for n in fn:
            os.utime(os.path.join(dp, n), (t, t))


def both(ng, srv, raw, head_only=False):
    return ask(ng, raw, head_only), ask(srv, raw, head_only)


def req(path, *fields, method="GET", version="1.1", host="x"):
    lines = ["%s %s HTTP/%s" % (method, path, version)]
    if host is not None:
        lines.append("Host: " + host)
    lines += list(fields) + ["Connection: close", "", ""]
    return "\r\n".join(lines).encode()


def t_basics(exe, driver):
    d, www = nginx_dirs("cr-http-ng-")
    if d is None:
        return SKIP
    make_www(www)
    ng = Nginx(d, root=www, plain="/hello", extra="gzip_static on;")
    srv = Server(exe, driver, extra=["--root", www, "--plaintext-path", "/hello",
                                     "--json-path", "off"])
    ports = {ng.port: "PORT", srv.addr[1]: "PORT"}

    def loc(r):
        v = r.h("location") or ""
        for p, name in ports.items():
            v = v.replace(":%d/" % p, ":%s/" % name)
        return v

    try:
        # A directory named without its slash: 301 to it with the slash.
        for raw, head_only in [(req("/dir"), False), (req("/dir?a=1&b=%20"), False),
                               (req("/dir", host="x:1234"), False),
                               (req("/dir", method="HEAD"), True)]:
            a, b = both(ng, srv, raw, head_only)
            check(a.status == b.status == 301, "%r: nginx %d, ours %d" % (raw, a.status, b.status))
            check(loc(a) == loc(b), "%r: Location nginx %r, ours %r" % (raw, loc(a), loc(b)))
            if not head_only:
                check(b.body and b"301" in b.body and a.body, "%r: no 301 body" % raw)
            log("basics: %r -> 301 %s, as nginx" % (raw.split(b"\r\n")[0], loc(b)))
        a, b = both(ng, srv, req("/dir/"))
        check(a.status == b.status == 200 and a.body == b.body, "/dir/: %d %d" % (a.status, b.status))

        # ETag, as nginx computes it, and If-None-Match.
        a, b = both(ng, srv, req("/a.txt"))
        check(a.status == b.status == 200 and a.h("etag") and a.h("etag") == b.h("etag"),
              "ETag: nginx %r, ours %r" % (a.h("etag"), b.h("etag")))
        etag = a.h("etag")
        for inm, want in [(etag, 304), ("W/" + etag, 304), ('"nope", ' + etag, 304),
                          ('"nope"', 200), ("*", 304)]:
            a, b = both(ng, srv, req("/a.txt", "If-None-Match: " + inm))
            check(a.status == b.status == want, "If-None-Match %s: nginx %d, ours %d (want %d)"
                  % (inm, a.status, b.status, want))
            if want == 304:
                check(b.h("etag") == etag and b.body == b"", "304: %r" % b.headers)
        log("basics: ETag %s and If-None-Match as nginx" % etag)

        # gzip_static: the .gz sibling for a client that takes gzip.
        gz = open(os.path.join(www, "a.txt.gz"), "rb").read()
        for ae, version, coded in [("gzip", "1.1", True), ("gzip, deflate, br", "1.1", True),
                                   ("deflate;q=1, GZIP;q=0.5", "1.1", True),
                                   ("gzip;q=0", "1.1", False), ("deflate", "1.1", False),
                                   ("gzip", "1.0", False), (None, "1.1", False)]:
            fields = ["Accept-Encoding: " + ae] if ae is not None else []
            a, b = both(ng, srv, req("/a.txt", *fields, version=version))
            what = "Accept-Encoding %r HTTP/%s" % (ae, version)
            check(a.status == b.status == 200, "%s: %d %d" % (what, a.status, b.status))
            check(a.h("content-encoding") == b.h("content-encoding"),
                  "%s: Content-Encoding nginx %r, ours %r"
                  % (what, a.h("content-encoding"), b.h("content-encoding")))
            check(a.body == b.body and (b.body == gz) == coded, "%s: bodies differ" % what)
            check(a.h("etag") == b.h("etag"), "%s: ETag %r %r" % (what, a.h("etag"), b.h("etag")))
        for fields, want in [(["Accept-Encoding: gzip"], 200), ([], 404)]:
            a, b = both(ng, srv, req("/only.txt", *fields))
            check(a.status == b.status == want and (want != 200 or a.body == b.body),
                  "/only.txt %r: nginx %d, ours %d" % (fields, a.status, b.status))
        log("basics: gzip_static as nginx")

        # A body on error statuses.
        for raw in [req("/missing"), req("/a.txt", method="POST", host="x"),
                    req("/a.txt", "Range: bytes=9999-")]:
            a, b = both(ng, srv, raw)
            check(a.status == b.status, "%r: nginx %d, ours %d" % (raw, a.status, b.status))
            check(a.body and b.body and str(b.status).encode() in b.body
                  and int(b.h("content-length")) == len(b.body),
                  "%r: body nginx %r, ours %r" % (raw, a.body[:60], b.body))
        a, b = both(ng, srv, req("/missing", method="HEAD"), head_only=True)
        check(a.status == b.status == 404, "HEAD /missing: %d %d" % (a.status, b.status))
        log("basics: a body on 404, 405, 416")

        # The built-in routes moved (/hello) or off (/json): their paths go to --root.
        a, b = both(ng, srv, req("/hello"))
        check(a.body == b.body == b"Hello, World!", "/hello: %r %r" % (a.body, b.body))
        a, b = both(ng, srv, req("/plaintext"))
        check(a.status == b.status == 200 and a.body == b.body == b"the file named plaintext\n",
              "/plaintext under --root: %r %r" % (a.body, b.body))
        a, b = both(ng, srv, req("/json"))
        check(a.status == b.status == 404, "/json off: %d %d" % (a.status, b.status))
        srv.stop()
    finally:
        srv.kill()
        ng.stop()
        shutil.rmtree(d, ignore_errors=True)
    for bad in ["plain", "/a?b", ""]:
        r = subprocess.run([exe, "--plaintext-path", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
        check(r.returncode == 2 and b"--plaintext-path" in r.stderr,
              "--plaintext-path %r: exit %d %r" % (bad, r.returncode, r.stderr))
    return 0


class TlsPeer:
    """Something to connect to over TLS (an address), for ask()."""

    def __init__(self, addr, ctx):
        self.addr, self.ctx = addr, ctx

    def connect(self, timeout=5.0):
        raw = socket.create_connection(self.addr, timeout=timeout)
        return self.ctx.wrap_socket(raw, server_hostname="localhost")


def t_https_redirect(exe, driver):
    if not os.path.exists(NGINX) or shutil.which("openssl") is None:
        log("SKIP: no %s or openssl" % NGINX)
        return SKIP
    import ssl
    import tls_http_test
    certs = tls_http_test.Certs()
    d = tempfile.mkdtemp(prefix="cr-http-ngs-")
    www = os.path.join(d, "www")
    make_www(www)
    tport = apptest.free_port()
    ng = Nginx(d, root=www, extra="""}
  server {
    listen 127.0.0.1:%d ssl;
    ssl_certificate %s; ssl_certificate_key %s;
    root %s;""" % (tport, certs.cert, certs.key, www))
    srv = tls_http_test.Server(exe, driver, certs, extra=["--root", www])
    ctx = ssl.create_default_context(cafile=certs.ca)
    try:
        ours, theirs = TlsPeer(srv.https, ctx), TlsPeer(("127.0.0.1", tport), ctx)
        for raw in [req("/dir"), req("/dir?x=1", host="localhost:1")]:
            a, b = ask(theirs, raw), ask(ours, raw)
            la = (a.h("location") or "").replace(":%d/" % tport, ":PORT/")
            lb = (b.h("location") or "").replace(":%d/" % srv.https[1], ":PORT/")
            check(a.status == b.status == 301 and la == lb and la.startswith("https://"),
                  "%r over https: nginx %d %r, ours %d %r" % (raw, a.status, la, b.status, lb))
            log("https_redirect: %r -> %s, as nginx" % (raw.split(b"\r\n")[0], lb))
        # The plain listener of the same server still says http.
        b = ask(srv, req("/dir"))
        check(b.h("location") == "http://x:%d/dir/" % srv.http[1], "http: %r" % b.h("location"))
        srv.stop()
    finally:
        srv.kill()
        ng.stop()
        certs.remove()
        shutil.rmtree(d, ignore_errors=True)
    return 0


TESTS = {"access_log": t_access_log, "basics": t_basics, "https_redirect": t_https_redirect}

if __name__ == "__main__":
    sys.exit(http_test.run(TESTS, __doc__))
