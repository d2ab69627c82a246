#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""sd_notify readiness through lib/app (issue 19): with $NOTIFY_SOCKET set, an app sends
READY=1 once it listens (a connection made right after it is answered) and STOPPING=1
at SIGTERM, then exits 0; without it, it sends nothing and starts as before.

  notify_test.py EXE APP     APP: echo, http or kv

Loopback and a private unix socket only; every wait is bounded. Exit 0 pass, 1 fail.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from started import Failure, check  # noqa: E402
from owner_test import ask, free_port  # noqa: E402

WAIT = 10


def main():
    exe, app = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="cr-notify.")
    path = os.path.join(tmp, "notify.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(WAIT)
    port = free_port()
    env = dict(os.environ, NOTIFY_SOCKET=path)
    p = subprocess.Popen([exe, "-l", "0", "--listen", "127.0.0.1:%d" % port,
                          "--telemetry", "off"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            msg = srv.recv(4096)
        except socket.timeout:
            raise Failure("no message on $NOTIFY_SOCKET within %d s" % WAIT)
        check(msg == b"READY=1", "first message %r, not READY=1" % msg)
        check(ask(app, port), "READY=1 came but a request right after it got no answer")
        p.send_signal(signal.SIGTERM)
        try:
            msg = srv.recv(4096)
        except socket.timeout:
            raise Failure("no STOPPING=1 within %d s of SIGTERM" % WAIT)
        check(msg == b"STOPPING=1", "after SIGTERM %r, not STOPPING=1" % msg)
        _, err = p.communicate(timeout=WAIT)
        check(p.returncode == 0, "exit %s: %r" % (p.returncode, err))
        check(b"NOTIFY_SOCKET" not in err, "a notify error: %r" % err)
        print("PASS: %s: READY=1 once listening, STOPPING=1 at SIGTERM" % app)
        return 0
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        srv.close()
        os.unlink(path)
        os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
