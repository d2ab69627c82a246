#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of app/cr-http with real clients (raw sockets, curl, slowhttptest) on
loopback.

  http_test.py CR_HTTP TEST [--driver uring|epoll]

TEST is one of: cli, bad, curl, static, pipeline, slowloris, slowhttptest, shutdown,
telemetry, splice. Each starts its own cr-http on an ephemeral port of 127.0.0.1, is bounded in
time, kills the server on the way out, and exits 0 (pass), 1 (fail) or 77 (skip: a client
tool is missing).
"""
import argparse
import email.utils
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import apptest

TEST_TIMEOUT = 100  # seconds; meson's own timeout is above this
SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def log(msg):
    print(msg, flush=True)


class Server:
    """A cr-http child on an ephemeral port; stop() checks its exit status."""

    def __init__(self, exe, driver, extra=(), lcores=None, prefix=()):
        """One lcore (the first allowed CPU) unless lcores names a corelist; prefix runs
        it under another program (strace)."""
        if lcores is None:
            lcores = str(min(os.sched_getaffinity(0)))
        self.args = list(prefix) + [exe, "-l", lcores, "--io-driver", driver,
                                    "--listen", "127.0.0.1:0"] + list(extra)
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "exitcode=23")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.out = b""
        deadline = time.monotonic() + 10.0
        line = ""
        while "listening on" not in line:
            line = self._line(deadline)
        m = re.search(r"listening on (\S+):(\d+) ", line)
        check(m is not None, "no address in ready line: %r" % line)
        self.addr = (m.group(1), int(m.group(2)))
        self.url = "http://%s:%d" % self.addr

    def _line(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.kill()
                raise Failure("cr-http did not become ready: out=%r err=%r"
                              % (self.out, self.proc.stderr.read()))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if chunk:
                    self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        return line.decode()

    def stop(self, timeout=20.0, sig=signal.SIGINT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure("cr-http did not stop within %.0f s" % timeout)
        text = err.decode(errors="replace")
        self.err = text
        check("ERROR: AddressSanitizer" not in text and "runtime error:" not in text
              and "LeakSanitizer" not in text and "ThreadSanitizer" not in text,
              "sanitizer report:\n" + text)
        check(self.proc.returncode == 0, "cr-http exited with %d; stderr:\n%s"
              % (self.proc.returncode, text))
        return (self.out + out).decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def connect(self, timeout=5.0):
        s = socket.create_connection(self.addr, timeout=timeout)
        return s


class Response:
    def __init__(self, status, headers, body, raw_head):
        self.status = status
        self.headers = headers  # lower-case name -> value (last one wins)
        self.body = body
        self.raw_head = raw_head

    def h(self, name):
        return self.headers.get(name.lower())


class Reader:
    """Reads HTTP responses off a socket, in order."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            self.eof = True
            raise Failure("connection closed; had %r" % self.buf[:200])
        self.buf += d

    def response(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0])
        check(m is not None, "bad status line %r" % lines[0])
        hdrs = {}
        for ln in lines[1:]:
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        status = int(m.group(1))
        n = 0
        if not head_only and status >= 200 and status not in (204, 304):
            n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(status, hdrs, body, head)

    def closed(self, timeout=3.0):
        """True if the peer closes (EOF or reset) within timeout with nothing more sent."""
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        if d:
            self.buf += d
            return False
        return True


def exchange(srv, raw, head_only=False, wait_close=1.0):
    """One request on a new connection: its response, and whether the server closed the
    connection after it (waiting at most wait_close seconds; 0: not checked)."""
    s = srv.connect()
    try:
        s.sendall(raw)
        r = Reader(s)
        resp = r.response(head_only)
        return resp, r.closed(wait_close) if wait_close > 0 else None
    finally:
        s.close()


def curl(*args, timeout=20):
    r = subprocess.run(["curl", "-s", "-S", "--max-time", "10"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return r


def curl_i(url, *args):
    """(status, headers dict, body bytes) of one curl -i request."""
    r = curl("-i", *args, url)
    check(r.returncode == 0, "curl %s %s: exit %d %s" % (args, url, r.returncode, r.stderr))
    out = r.stdout
    # Skip interim 100 Continue heads.
    while out.startswith(b"HTTP/1.1 100"):
        out = out.split(b"\r\n\r\n", 1)[1]
    head, body = out.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


# ---- cli ----

def t_cli(exe, driver):
    def run(*args):
        return subprocess.run([exe] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=10)

    r = run("--help")
    check(r.returncode == 0, "--help exit %d" % r.returncode)
    for opt in ("--listen", "--root", "--max-connections", "--header-timeout",
                "--keepalive-timeout", "--max-request-line", "--max-header-bytes",
                "--max-header-fields", "--max-body", "--body-timeout", "--min-body-rate",
                "--io-driver", "--corelist CORELIST"):
        check(opt in r.stdout, "--help lacks %s" % opt)
    bad = [
        (["--listen", "foo"], "--listen foo"),
        (["--listen", "127.0.0.1:65536"], "--listen 127.0.0.1:65536"),
        (["--max-connections", "0"], "--max-connections 0"),
        (["--header-timeout", "-1"], "--header-timeout -1"),
        (["--header-timeout", "0"], "--header-timeout 0"),
        (["--max-body", "x"], "--max-body x"),
        (["--body-timeout", "-1"], "--body-timeout -1"),
        (["--min-body-rate", "fast"], "--min-body-rate fast"),
        (["--max-request-line", "10"], "--max-request-line 10"),
        (["--root", "/nonexistent/dir"], "--root /nonexistent/dir"),
        (["--bogus"], "--bogus"),
        (["extra"], "extra"),
    ]
    for args, named in bad:
        r = run(*args)
        check(r.returncode == 2, "%s: exit %d, want 2 (%s)" % (args, r.returncode, r.stderr))
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and named in lines[0] and "accepted" in lines[0],
              "%s: want one line naming %r with what is accepted, got %r"
              % (args, named, r.stderr))
    log("cli: help and %d bad values OK" % len(bad))


# ---- bad input ----

H = "Host: t\r\n"
BAD = [
    # (what, raw request, status)
    ("bad request line: no target", b"GET\r\n\r\n", 400),
    ("bad request line: no version", b"GET /\r\n\r\n", 400),
    ("bad request line: two spaces", b"GET  / HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("bad request line: not origin-form", b"GET x HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with a space", b"GET /a b HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with a control char", b"GET /a\x01b HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with DEL", b"GET /a\x7f HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with a lone %", b"GET /a% HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with %1", b"GET /a%1 HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("URI with %zz", b"GET /a%zz HTTP/1.1\r\n" + H.encode() + b"\r\n", 400),
    ("unknown method", b"FOO / HTTP/1.1\r\n" + H.encode() + b"\r\n", 501),
    ("TRACE", b"TRACE / HTTP/1.1\r\n" + H.encode() + b"\r\n", 405),
    ("HTTP/2.0", b"GET / HTTP/2.0\r\n" + H.encode() + b"\r\n", 505),
    ("HTTP/9", b"GET / HTTP/9\r\n" + H.encode() + b"\r\n", 505),
    ("Content-Length and Transfer-Encoding",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("duplicate differing Content-Length",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"
     b"abcd", 400),
    ("TE other than chunked alone",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ("TE gzip, chunked",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400),
    ("TE in HTTP/1.0",
     b"POST /plaintext HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("bad chunk size",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ("chunk longer than declared",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"3\r\nabcdef\r\n0\r\n\r\n", 400),
    ("body over the limit (Content-Length)",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n", 413),
    ("body over the limit (chunked)",
     b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"200000\r\n", 413),
    ("request line too long",
     b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H.encode() + b"\r\n", 414),
    ("headers too large", b"GET / HTTP/1.1\r\nHost: t\r\nX: " + b"v" * 17000 + b"\r\n\r\n",
     431),
    ("too many headers",
     b"GET / HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X%d: v\r\n" % i for i in range(101))
     + b"\r\n", 431),
    ("duplicate Host", b"GET /plaintext HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("missing Host in 1.1", b"GET /plaintext HTTP/1.1\r\n\r\n", 400),
    ("bare LF line endings", b"GET /plaintext HTTP/1.1\nHost: t\n\n", 400),
    ("bare LF after a header", b"GET /plaintext HTTP/1.1\r\nHost: t\n\r\n", 400),
    ("obs-fold", b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n", 400),
    ("whitespace before the colon", b"GET /plaintext HTTP/1.1\r\nHost : t\r\n\r\n", 400),
]


def t_bad(exe, driver):
    srv = Server(exe, driver)
    try:
        for what, raw, want in BAD:
            resp, closed = exchange(srv, raw)
            check(resp.status == want, "%s: status %d, want %d" % (what, resp.status, want))
            check(resp.h("connection") == "close", "%s: no Connection: close" % what)
            check(closed, "%s: the connection stayed open after the error" % what)
            log("bad input: %-40s -> %d, closed" % (what, want))
        # A framing error after a good request on the same connection: the good one is
        # answered, then the error, then the close.
        resp, _ = exchange(srv, b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        s = srv.connect()
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n"
                  b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        rd = Reader(s)
        check(rd.response().status == 200, "pipelined good request first")
        check(rd.response().status == 400, "then the error")
        check(rd.closed(), "then the close, nothing for the request after the error")
        s.close()
        # Same Content-Length twice is fine; HTTP/1.0 needs no Host.
        resp, closed = exchange(srv, b"GET /plaintext HTTP/1.1\r\nHost: t\r\n"
                                b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n")
        check(resp.status == 200 and not closed, "same Content-Length twice: %d" % resp.status)
        resp, closed = exchange(srv, b"GET /plaintext HTTP/1.0\r\n\r\n")
        check(resp.status == 200 and closed, "HTTP/1.0 without Host: %d" % resp.status)
        out = srv.stop()
        m = re.search(r"(\d+) parse errors", out)
        check(m is not None and int(m.group(1)) == len(BAD) + 1,
              "parse errors counted: %r" % out)
        log("bad input: %d cases, each answered with its status and closed" % len(BAD))
    finally:
        srv.kill()


# ---- curl functional ----

def check_common(hdrs, what):
    check(hdrs.get("server") == "coreact", "%s: Server %r" % (what, hdrs.get("server")))
    d = hdrs.get("date")
    check(d is not None and re.match(r"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} "
                                     r"\d{2}:\d{2}:\d{2} GMT$", d), "%s: Date %r" % (what, d))
    t = email.utils.parsedate_to_datetime(d).timestamp()
    check(abs(t - time.time()) < 3, "%s: Date %r is not now" % (what, d))


def t_curl(exe, driver):
    if shutil.which("curl") is None:
        log("curl not installed")
        return SKIP
    srv = Server(exe, driver, ["--max-body", "100000"])
    try:
        st, h, body = curl_i(srv.url + "/plaintext")
        check(st == 200 and body == b"Hello, World!", "/plaintext: %d %r" % (st, body))
        check(h.get("content-type") == "text/plain" and h.get("content-length") == "13",
              "/plaintext headers %r" % h)
        check_common(h, "/plaintext")
        st, h, body = curl_i(srv.url + "/json")
        check(st == 200 and json.loads(body) == {"message": "Hello, World!"},
              "/json: %d %r" % (st, body))
        check(h.get("content-type") == "application/json", "/json type %r" % h)
        check_common(h, "/json")
        log("curl: /plaintext and /json with Date and Server")

        # Date moves on: refreshed once a second.
        d1 = curl_i(srv.url + "/plaintext")[1]["date"]
        time.sleep(1.2)
        d2 = curl_i(srv.url + "/plaintext")[1]["date"]
        check(d1 != d2, "Date did not change over 1.2 s: %r" % d1)

        # Keep-alive: curl reuses the connection for a second URL.
        r = curl("-v", "-o", "/dev/null", "-o", "/dev/null", srv.url + "/plaintext",
                 srv.url + "/json")
        check(r.returncode == 0 and b"Re-using existing connection" in r.stderr,
              "keep-alive: curl did not reuse the connection: %s" % r.stderr[-600:])
        log("curl: keep-alive reuse")

        # HTTP/1.0: closes unless asked; keep-alive when asked.
        st, h, body = curl_i(srv.url + "/plaintext", "-0")
        check(st == 200 and h.get("connection") == "close" and body == b"Hello, World!",
              "HTTP/1.0: %d %r" % (st, h))
        resp, closed = exchange(srv, b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        check(resp.status == 200 and resp.h("connection") == "keep-alive" and not closed,
              "HTTP/1.0 keep-alive: %r closed=%s" % (resp.headers, closed))
        # Connection: close.
        st, h, body = curl_i(srv.url + "/json", "-H", "Connection: close")
        check(st == 200 and h.get("connection") == "close", "Connection: close: %r" % h)
        resp, closed = exchange(srv, b"GET /json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        check(resp.status == 200 and closed, "Connection: close did not close")
        log("curl: HTTP/1.0 and Connection: close")

        # HEAD: the GET's headers, no body.
        r = curl("-I", srv.url + "/plaintext")
        check(r.returncode == 0 and b"Content-Length: 13" in r.stdout
              and not r.stdout.endswith(b"Hello, World!"), "HEAD: %r" % r.stdout)
        s = srv.connect()
        s.sendall(b"HEAD /plaintext HTTP/1.1\r\nHost: t\r\n\r\nGET /json HTTP/1.1\r\nHost: t\r\n\r\n")
        rd = Reader(s)
        a = rd.response(head_only=True)
        b = rd.response()
        s.close()
        check(a.status == 200 and a.h("content-length") == "13" and b.body.startswith(b"{"),
              "HEAD then GET on one connection")
        log("curl: HEAD")

        # Other methods on the fixed routes: 405 with Allow, and the body is skipped.
        st, h, _ = curl_i(srv.url + "/plaintext", "-d", "x=1")
        check(st == 405 and "GET" in h.get("allow", ""), "POST /plaintext: %d %r" % (st, h))
        s = srv.connect()
        s.sendall(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nTrailer: v\r\n\r\n"
                  b"POST /json HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody"
                  b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        rd = Reader(s)
        sts = [rd.response().status for _ in range(3)]
        s.close()
        check(sts == [405, 405, 200], "bodies framed on one connection: %r" % sts)
        # Half-close: answered, then EOF; a request cut short by the EOF is dropped.
        s = srv.connect()
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nGET /json HTTP/1.1\r\n"
                  b"Host: t\r\n\r\nGET /plaintext HTTP/1.1\r\nHo")
        s.shutdown(socket.SHUT_WR)
        rd = Reader(s)
        sts = [rd.response().status for _ in range(2)]
        check(sts == [200, 200] and rd.closed(3.0) and rd.buf == b"",
              "half-close: %r, then %r" % (sts, rd.buf))
        s.close()
        # Absolute-form targets are served by their path.
        resp, _ = exchange(srv, b"GET http://t/json?x=1 HTTP/1.1\r\nHost: t\r\n\r\n",
                           wait_close=0)
        check(resp.status == 200 and resp.body.startswith(b"{"), "absolute-form: %d"
              % resp.status)
        # Unknown path: 404, connection kept.
        resp, closed = exchange(srv, b"GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n")
        check(resp.status == 404 and not closed, "404: %d closed=%s" % (resp.status, closed))
        log("curl: 405 with bodies skipped, 404")

        # Body over the (100000-byte) limit: 413, from curl too.
        blob = os.path.join(tempfile.mkdtemp(), "blob")
        with open(blob, "wb") as f:
            f.write(b"x" * 200000)
        r = curl("-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + blob,
                 srv.url + "/plaintext")
        check(r.stdout == b"413", "curl 200000-byte body: %r %r" % (r.stdout, r.stderr))
        shutil.rmtree(os.path.dirname(blob))
        # Expect: 100-continue below the limit: 100, then the answer.
        st, h, _ = curl_i(srv.url + "/json", "-H", "Expect: 100-continue", "-d", "a=b")
        check(st == 405, "Expect: 100-continue: %d" % st)
        log("curl: 413 over --max-body")
        srv.stop()
    finally:
        srv.kill()


def t_pipeline(exe, driver):
    srv = Server(exe, driver)
    try:
        reqs = []
        for i in range(64):
            p = ["/plaintext", "/json", "/nope"][i % 3]
            reqs.append(("GET %s HTTP/1.1\r\nHost: t\r\nX-N: %d\r\n\r\n" % (p, i)).encode())
        want = [[200, 200, 404][i % 3] for i in range(64)]
        s = srv.connect()
        s.sendall(b"".join(reqs))
        rd = Reader(s)
        got = []
        bodies = []
        for _ in range(64):
            r = rd.response()
            got.append(r.status)
            bodies.append(r.body[:1])
        check(got == want, "pipelined statuses out of order: %r" % got)
        check(bodies[0] == b"H" and bodies[1] == b"{", "bodies out of order")
        # The same requests dribbled a few bytes at a time: heads cut everywhere.
        blob = b"".join(reqs)
        for step in (1, 7, 300):
            s2 = srv.connect()
            for i in range(0, len(blob), step):
                s2.sendall(blob[i:i + step])
                if step == 1 and i > 400:
                    s2.sendall(blob[i + 1:])
                    break
            rd2 = Reader(s2)
            got2 = [rd2.response().status for _ in range(64)]
            s2.close()
            check(got2 == want, "split by %d: %r" % (step, got2))
        s.close()
        log("pipelining: 64 requests answered in order, whole and cut at 1/7/300 bytes")
        srv.stop()
    finally:
        srv.kill()


def t_batch(exe, driver):
    """The answers to one received batch of pipelined requests leave in one send: counted
    with strace on the epoll driver, where every send is a syscall (io_uring's are not)."""
    tool = shutil.which("strace")
    if tool is None:
        log("strace not installed")
        return SKIP
    trace = os.path.join(tempfile.mkdtemp(), "trace")
    srv = Server(exe, "epoll", ["--telemetry", "off"],
                 prefix=[tool, "-f", "-qq", "-e", "trace=sendto,sendmsg,write,writev", "-o",
                         trace])
    try:
        s = srv.connect()
        for depth in (16, 64):
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n" * depth)
            rd = Reader(s)
            for _ in range(depth):
                check(rd.response().body == b"Hello, World!", "pipelined answer")
        s.close()
        # SIGINT to cr-http itself (strace would detach on its own); strace then ends.
        with open("/proc/%d/task/%d/children" % (srv.proc.pid, srv.proc.pid)) as f:
            child = int(f.read().split()[0])
        os.kill(child, signal.SIGINT)
        srv.stop()
        with open(trace) as f:
            sends = [ln for ln in f if re.search(r"\b(sendto|sendmsg|writev?)\(\d+, ", ln)
                     and "HTTP/1.1" in ln]
        sizes = [int(re.search(r"= (\d+)$", ln.strip()).group(1)) for ln in sends]
        check(len(sends) == 2, "want one send per batch (2), strace saw %d: %r"
              % (len(sends), [ln[:90] for ln in sends]))
        check(sizes[0] > 16 * 100 and sizes[1] > 64 * 100 and sizes[1] == 4 * sizes[0],
              "send sizes %r do not hold 16 and 64 answers" % sizes)
        log("batch: 16 and 64 pipelined requests answered with one send each (%d, %d bytes)"
            % tuple(sizes))
    finally:
        srv.kill()
        shutil.rmtree(os.path.dirname(trace))


# ---- static ----

def t_static(exe, driver):
    if shutil.which("curl") is None:
        return SKIP
    top = tempfile.mkdtemp()
    root = os.path.join(top, "www")
    os.makedirs(os.path.join(root, "sub"))
    with open(os.path.join(top, "secret.txt"), "w") as f:
        f.write("secret")
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<h1>home</h1>\n")
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("0123456789")
    with open(os.path.join(root, "sub", "s.css"), "w") as f:
        f.write("body{}")
    big = os.urandom(3 * 1024 * 1024 + 17)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(big)
    os.symlink(os.path.join(top, "secret.txt"), os.path.join(root, "out.txt"))
    os.symlink("a.txt", os.path.join(root, "in.txt"))
    os.symlink("/etc", os.path.join(root, "etc"))
    mtime = 1700000000
    os.utime(os.path.join(root, "a.txt"), (mtime, mtime))
    srv = Server(exe, driver, ["--root", root])
    try:
        u = srv.url
        st, h, body = curl_i(u + "/a.txt")
        check(st == 200 and body == b"0123456789", "/a.txt %d %r" % (st, body))
        check(h.get("content-type", "").startswith("text/plain"), "a.txt type %r" % h)
        lm = h.get("last-modified")
        check(lm == email.utils.formatdate(mtime, usegmt=True), "Last-Modified %r" % lm)
        check_common(h, "/a.txt")
        st, h, body = curl_i(u + "/")
        check(st == 200 and body == b"<h1>home</h1>\n" and h["content-type"].startswith(
            "text/html"), "/ -> index.html: %d %r" % (st, h))
        st, h, _ = curl_i(u + "/sub/s.css")
        check(st == 200 and h["content-type"] == "text/css", "css type %r" % h)
        log("static: files, index.html, Content-Type, Last-Modified")
        # If-Modified-Since.
        st, h, body = curl_i(u + "/a.txt", "-H", "If-Modified-Since: " + lm)
        check(st == 304 and body == b"", "IMS equal: %d" % st)
        older = email.utils.formatdate(mtime - 10, usegmt=True)
        st, _, body = curl_i(u + "/a.txt", "-H", "If-Modified-Since: " + older)
        check(st == 200 and body == b"0123456789", "IMS older: %d" % st)
        log("static: If-Modified-Since 304 / 200")
        # Range.
        st, h, body = curl_i(u + "/a.txt", "-r", "2-4")
        check(st == 206 and body == b"234" and h.get("content-range") == "bytes 2-4/10",
              "range 2-4: %d %r %r" % (st, body, h))
        st, h, body = curl_i(u + "/a.txt", "-r", "-3")
        check(st == 206 and body == b"789", "suffix range: %d %r" % (st, body))
        st, h, body = curl_i(u + "/a.txt", "-r", "7-")
        check(st == 206 and body == b"789", "open range: %d %r" % (st, body))
        st, h, _ = curl_i(u + "/a.txt", "-r", "10-20")
        check(st == 416 and h.get("content-range") == "bytes */10", "416: %d %r" % (st, h))
        st, h, body = curl_i(u + "/a.txt", "-r", "0-1,3-4")
        check(st == 200 and body == b"0123456789", "multiple ranges served whole: %d" % st)
        log("static: Range 206 (a-b, -n, a-), 416, several ranges -> 200")
        # 404 and escapes.
        st, _, _ = curl_i(u + "/missing.txt")
        check(st == 404, "missing: %d" % st)
        escapes = [("/../secret.txt", 400), ("/sub/../../secret.txt", 400),
                   ("/%2e%2e/secret.txt", 400), ("/sub/%2E%2E/%2e%2e/secret.txt", 400),
                   ("/%2e%2e%2fsecret.txt", 400), ("/./a.txt", 400),
                   ("/out.txt", 403), ("/etc/passwd", 403), ("/a.txt%00", 400)]
        for path, want in escapes:
            st, _, body = curl_i(u + path, "--path-as-is")
            check(st == want and b"secret" not in body and b"root:" not in body,
                  "escape %s: %d, want %d" % (path, st, want))
        st, _, body = curl_i(u + "/in.txt")
        check(st == 200 and body == b"0123456789", "symlink inside the root: %d" % st)
        log("static: 404; escapes via .., %2e, symlinks refused (400/403)")
        # A file bigger than the output queue: streamed in order, and Range into it.
        r = curl("-o", "-", u + "/big.bin")
        check(r.returncode == 0 and r.stdout == big, "big file: %d of %d bytes"
              % (len(r.stdout), len(big)))
        st, h, body = curl_i(u + "/big.bin", "-r", "1000000-1000099")
        check(st == 206 and body == big[1000000:1000100], "range in big file")
        # HEAD of a file: headers only. Then a pipelined static + plaintext in order.
        r = curl("-I", u + "/big.bin")
        check(b"Content-Length: %d" % len(big) in r.stdout, "HEAD big: %r" % r.stdout)
        s = srv.connect()
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /plaintext HTTP/1.1\r\n"
                  b"Host: t\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        rd = Reader(s)
        a = rd.response()
        b = rd.response()
        c = rd.response()
        s.close()
        check(a.body == big and b.body == b"Hello, World!" and c.body == b"0123456789",
              "pipelined file, plaintext, file out of order or short")
        # Every kind of file answer pipelined on one connection, each waiting for the
        # open before it: in order.
        s = srv.connect()
        reqs = [b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n",
                b"GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: " + lm.encode()
                + b"\r\n\r\n",
                b"GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=3-5\r\n\r\n",
                b"HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
                b"GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=50-\r\n\r\n",
                b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n",
                b"GET /sub/s.css HTTP/1.1\r\nHost: t\r\n\r\n"] * 3
        s.sendall(b"".join(reqs))
        rd = Reader(s)
        got = [(r.status, r.body) for r in
               [rd.response(head_only=(i % 7 == 3)) for i in range(len(reqs))]]
        s.close()
        want = [(404, b"404 Not Found\n"), (304, b""), (206, b"345"), (200, b""),
                (416, b"416 Range Not Satisfiable\n"),
                (200, b"Hello, World!"), (200, b"body{}")] * 3
        check(got == want, "pipelined file answers: %r" % got)
        # The client shuts its side right after its requests (a half-close): the file
        # (still being opened when the EOF comes) and what follows are answered, then EOF.
        s = srv.connect()
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /a.txt HTTP/1.1\r\n"
                  b"Host: t\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        rd = Reader(s)
        a = rd.response()
        b = rd.response()
        check(a.body == big and b.body == b"0123456789", "half-close after file requests")
        check(rd.closed(3.0), "no EOF after the answers to a half-closed connection")
        s.close()
        log("static: 3 MiB file streamed intact; pipelined after a file in order")
        # A shutdown while a file goes out to a slow reader: the file completes, then the
        # connection closes and cr-http exits cleanly.
        s = srv.connect()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        rd = Reader(s)
        while len(rd.buf) < 4096:
            rd._fill()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        check(srv.proc.poll() is None, "cr-http exited with a file going out")
        a = rd.response()
        check(a.status == 200 and a.body == big, "file during shutdown: %d bytes of %d"
              % (len(a.body), len(big)))
        check(rd.closed(3.0), "not closed after the file, during shutdown")
        s.close()
        srv.proc.wait(timeout=10)
        srv.stop()
        log("static: a shutdown waits for a file going out, then exits cleanly")
    finally:
        srv.kill()
        shutil.rmtree(top)


# ---- slow clients ----

def t_slowloris(exe, driver):
    srv = Server(exe, driver, ["--header-timeout", "1"])
    try:
        slow = srv.connect()
        t0 = time.monotonic()
        slow.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n")
        served = 0
        closed_at = None
        rd = Reader(slow)
        while time.monotonic() - t0 < 4 and closed_at is None:
            try:
                slow.sendall(b"X-Dribble: a\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed_at = time.monotonic() - t0
                break
            resp, _ = exchange(srv, b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n",
                               wait_close=0)
            check(resp.status == 200, "another client not served")
            served += 1
            slow.settimeout(0.2)
            try:
                d = slow.recv(65536)
                if not d:
                    closed_at = time.monotonic() - t0
                else:
                    rd.buf += d
                    if rd.buf.startswith(b"HTTP/1.1 408"):
                        # the 408, then EOF
                        check(rd.closed(2.0), "408 but not closed")
                        closed_at = time.monotonic() - t0
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed_at = time.monotonic() - t0
        check(closed_at is not None, "the dribbling client was not closed within 4 s")
        check(0.8 <= closed_at <= 2.5, "closed after %.2f s, want about 1 s" % closed_at)
        check(served >= 3, "only %d other requests served meanwhile" % served)
        # A connection that sends nothing is closed at the header timeout too.
        idle = srv.connect()
        t0 = time.monotonic()
        check(Reader(idle).closed(3.0), "a silent connection stayed open")
        check(time.monotonic() - t0 >= 0.8, "silent connection closed too early")
        out = srv.stop()
        m = re.search(r"(\d+) header timeouts", out)
        check(m is not None and int(m.group(1)) >= 2, "header timeouts counted: %r" % out)
        log("slowloris: closed after %.2f s at --header-timeout 1; %d requests of another "
            "client served meanwhile" % (closed_at, served))
    finally:
        srv.kill()


def t_slowhttptest(exe, driver):
    tool = shutil.which("slowhttptest")
    if tool is None:
        log("slowhttptest not installed")
        return SKIP
    srv = Server(exe, driver, ["--header-timeout", "2"])
    try:
        # Slow headers (-H): 300 connections, a header line every 1 s, for 6 s.
        p = subprocess.Popen([tool, "-H", "-c", "300", "-r", "150", "-i", "1", "-l", "6",
                              "-u", srv.url + "/plaintext", "-o", os.devnull],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             cwd=tempfile.gettempdir())
        served = failed = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 6:
            try:
                resp, _ = exchange(srv, b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n",
                                   wait_close=0)
                served += resp.status == 200
            except (OSError, Failure):
                failed += 1
            time.sleep(0.1)
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        text = out.decode(errors="replace")
        check(failed == 0 and served >= 20, "under slowhttptest: %d served, %d failed"
              % (served, failed))
        m = re.findall(r"closed:\s+(\d+)", text)
        out = srv.stop()
        m2 = re.search(r"(\d+) header timeouts", out)
        check(m2 is not None and int(m2.group(1)) > 0,
              "no header timeouts counted under slowhttptest: %r\n%s" % (out, text[-800:]))
        log("slowhttptest -H: %d requests of another client served meanwhile, %s header "
            "timeouts" % (served, m2.group(1)))
    finally:
        srv.kill()


# ---- shutdown ----

def t_shutdown(exe, driver):
    # Every allowed CPU (at most 4): connections spread over the lcores' sockets.
    cpus = sorted(os.sched_getaffinity(0))[:4]
    srv = Server(exe, driver, ["--shutdown-timeout", "10"],
                 lcores=",".join(str(c) for c in cpus))
    try:
        idle = []
        for _ in range(6):
            s = srv.connect()
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
            rd = Reader(s)
            check(rd.response().status == 200, "idle connection's first request")
            idle.append(rd)
        busy = []
        for i in range(6):
            s = srv.connect()
            if i % 2:
                s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n")  # head not complete
            else:  # head done, body not
                s.sendall(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab")
            busy.append(s)
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        # Idle keep-alive connections are closed; new connections are refused.
        for rd in idle:
            check(rd.closed(3.0), "an idle connection stayed open during shutdown")
        try:
            socket.create_connection(srv.addr, timeout=1).close()
            refused = False
        except OSError:
            refused = True
        check(refused, "a new connection was accepted during shutdown")
        check(srv.proc.poll() is None, "cr-http exited with requests in flight")
        for i, s in enumerate(busy):
            s.sendall(b"X-Late: 1\r\n\r\n" if i % 2 else b"cd")
            brd = Reader(s)
            r = brd.response()
            want = 405 if i % 2 == 0 else 200
            check(r.status == want, "in-flight request %d: %d, want %d" % (i, r.status, want))
            check(r.h("connection") == "close", "last response lacks Connection: close: %r"
                  % r.headers)
            check(brd.closed(3.0), "a busy connection stayed open after its answer")
        srv.proc.wait(timeout=10)
        srv.stop()
        log("shutdown on %d lcores: idle closed, new refused, 6 requests in flight (heads "
            "and bodies) answered with Connection: close, clean exit" % len(cpus))
    finally:
        srv.kill()


def t_telemetry(exe, driver):
    srv = Server(exe, driver)
    try:
        for _ in range(5):
            exchange(srv, b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n", wait_close=0)
        exchange(srv, b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\n")
        tool = os.path.join(ROOT, "usertools", "cr-telemetry")
        r = subprocess.run([sys.executable, tool, "-p", str(srv.proc.pid), "--json", "-c",
                            "/stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=20)
        check(r.returncode == 0, "cr-telemetry: %s" % r.stderr)
        text = r.stdout
        for name in ("http_requests", "http_responses_2xx", "http_responses_4xx",
                     "http_parse_errors"):
            check(name in text, "/stats lacks %s: %s" % (name, text[:500]))
        doc = json.loads(text.strip().splitlines()[0])

        def find(o, k):
            if isinstance(o, dict):
                if k in o and isinstance(o[k], int):
                    return o[k]
                for v in o.values():
                    f = find(v, k)
                    if f is not None:
                        return f
            if isinstance(o, list):
                for v in o:
                    f = find(v, k)
                    if f is not None:
                        return f
            return None
        check(find(doc, "http_responses_2xx") == 5, "2xx in /stats: %r" % text[:600])
        check(find(doc, "http_parse_errors") == 1, "parse errors in /stats")
        r = subprocess.run([sys.executable, tool, "-p", str(srv.proc.pid), "--json", "-c",
                            "/http"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=20)
        check(r.returncode == 0, "cr-telemetry /http: %s" % r.stderr)
        doc = json.loads(r.stdout.strip().splitlines()[0])["/http"]
        check(doc["limits"]["max_body"] == 1048576 and doc["limits"]["max_header_fields"] == 100
              and doc["totals"]["http_requests"] == 5 and doc["totals"]["http_parse_errors"] == 1,
              "/http: %r" % doc)
        srv.stop()
        log("telemetry: /stats shows the http counters; /http the limits and totals")
    finally:
        srv.kill()


# ---- splice: large bodies file -> pipe -> socket ----

def http_totals(srv):
    tool = os.path.join(ROOT, "usertools", "cr-telemetry")
    r = subprocess.run([sys.executable, tool, "-p", str(srv.proc.pid), "--json", "-c",
                        "/http"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=20)
    check(r.returncode == 0, "cr-telemetry /http: %s" % r.stderr)
    return json.loads(r.stdout.strip().splitlines()[0])["/http"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def splice_round(srv, files):
    """The same requests whatever the path: curl (whole, range, HEAD), then one pipelined
    batch around the large bodies. @return how many large bodies went out."""
    u = srv.url
    big, mid, small = files["big.bin"], files["mid.bin"], files["small.txt"]
    r = curl(u + "/big.bin")
    check(r.returncode == 0 and sha(r.stdout) == sha(big),
          "big.bin by curl: rc %d, %d bytes, sha256 %s" % (r.returncode, len(r.stdout),
                                                           sha(r.stdout)))
    st, h, body = curl_i(u + "/big.bin", "-r", "100-4000099")
    check(st == 206 and sha(body) == sha(big[100:4000100])
          and h.get("content-range") == "bytes 100-4000099/%d" % len(big),
          "range of big.bin: %d %d %r" % (st, len(body), h.get("content-range")))
    st, h, body = curl_i(u + "/big.bin", "-I")
    check(st == 200 and body == b"" and h.get("content-length") == str(len(big)),
          "HEAD big.bin: %d %r" % (st, h))
    # Pipelined: small, big, HEAD big, mid, plaintext, small, in one write.
    reqs = [b"/small.txt", b"/big.bin", b"HEAD /big.bin", b"/mid.bin", b"/plaintext",
            b"/small.txt"]
    raw = b"".join((q if q.startswith(b"HEAD") else b"GET " + q) + b" HTTP/1.1\r\nHost: t\r\n\r\n"
                   for q in reqs)
    s = srv.connect(timeout=10)
    try:
        s.sendall(raw)
        rd = Reader(s)
        want = [small, big, None, mid, b"Hello, World!", small]
        for q, w in zip(reqs, want):
            resp = rd.response(head_only=w is None)
            check(resp.status == 200, "pipelined %r: %d" % (q, resp.status))
            if w is None:
                check(resp.body == b"" and resp.h("content-length") == str(len(big)),
                      "pipelined HEAD: %r" % resp.headers)
            else:
                check(sha(resp.body) == sha(w), "pipelined %r: %d bytes, want %d"
                      % (q, len(resp.body), len(w)))
        # Keep-alive after a spliced body: the connection serves one more.
        s.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        resp = rd.response()
        check(resp.status == 200 and sha(resp.body) == sha(mid), "mid.bin after the batch")
    finally:
        s.close()
    return 5  # big, its range, pipelined big and mid, mid again


def t_splice(exe, driver):
    if shutil.which("curl") is None:
        return SKIP
    root = tempfile.mkdtemp()
    files = {"big.bin": os.urandom(6 * 1024 * 1024 + 3), "mid.bin": os.urandom(200 * 1024),
             "small.txt": b"small file\n" * 90, "huge.bin": os.urandom(32 * 1024 * 1024)}
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
    # The copy path first, as the oracle: same bytes, nothing spliced.
    srv = Server(exe, driver, ["--root", root, "--splice-min", "0"])
    try:
        splice_round(srv, files)
        tot = http_totals(srv)
        check(tot["totals"]["http_spliced"] == 0 and tot["limits"]["splice_min"] == 0,
              "--splice-min 0 spliced: %r" % tot)
        srv.stop()
    finally:
        srv.kill()
    log("splice: --splice-min 0 copies (curl whole, range, HEAD, pipelined): byte-exact")
    srv = Server(exe, driver, ["--root", root, "--keepalive-timeout", "1"])
    try:
        fds0 = fds_of(srv.proc.pid)
        n = splice_round(srv, files)
        tot = http_totals(srv)
        check(tot["limits"]["splice_min"] == 65536, "default --splice-min: %r" % tot["limits"])
        check(tot["totals"]["http_spliced"] == n, "spliced %d bodies, want %d"
              % (tot["totals"]["http_spliced"], n))
        log("splice: default --splice-min 65536: %d bodies spliced, byte-exact (sha256), "
            "pipelined order, HEAD, Range, keep-alive" % n)
        # Clients that stop reading mid-body: each holds one pipe until the keep-alive
        # timeout (1 s) ends it; a reading client is served meanwhile.
        stuck = []
        for _ in range(4):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.connect(srv.addr)
            c.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            c.recv(100)  # the transfer began
            stuck.append(c)
        r = curl(srv.url + "/big.bin")
        check(r.returncode == 0 and sha(r.stdout) == sha(files["big.bin"]),
              "big.bin beside 4 non-readers")
        # Nothing read for twice the keep-alive timeout: each must be ended by then; what
        # the kernel buffered still arrives, then the end (EOF or reset), never the rest.
        time.sleep(2.0)
        t0 = time.monotonic()
        ended = 0
        for c in stuck:
            c.settimeout(max(0.1, 15 - (time.monotonic() - t0)))
            got = 0
            try:
                while True:  # bounded: the file is 32 MiB, the wait 15 s in all
                    d = c.recv(1 << 20)
                    if not d:
                        break
                    got += len(d)
                    check(got <= len(files["huge.bin"]) + 4096, "more than the file")
            except ConnectionResetError:
                pass
            except socket.timeout:
                raise Failure("a non-reader was not ended within 15 s")
            check(got < len(files["huge.bin"]), "a non-reader got the whole file")
            ended += 1
            c.close()
        waited = time.monotonic() - t0
        deadline = time.monotonic() + 5
        while fds_of(srv.proc.pid) > fds0 and time.monotonic() < deadline:
            time.sleep(0.05)
        fds1 = fds_of(srv.proc.pid)
        check(fds1 <= fds0, "fds %d after, %d before" % (fds1, fds0))
        tot = http_totals(srv)
        check(tot["totals"]["http_spliced"] == n + 5, "spliced %d, want %d"
              % (tot["totals"]["http_spliced"], n + 5))
        srv.stop()
        log("splice: 4 clients that stop reading a 32 MiB body ended by the keep-alive "
            "timeout (1 s; read back in %.1f s after 2 s) while another was served; fds %d "
            "before, %d after" % (waited, fds0, fds1))
    finally:
        srv.kill()
        shutil.rmtree(root, ignore_errors=True)


TESTS = {
    "cli": t_cli,
    "bad": t_bad,
    "curl": t_curl,
    "pipeline": t_pipeline,
    "batch": t_batch,
    "static": t_static,
    "slowloris": t_slowloris,
    "slowhttptest": t_slowhttptest,
    "shutdown": t_shutdown,
    "telemetry": t_telemetry,
    "splice": t_splice,
}


def run(tests, doc):
    """The command line of a cr-http test script: EXE TEST [--driver D], one of tests
    (name -> function(exe, driver)) run within TEST_TIMEOUT. @return the exit status."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("exe", help="path of cr-http")
    ap.add_argument("test", choices=sorted(tests))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if a.test != "cli" and apptest.skip_if_refused(a.exe, a.driver, log):
        return SKIP

    def on_alarm(*_):
        raise Failure("timed out")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT)
    try:
        rc = tests[a.test](a.exe, a.driver)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        signal.alarm(0)
    if rc == SKIP:
        return SKIP
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(run(TESTS, __doc__))
