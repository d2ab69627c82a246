#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Honest reloads (issue 19): cr-proxy started with --config; the file is edited (a new
backend, a changed listen and balance, an added client-timeout, a removed retries) and
SIGHUP applies the backends and says, one line per key, that each other change takes
effect at a restart; with $NOTIFY_SOCKET set, RELOADING=1 (with MONOTONIC_USEC) then
READY=1 frame the reload, as systemd's reload protocol asks.

  reload_test.py CR_PROXY

Loopback and a private unix socket only; every wait is bounded. Exit 0 pass, 1 fail.
"""
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from started import Failure, check  # noqa: E402
import owner_test  # noqa: E402
from owner_test import free_port, wait_listening  # noqa: E402

WAIT = 10


def backend(name):
    return owner_test.backend(name)[0]


def ask(port):
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        got = b""
        while True:
            d = s.recv(4096)
            if not d:
                return got.rsplit(b"\r\n\r\n", 1)[-1]
            got += d


def main():
    exe = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="cr-reload.")
    conf = os.path.join(tmp, "proxy.conf")
    nsock = os.path.join(tmp, "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(nsock)
    notify.settimeout(WAIT)
    a, b = backend(b"A"), backend(b"B")
    port, port2 = free_port(), free_port()
    with open(conf, "w") as f:
        f.write("listen 127.0.0.1:%d\nbackend 127.0.0.1:%d\nbalance roundrobin\nretries 2\n"
                % (port, a.getsockname()[1]))
    env = dict(os.environ, NOTIFY_SOCKET=nsock)
    p = subprocess.Popen([exe, "-l", "0", "--config", conf, "--telemetry", "off"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        check(notify.recv(4096) == b"READY=1", "no READY=1 at start")
        wait_listening(p, port)
        check(ask(port) == b"A", "backend A does not answer through the proxy")
        with open(conf, "w") as f:
            f.write("listen 127.0.0.1:%d\nbackend 127.0.0.1:%d\nbalance leastconn\n"
                    "client-timeout 30\n" % (port2, b.getsockname()[1]))
        p.send_signal(signal.SIGHUP)
        msg = notify.recv(4096)
        check(re.fullmatch(rb"RELOADING=1\nMONOTONIC_USEC=\d+", msg) is not None,
              "first message of the reload: %r" % msg)
        msg = notify.recv(4096)
        check(msg == b"READY=1", "after the reload %r, not READY=1" % msg)
        deadline = time.monotonic() + WAIT
        while ask(port) != b"B":
            check(time.monotonic() < deadline, "the reloaded backend B never answers")
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=WAIT)
        err = err.decode()
        lines = [ln for ln in err.splitlines() if "takes effect at a restart" in ln]
        want = {("listen", "changed", "%s:1" % conf), ("balance", "changed", "%s:3" % conf),
                ("client-timeout", "added", "%s:4" % conf), ("retries", "removed", conf)}
        got = set()
        for ln in lines:
            m = re.match(r"cr-proxy: (\S+): ([\w-]+): (changed|added|removed); ", ln)
            check(m is not None, "a reload line: %r" % ln)
            got.add((m.group(2), m.group(3), m.group(1)))
        check(got == want and len(lines) == len(want),
              "reload lines %r, wanted one per key of %r" % (lines, sorted(want)))
        check(p.returncode == 0, "exit %s: %r" % (p.returncode, err))
        print("PASS: SIGHUP applied the backends, said what needs a restart:\n  "
              + "\n  ".join(lines))
        return 0
    except (Failure, socket.timeout, OSError) as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        if p.poll() is None:
            p.kill()
        a.close()
        b.close()
        notify.close()
        os.unlink(conf)
        os.unlink(nsock)
        os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
