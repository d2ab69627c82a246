#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One owner per address (issue 19): a second instance of an app on the address the first
listens on exits 1 with one line naming the address, and the first goes on serving;
with --share-address the second starts beside it (the way to restart without refusing
connections) and both serve.

  owner_test.py EXE APP      APP: echo, http, kv or proxy (proxy gets a backend here), or
                             echo-udp (cr-echo --udp, the UDP side held by another process)

Loopback only; every wait is bounded. Exit 0 pass, 1 fail.
"""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from started import Failure, check  # noqa: E402

WAIT = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend(body=b"ok"):
    """An HTTP responder for cr-proxy answering @p body, on its own thread; returns the
    listening socket and its "HOST:PORT"."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                c.settimeout(WAIT)
                try:
                    c.recv(65536)
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(body), body))
                except OSError:
                    pass
    threading.Thread(target=serve, daemon=True).start()
    return srv, "127.0.0.1:%d" % srv.getsockname()[1]


def ask(app, port):
    """One request the app answers; @return True when an answer came."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        if app == "echo":
            s.sendall(b"ping\n")
            return s.recv(64) == b"ping\n"
        if app == "kv":
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64) == b"+PONG\r\n"
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")


def start(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p


def wait_listening(p, port):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise Failure("%s exited %s: %r" % (p.args[0], p.returncode,
                                                p.stderr.read().decode()[-500:]))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Failure("%s not listening on %d" % (p.args[0], port))


def stop(p):
    if p.poll() is None:
        p.terminate()
    try:
        p.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise Failure("%s did not stop on SIGTERM" % p.args[0])


def udp_owner(exe):
    """cr-echo --udp on a port whose UDP side another process holds with SO_REUSEPORT
    (which would let ours join its group, and the kernel split datagrams between the
    two): refused with one line, exit 1; with --share-address it starts."""
    for _ in range(50):  # a UDP port whose TCP side is free too (cr-echo listens on both)
        other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        port = other.getsockname()[1]
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", port))
                break
            except OSError:
                other.close()
    else:
        raise Failure("no port free for both UDP and TCP in 50 tries")
    addr = "127.0.0.1:%d" % port
    argv = [exe, "--udp", "--listen", addr, "--telemetry", "off"]
    try:
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT)
        except subprocess.TimeoutExpired:
            raise Failure("UDP: cr-echo started on a UDP port another process holds")
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1, "UDP: a second owner exited %d: %r" % (r.returncode, r.stderr))
        check(len(lines) == 1 and addr in lines[0] and "UDP" in lines[0]
              and "Address already in use" in lines[0], "UDP: the error: %r" % r.stderr)
        p = start(argv + ["--share-address"])
        try:
            wait_listening(p, port)
            got = 0
            for i in range(40):  # the kernel splits them by source port between the owners
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
                    c.settimeout(0.2)
                    c.sendto(b"d%d" % i, ("127.0.0.1", port))
                    try:
                        got += c.recvfrom(64)[0] == b"d%d" % i
                    except socket.timeout:
                        pass
            check(got > 0, "UDP with --share-address: no datagram echoed")
        finally:
            stop(p)
        return lines[0]
    finally:
        other.close()


def main():
    exe, app = sys.argv[1], sys.argv[2]
    if app == "echo-udp":
        try:
            line = udp_owner(exe)
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
        print("PASS: echo --udp: a second owner of the UDP port refused (%s)" % line)
        return 0
    port = free_port()
    addr = "127.0.0.1:%d" % port
    extra, srv = [], None
    if app == "proxy":
        srv, baddr = backend()
        extra = ["--backend", baddr]
    argv = [exe, "-l", "0", "--listen", addr, "--telemetry", "off"] + extra
    procs = []
    try:
        first = start(argv)
        procs.append(first)
        wait_listening(first, port)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1, "second instance exited %d: %r" % (r.returncode, r.stderr))
        check(len(lines) == 1 and addr in lines[0] and "Address already in use" in lines[0],
              "second instance's error: %r" % r.stderr)
        check(ask(app, port), "the first instance stopped answering")
        second = start(argv + ["--share-address"])
        procs.append(second)
        time.sleep(0.5)
        if second.poll() is not None:
            raise Failure("with --share-address the second exited %s: %r"
                          % (second.returncode, second.stderr.read().decode()[-500:]))
        # Both in the port's group now: stop the first, the second answers alone.
        stop(first)
        check(ask(app, port), "the instance started with --share-address does not answer")
        stop(second)
        print("PASS: %s: a second instance refused (%s); --share-address shares" % (app,
              lines[0]))
        return 0
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if srv is not None:
            srv.close()


if __name__ == "__main__":
    sys.exit(main())
