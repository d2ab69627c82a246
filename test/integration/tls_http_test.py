#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Integration tests of cr-http's HTTPS (--tls-listen) with real clients on loopback:
curl --cacert, openssl s_client, python's ssl.

  tls_http_test.py CR_HTTP TEST [--driver uring|epoll]

TEST is one of: curl, pipeline, resume, alpn_sni, bad_client, old_protocol, reload,
errors, warnings, client_cert, ktls, hostile. Certificates are made for each run with `openssl req` in a temporary directory
(a CA, a leaf for localhost and a.test, one for b.test). Each test starts its own cr-http
on ephemeral ports, is bounded in time, and exits 0 (pass), 1 (fail) or 77 (skip: a
client tool or the io driver is missing).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import apptest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TEST_TIMEOUT = 170
SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from http_test import Failure, check, log  # noqa: E402
import http_test  # noqa: E402


def run(args, timeout=30, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, **kw)


class Certs:
    """A CA and two leaves signed by it, made with openssl req / x509."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tls_http_test.")
        d = self.dir
        self.ca, self.ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        self._ok(run(["openssl", "req", "-x509"] + ec + ["-keyout", self.ca_key, "-out",
                     self.ca, "-subj", "/CN=tls_http_test CA", "-days", "2"]))
        self.cert, self.key = self.leaf("a", "localhost", "DNS:localhost,DNS:a.test,IP:127.0.0.1")
        self.cert_b, self.key_b = self.leaf("b", "b.test", "DNS:b.test")

    @staticmethod
    def _ok(r):
        check(r.returncode == 0, "openssl: %s" % r.stderr)

    def leaf(self, name, cn, san):
        d = self.dir
        key, csr, crt = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".pem"))
        ext = os.path.join(d, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\n" % san)
        self._ok(run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn]))
        self._ok(run(["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey",
                      self.ca_key, "-CAcreateserial", "-out", crt, "-days", "2",
                      "-extfile", ext]))
        os.chmod(key, 0o600)
        return crt, key

    def client_certs(self):
        """A client certificate of our CA, and one of another CA (self-signed)."""
        self.ccert, self.ckey = self.leaf("client", "client", "DNS:client")
        d = self.dir
        self.xcert, self.xkey = os.path.join(d, "x.pem"), os.path.join(d, "x.key")
        self._ok(run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", self.xkey, "-out",
                      self.xcert, "-subj", "/CN=stranger", "-days", "2"]))

    def expired(self):
        """A leaf for localhost of our CA that expired yesterday (openssl ca takes dates)."""
        d = os.path.join(self.dir, "ca.d")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "index.txt"), "w").close()
        conf = os.path.join(d, "ca.cnf")
        with open(conf, "w") as f:
            f.write("[ca]\ndefault_ca=c\n[c]\ndir=%s\ndatabase=$dir/index.txt\n"
                    "new_certs_dir=$dir\nserial=$dir/serial\ndefault_md=sha256\n"
                    "policy=p\n[p]\ncommonName=supplied\n" % d)
        with open(os.path.join(d, "serial"), "w") as f:
            f.write("1000\n")
        key, csr, crt = (os.path.join(self.dir, "old" + e) for e in (".key", ".csr", ".pem"))
        self._ok(run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"]))
        self._ok(run(["openssl", "ca", "-batch", "-config", conf, "-cert", self.ca, "-keyfile",
                      self.ca_key, "-in", csr, "-out", crt, "-startdate", "20200101000000Z",
                      "-enddate", "20200102000000Z", "-notext"]))
        os.chmod(key, 0o600)
        return crt, key

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Server(http_test.Server):
    """http_test's cr-http with a TLS listener too (its ready line follows the plain
    one's), a telemetry socket of its own, and --tls-cert/--tls-key unless given."""

    def __init__(self, exe, driver, certs, extra=(), lcores=None):
        self.tel = os.path.join(certs.dir, "tel.%d.sock" % time.monotonic_ns())
        extra = ["--tls-listen", "127.0.0.1:0", "--telemetry", self.tel] + list(extra)
        if "--tls-cert" not in extra:
            extra += ["--tls-cert", certs.cert, "--tls-key", certs.key]
        super().__init__(exe, driver, extra=extra, lcores=lcores)
        self.http = self.addr
        deadline = time.monotonic() + 10.0
        m = None
        while m is None:
            self.https_line = self._line(deadline)
            m = re.search(r"listening on (\S+):(\d+) \(https\)", self.https_line)
        self.https = (m.group(1), int(m.group(2)))
        self.port = self.https[1]
        self.url = "https://localhost:%d" % self.port

    def telemetry(self, cmd):
        tool = os.path.join(ROOT, "usertools", "cr-telemetry")
        r = run([sys.executable, tool, "-s", self.tel, "--json", "-c", cmd])
        check(r.returncode == 0, "cr-telemetry %s: %s" % (cmd, r.stderr))
        return json.loads(r.stdout.strip().splitlines()[0])[cmd]


def client_ctx(certs, **kw):
    c = ssl.create_default_context(cafile=certs.ca)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def tls_connect(srv, certs, name="localhost", ctx=None, timeout=5.0):
    raw = socket.create_connection(srv.https, timeout=timeout)
    return (ctx or client_ctx(certs)).wrap_socket(raw, server_hostname=name)


def read_responses(s, n):
    """n HTTP/1.1 responses with Content-Length, from a blocking socket."""
    buf, out = b"", []
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            check(chunk, "EOF after %d responses" % len(out))
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?i)content-length: *(\d+)", head)
        clen = int(m.group(1)) if m else 0
        while len(buf) < clen:
            chunk = s.recv(65536)
            check(chunk, "EOF in a body")
            buf += chunk
        out.append((head.decode(), buf[:clen]))
        buf = buf[clen:]
    return out


def s_client(srv, *args, stdin="", timeout=20):
    return run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % srv.port] + list(args),
               timeout=timeout, input=stdin)


# ---- the tests ----

def t_curl(exe, driver, certs):
    """curl --cacert: answers over TLS 1.3 and 1.2, keep-alive (one connection for two
    requests), HSTS on HTTPS answers only."""
    if shutil.which("curl") is None:
        return SKIP
    srv = Server(exe, driver, certs, extra=["--hsts", "600"])
    try:
        for ver in ("--tlsv1.3", "--tlsv1.2"):
            r = run(["curl", "-sS", "--cacert", certs.ca, ver, "-i", srv.url + "/plaintext"])
            check(r.returncode == 0, "curl %s: %s" % (ver, r.stderr))
            check(r.stdout.endswith("Hello, World!"), "curl body: %r" % r.stdout)
            check("Strict-Transport-Security: max-age=600" in r.stdout, "no HSTS: %r" % r.stdout)
        r = run(["curl", "-sS", "--cacert", certs.ca, "-w", "\n%{num_connects}\n",
                 srv.url + "/plaintext", srv.url + "/json"])
        check(r.returncode == 0, "curl two URLs: %s" % r.stderr)
        lines = r.stdout.split("\n")
        check("Hello, World!" in lines[0] and '{"message":"Hello, World!"}' in r.stdout,
              "curl two URLs: %r" % r.stdout)
        check(lines[1] == "1" and lines[-2] == "0", "not one kept-alive connection: %r"
              % r.stdout)
        r = run(["curl", "-sS", "-i", "http://127.0.0.1:%d/plaintext" % srv.http[1]])
        check(r.returncode == 0 and "Strict-Transport-Security" not in r.stdout,
              "HSTS on plain HTTP: %r" % r.stdout)
        # The server's certificate is checked: another CA is refused by curl.
        r = run(["curl", "-sS", srv.url + "/plaintext"])
        check(r.returncode != 0, "curl trusted a certificate of our private CA")
    finally:
        out = srv.stop()
    check("3 requests" in out or "4 requests" in out or "requests" in out, out)
    return 0


def t_pipeline(exe, driver, certs):
    """Twenty requests in one TLS write: twenty answers in order, on one connection."""
    srv = Server(exe, driver, certs)
    try:
        s = tls_connect(srv, certs)
        reqs = b"".join(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" %
                        (b"json" if i % 2 else b"plaintext") for i in range(20))
        s.sendall(reqs)
        rs = read_responses(s, 20)
        for i, (head, body) in enumerate(rs):
            check(head.startswith("HTTP/1.1 200"), "answer %d: %r" % (i, head))
            check(body == (b'{"message":"Hello, World!"}' if i % 2 else b"Hello, World!"),
                  "answer %d body %r" % (i, body))
        # Keep-alive: more on the same connection, then Connection: close ends it cleanly.
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, body = read_responses(s, 1)[0]
        check("Connection: close" in head and body == b"Hello, World!", head)
        check(s.recv(100) == b"", "data after Connection: close")
        s.close()
    finally:
        srv.stop()
    return 0


def t_resume(exe, driver, certs):
    """openssl s_client -sess_out / -sess_in on two lcores: the ticket issued with the
    first (full) handshake resumes, also on the other lcore."""
    lcores = sorted(os.sched_getaffinity(0))
    if len(lcores) < 2:
        log("SKIP: one CPU, no other lcore to resume on")
        return SKIP
    srv = Server(exe, driver, certs, lcores="%d,%d" % (lcores[0], lcores[1]))
    sess = os.path.join(certs.dir, "sess.pem")
    req = "GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    try:
        r = s_client(srv, "-CAfile", certs.ca, "-sess_out", sess, "-ign_eof", stdin=req)
        check(r.returncode == 0 and "Hello, World!" in r.stdout, "first: %s" % r.stderr[-500:])
        check("New, TLSv1.3" in r.stdout, "first handshake not new TLS 1.3: %r" % r.stdout[-800:])
        first = srv.telemetry("/tls")["lcores"]
        check(len(first) == 1 and first[0]["handshakes"] == 1, "/tls after one: %r" % first)
        full_on = first[0]["lcore"]
        other = False
        for _ in range(40):
            r = s_client(srv, "-CAfile", certs.ca, "-sess_in", sess, "-ign_eof", stdin=req)
            check(r.returncode == 0 and "Hello, World!" in r.stdout, "resumed: %s" % r.stderr)
            check("Reused, TLSv1.3" in r.stdout, "not resumed: %r" % r.stdout[-800:])
            per = {e["lcore"]: e for e in srv.telemetry("/tls")["lcores"]}
            if any(lc != full_on and e["resumed"] > 0 for lc, e in per.items()):
                other = True
                break
        check(other, "40 resumptions, none on another lcore than %d: %r" % (full_on, per))
        tot = srv.telemetry("/tls")
        check(tot["handshakes"] == tot["resumed"] + 1, "/tls totals: %r" % tot)
    finally:
        srv.stop()
    return 0


def t_alpn_sni(exe, driver, certs):
    """ALPN: http/1.1 chosen when offered, none when only h2 is; SNI: b.test gets its own
    certificate, localhost and unknown names the first."""
    srv = Server(exe, driver, certs, extra=["--tls-cert", certs.cert, "--tls-key", certs.key,
                                            "--tls-cert", certs.cert_b, "--tls-key", certs.key_b])
    try:
        r = s_client(srv, "-alpn", "h2,http/1.1", "-servername", "localhost")
        check("ALPN protocol: http/1.1" in r.stdout, "ALPN: %r" % r.stdout[-600:])
        r = s_client(srv, "-alpn", "h2")
        check("No ALPN negotiated" in r.stdout, "ALPN with h2 only: %r" % r.stdout[-600:])
        for name, cn in (("b.test", "b.test"), ("localhost", "localhost"),
                         ("nobody.test", "localhost")):
            s = tls_connect(srv, certs, name=cn, ctx=client_ctx(certs, check_hostname=False))
            s.close()
            raw = socket.create_connection(srv.https, timeout=5)
            c = client_ctx(certs)
            c.check_hostname = False
            s = c.wrap_socket(raw, server_hostname=name)
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            check(subject["commonName"] == cn, "SNI %s served %r" % (name, subject))
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
            check(read_responses(s, 1)[0][1] == b"Hello, World!", "answer with SNI " + name)
            s.close()
    finally:
        srv.stop()
    return 0


def t_bad_client(exe, driver, certs):
    """Garbage instead of a ClientHello: closed at once. A stalled handshake (nothing, or
    half a ClientHello): closed after --tls-handshake-timeout. Good clients are served
    meanwhile and after."""
    srv = Server(exe, driver, certs, extra=["--tls-handshake-timeout", "0.5"])
    try:
        g = socket.create_connection(srv.https, timeout=5)
        g.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = time.monotonic()
        try:
            while g.recv(4096):
                pass
        except ConnectionResetError:
            pass
        check(time.monotonic() - t0 < 0.45, "garbage not refused before the timeout")
        g.close()
        stalled = socket.create_connection(srv.https, timeout=10)
        half = socket.create_connection(srv.https, timeout=10)
        # Half of a real ClientHello, taken from python's own handshake.
        inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = client_ctx(certs).wrap_bio(inc, outb, server_hostname="localhost")
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        hello = outb.read()
        half.sendall(hello[:len(hello) // 2])
        t0 = time.monotonic()
        # A good client is served while those two wait.
        s = tls_connect(srv, certs)
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(s, 1)[0][1] == b"Hello, World!", "good client beside stalled")
        for sock in (stalled, half):
            try:
                check(sock.recv(100) == b"", "data on a stalled handshake")
            except ConnectionResetError:
                pass
        took = time.monotonic() - t0
        check(0.3 < took < 8, "stalled handshakes closed after %.2f s, not ~0.5" % took)
        s.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(s, 1)[0][0].startswith("HTTP/1.1 200"), "kept-alive after")
        s.close()
        tot = srv.telemetry("/tls")
        check(tot["handshake_failures"] == 1 and tot["handshake_timeouts"] == 2,
              "/tls: %r" % tot)
    finally:
        srv.stop()
    return 0


def t_old_protocol(exe, driver, certs):
    """A TLS 1.0 client (with @SECLEVEL=0 to even try) and a TLS 1.1 one are refused with
    a protocol alert; TLS 1.2 is served."""
    srv = Server(exe, driver, certs)
    try:
        for flag in ("-tls1", "-tls1_1"):
            r = s_client(srv, flag, "-cipher", "DEFAULT@SECLEVEL=0")
            check(r.returncode != 0 and "Cipher is (NONE)" in r.stdout,
                  "%s was served: %r" % (flag, r.stdout[-400:]))
            check("protocol version" in r.stderr or "no protocols available" in r.stderr
                  or "unsupported protocol" in r.stderr, "%s: %r" % (flag, r.stderr[-400:]))
        r = s_client(srv, "-tls1_2", "-CAfile", certs.ca, "-ign_eof",
                     stdin="GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check("Protocol  : TLSv1.2" in r.stdout and "Hello, World!" in r.stdout,
              "TLS 1.2: %r" % r.stdout[-400:])
    finally:
        srv.stop()
    return 0


def t_reload(exe, driver, certs):
    """SIGHUP after the files were replaced: new handshakes get the new certificate, a
    live connection is not dropped; a broken key keeps the old ones."""
    d = certs.dir
    cert, key = os.path.join(d, "live.pem"), os.path.join(d, "live.key")
    shutil.copy(certs.cert, cert)
    shutil.copy(certs.key, key)
    os.chmod(key, 0o600)
    srv = Server(exe, driver, certs, extra=["--tls-cert", cert, "--tls-key", key])

    def served_cn():
        c = client_ctx(certs)
        c.check_hostname = False
        s = c.wrap_socket(socket.create_connection(srv.https, timeout=5),
                          server_hostname="localhost")
        cn = dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
        s.close()
        return cn

    try:
        live = tls_connect(srv, certs)
        live.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(live, 1)[0][1] == b"Hello, World!", "live before")
        check(served_cn() == "localhost", "before reload")
        shutil.copy(certs.cert_b, cert)
        shutil.copy(certs.key_b, key)
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while served_cn() != "b.test":
            check(time.monotonic() < deadline, "the new certificate never served")
            time.sleep(0.05)
        live.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(live, 1)[0][1] == b'{"message":"Hello, World!"}',
              "the live connection after the reload")
        with open(key, "w") as f:
            f.write("broken\n")
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        check(served_cn() == "b.test", "a broken reload changed the certificate")
        live.close()
    finally:
        out = srv.stop()
    check("reloaded" in out, "no reload line: %r" % out)
    return 0


def t_errors(exe, driver, certs):
    """Bad TLS options: one line naming the file or value, exit 2; a warning for a key
    others may read (the server still starts)."""
    missing = os.path.join(certs.dir, "nope.pem")
    cases = [
        (["--tls-cert", missing, "--tls-key", certs.key], missing),
        (["--tls-cert", certs.cert, "--tls-key", certs.key_b], "does not match"),
        (["--tls-cert", certs.cert], "--tls-key"),
        (["--tls-cert", certs.cert, "--tls-key", certs.key, "--tls-protocols", "TLSv1.1"],
         "--tls-protocols"),
        (["--tls-cert", certs.cert, "--tls-key", certs.key, "--tls-ciphers", "NOPE"], "NOPE"),
        (["--tls-cert", certs.cert, "--tls-key", certs.key, "--tls-verify", "required"],
         "CA file"),
    ]
    for extra, needle in cases:
        args = [exe, "--io-driver", driver, "--listen", "127.0.0.1:0", "--telemetry", "off"]
        if "--tls-cert" in extra:
            args += ["--tls-listen", "127.0.0.1:0"]
        r = run(args + extra)
        check(r.returncode == 2, "%s: exit %d, want 2: %s" % (extra, r.returncode, r.stderr))
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        check(len(lines) == 1 and needle in lines[0], "%s: %r" % (extra, r.stderr))
    r = run([exe, "--io-driver", driver, "--listen", "127.0.0.1:0", "--telemetry", "off",
             "--tls-cert", certs.cert, "--tls-key", certs.key])
    check(r.returncode == 2 and "--tls-listen" in r.stderr, "cert without listen: %r" % r.stderr)
    # Warnings, and the server still starts.
    wkey = os.path.join(certs.dir, "world.key")
    shutil.copy(certs.key, wkey)
    os.chmod(wkey, 0o644)
    srv = Server(exe, driver, certs, extra=["--tls-cert", certs.cert, "--tls-key", wkey])
    srv.stop()
    check(re.search(re.escape(wkey) + r".*readable by every user", srv.err) is not None,
          "no warning for a world-readable key: %r" % srv.err)
    r = run([exe, "--version"])
    check(re.search(r"^tls: OpenSSL 3\S* .*records in user-space", r.stdout, re.M) is not None,
          "--version: %r" % r.stdout)
    return 0


def t_warnings(exe, driver, certs):
    """An expired certificate and a key file others may read: one warning line each,
    naming the file and the reason, and the server still serves."""
    old_crt, old_key = certs.expired()
    wkey = os.path.join(certs.dir, "world.key")
    shutil.copy(certs.key, wkey)
    os.chmod(wkey, 0o644)
    for crt, key, named, why in ((old_crt, old_key, old_crt, "certificate expired"),
                                 (certs.cert, wkey, wkey, "readable by every user")):
        srv = Server(exe, driver, certs, extra=["--tls-cert", crt, "--tls-key", key])
        try:
            c = client_ctx(certs)
            c.check_hostname = False
            c.verify_mode = ssl.CERT_NONE  # an expired one would not verify
            s = c.wrap_socket(socket.create_connection(srv.https, timeout=5),
                              server_hostname="localhost")
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
            check(read_responses(s, 1)[0][1] == b"Hello, World!", "served with %s" % why)
            s.close()
        finally:
            srv.stop()
        lines = [ln for ln in srv.err.splitlines() if named in ln]
        check(len(lines) == 1 and why in lines[0] and "warn" in lines[0].lower(),
              "want one warning line naming %s (%s): %r" % (named, why, srv.err))
    # A good certificate and key: no warning at all.
    srv = Server(exe, driver, certs)
    srv.stop()
    check("expired" not in srv.err and "readable" not in srv.err, "warned: %r" % srv.err)
    return 0


def s_client_get(srv, certs, *args):
    """openssl s_client with our CA: (served, its output)."""
    r = s_client(srv, "-CAfile", certs.ca, "-ign_eof", *args,
                 stdin="GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return "Hello, World!" in r.stdout, r.stdout[-300:] + r.stderr[-300:]


def curl_get(srv, certs, *args):
    r = run(["curl", "-sS", "--cacert", certs.ca] + list(args) + [srv.url + "/plaintext"])
    return r.returncode == 0 and r.stdout == "Hello, World!", r.stderr


def t_client_cert(exe, driver, certs):
    """--tls-verify required / optional with --tls-ca, end to end with openssl s_client
    -cert and curl --cert: required serves a client with a certificate of the CA and
    refuses one without or with another CA's; optional serves one without too, and still
    refuses another CA's."""
    certs.client_certs()
    mine = ["-cert", certs.ccert, "-key", certs.ckey]
    stranger = ["-cert", certs.xcert, "-key", certs.xkey]
    have_curl = shutil.which("curl") is not None
    for mode in ("required", "optional"):
        srv = Server(exe, driver, certs, extra=["--tls-ca", certs.ca, "--tls-verify", mode])
        try:
            for ver in ("-tls1_3", "-tls1_2"):
                ok, out = s_client_get(srv, certs, ver, *mine)
                check(ok, "%s %s: with our client certificate: %s" % (mode, ver, out))
                ok, out = s_client_get(srv, certs, ver)
                check(ok == (mode == "optional"), "%s %s: without one, served=%s: %s"
                      % (mode, ver, ok, out))
                ok, out = s_client_get(srv, certs, ver, *stranger)
                check(not ok, "%s %s: another CA's certificate was served: %s"
                      % (mode, ver, out))
            if have_curl:
                ok, err = curl_get(srv, certs, "--cert", certs.ccert, "--key", certs.ckey)
                check(ok, "%s: curl --cert: %s" % (mode, err))
                ok, err = curl_get(srv, certs)
                check(ok == (mode == "optional"), "%s: curl without --cert: served=%s %s"
                      % (mode, ok, err))
                ok, err = curl_get(srv, certs, "--cert", certs.xcert, "--key", certs.xkey)
                check(not ok, "%s: curl with another CA's certificate was served" % mode)
        finally:
            srv.stop()
    return 0


def t_ktls(exe, driver, certs):
    """--tls-ktls: a bad value exits 2 naming it. auto (the default) serves, and on this
    kernel without kTLS says user-space in the ready line, /tls and --version; where the
    kernel has kTLS it says kernel and hands AES-GCM connections over (counted). off:
    user-space, nothing handed over, on any kernel."""
    r = run([exe, "--io-driver", driver, "--listen", "127.0.0.1:0", "--telemetry", "off",
             "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.cert, "--tls-key", certs.key,
             "--tls-ktls", "sometimes"])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    check(r.returncode == 2 and len(lines) == 1 and "--tls-ktls" in lines[0]
          and "sometimes" in lines[0], "--tls-ktls sometimes: %d %r" % (r.returncode, r.stderr))
    r = run([exe, "--help"])
    check("--tls-ktls" in r.stdout and "auto" in r.stdout, "--help: %r" % r.stdout[-600:])
    for mode in ("auto", "off"):
        srv = Server(exe, driver, certs, extra=["--tls-ktls", mode])
        try:
            tel = srv.telemetry("/tls")
            kernel = tel["ktls_available"] and mode == "auto"
            want = "kernel" if kernel else "user-space"
            check(srv.https_line.endswith("TLS records in " + want),
                  "%s: ready line %r" % (mode, srv.https_line))
            check(tel["records"] == want, "%s: /tls %r" % (mode, tel))
            for i in range(3):
                s = tls_connect(srv, certs)
                s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
                check(read_responses(s, 1)[0][1] == b"Hello, World!", "%s: served" % mode)
                time.sleep(0.05)  # a quiet wire: the hand-over, where there is one
                s.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
                check(read_responses(s, 1)[0][1] == b'{"message":"Hello, World!"}',
                      "%s: served after the hand-over point" % mode)
                s.close()
            tel = srv.telemetry("/tls")
            check((tel["ktls_connections"] == 3) == kernel and
                  (tel["ktls_connections"] == 0) == (not kernel),
                  "%s: ktls_connections %r" % (mode, tel))
            log("--tls-ktls %s: records in %s, kTLS in this kernel: %s" %
                (mode, want, tel["ktls_available"]))
        finally:
            srv.stop()
    r = run([exe, "--version"])
    want = "kernel" if tel["ktls_available"] else "user-space"
    check(re.search(r"^tls: OpenSSL 3\S* .*records in %s" % want, r.stdout, re.M) is not None,
          "--version: %r" % r.stdout)
    return 0


def proc_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def proc_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def hostile_one(srv, certs, kind, hello):
    """One bad connection of @kind; returns nothing, raises nothing the server caused."""
    try:
        s = socket.create_connection(srv.https, timeout=5)
    except OSError:
        return
    try:
        if kind == 0:  # garbage instead of a ClientHello
            s.sendall(b"\x16\x03\x01\xff\xffGARBAGE" * 8)
            s.recv(100)
        elif kind == 1:  # half a ClientHello, then gone
            s.sendall(hello[:len(hello) // 2])
        elif kind == 2:  # a full handshake, then gone without close_notify
            t = client_ctx(certs).wrap_socket(s, server_hostname="localhost")
            t.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
            t.recv(1000)
            s = t
        else:  # a handshake, then a truncated record
            inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
            o = client_ctx(certs).wrap_bio(inc, outb, server_hostname="localhost")
            while True:
                try:
                    o.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    s.sendall(outb.read())
                    inc.write(s.recv(65536))
            s.sendall(outb.read())
            o.write(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
            rec = outb.read()
            s.sendall(rec[:len(rec) - 5])
    except (OSError, ssl.SSLError):
        pass
    finally:
        s.close()


def t_hostile(exe, driver, certs):
    """10,000 bad connections (garbage, half a ClientHello, a handshake dropped without
    close_notify, a truncated record): each is closed, the server keeps serving, and its
    file descriptors and RSS are flat. Then 300 handshakes that never finish, open at
    once: a good client is still served at once, and they are closed at the timeout."""
    import concurrent.futures
    srv = Server(exe, driver, certs, extra=["--tls-handshake-timeout", "1"])
    inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    try:
        client_ctx(certs).wrap_bio(inc, outb, server_hostname="localhost").do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outb.read()
    pid = srv.proc.pid

    def burst(n):
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
            list(ex.map(lambda i: hostile_one(srv, certs, i % 4, hello), range(n)))

    def settle(want_fds, secs=15):
        deadline = time.monotonic() + secs
        while proc_fds(pid) > want_fds and time.monotonic() < deadline:
            time.sleep(0.1)
        return proc_fds(pid)

    try:
        burst(400)  # warm-up: per-lcore arrays, OpenSSL's own caches
        time.sleep(1.5)  # the warm-up's half ClientHellos time out
        fds0, rss0 = proc_fds(pid), proc_rss_kb(pid)
        burst(10000)
        fds1 = settle(fds0)
        rss1 = proc_rss_kb(pid)
        log("fds %d -> %d, RSS %d -> %d KiB" % (fds0, fds1, rss0, rss1))
        check(fds1 <= fds0, "file descriptors leaked: %d -> %d" % (fds0, fds1))
        check(rss1 - rss0 < 16 * 1024, "RSS grew by %d KiB" % (rss1 - rss0))
        s = tls_connect(srv, certs)
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(s, 1)[0][1] == b"Hello, World!", "served after the 10,000")
        s.close()
        # The flood.
        stalled = [socket.create_connection(srv.https, timeout=10) for _ in range(300)]
        for i, st in enumerate(stalled):
            if i % 2:
                st.sendall(hello[:40])
        t0 = time.monotonic()
        s = tls_connect(srv, certs)
        s.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        check(read_responses(s, 1)[0][0].startswith("HTTP/1.1 200"), "served in the flood")
        check(time.monotonic() - t0 < 1.0, "a good client waited %.2f s in the flood"
              % (time.monotonic() - t0))
        s.close()
        for st in stalled:
            try:
                check(st.recv(10) == b"", "data on a stalled handshake")
            except ConnectionResetError:
                pass
            st.close()
        check(settle(fds0) <= fds0, "fds after the flood: %d" % proc_fds(pid))
        tot = srv.telemetry("/tls")
        check(tot["handshake_timeouts"] >= 300, "/tls: %r" % tot)
    finally:
        srv.stop()
    return 0


TESTS = {"hostile": t_hostile, "curl": t_curl, "pipeline": t_pipeline, "resume": t_resume, "alpn_sni": t_alpn_sni,
         "bad_client": t_bad_client, "old_protocol": t_old_protocol, "reload": t_reload,
         "errors": t_errors, "warnings": t_warnings, "client_cert": t_client_cert,
         "ktls": t_ktls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exe", help="path of cr-http")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    if shutil.which("openssl") is None:
        log("SKIP: no openssl command")
        return SKIP
    if apptest.skip_if_refused(a.exe, a.driver, log):
        return SKIP

    def on_alarm(*_):
        raise Failure("timed out")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT)
    certs = Certs()
    try:
        rc = TESTS[a.test](a.exe, a.driver, certs)
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
