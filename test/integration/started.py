# SPDX-License-Identifier: BSD-3-Clause
"""An app started for a test (log_test.py, metrics_test.py): its stdout read until the
lines that say it is ready, every wait bounded, a clean stop checked."""
import atexit
import os
import re
import select
import signal
import socket
import subprocess
import time

WAIT = 20.0  # seconds: generous, the machine is shared


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def wait_for(cond, timeout, what, step=0.01):
    """Poll @p cond until it returns something true (returned), else Failure after
    @p timeout seconds naming @p what."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise Failure("timed out after %.1f s waiting for %s" % (timeout, what))


class Started:
    """@p argv started with stdout and stderr on pipes; returns once every pattern of
    @p ready (bytes regexes) is in its stdout. .out holds what it printed so far, .port
    the port of its "listening on 127.0.0.1:PORT" line, if any. @p env and @p preexec_fn
    go to Popen (e.g. to run it as another uid)."""

    def __init__(self, argv, ready=(rb"listening on",), env=None, preexec_fn=None):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, preexec_fn=preexec_fn)
        # A test that fails half-way leaves nothing running behind it.
        atexit.register(self.kill)
        self.started = time.time()
        self.out = b""
        deadline = time.monotonic() + WAIT
        while not all(re.search(p, self.out) for p in ready):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                raise Failure("%s did not start: out=%r err=%r"
                              % (argv[0], self.out, self.proc.stderr.read()))
            if select.select([self.proc.stdout], [], [], left)[0]:
                self.out += os.read(self.proc.stdout.fileno(), 4096)
        m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", self.out)
        self.port = int(m.group(1)) if m else None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        """SIGINT, then the exit status must be 0. @return (stdout, stderr) as text."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise Failure("%s did not stop on SIGINT" % self.argv[0])
        check(self.proc.returncode == 0,
              "%s exited %d: %r" % (self.argv[0], self.proc.returncode, err))
        # An app cancels its own timers when it stops; the reactor's notice means one forgot.
        check(b"still armed" not in err,
              "%s left timers or pollers armed at its stop: %r" % (self.argv[0], err))
        return (self.out + out).decode(errors="replace"), err.decode(errors="replace")


def round_trip(port, payload, what):
    """Send @p payload on a new connection to 127.0.0.1:@p port and read it back whole."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            check(chunk, "%s closed the connection before the echo" % what)
            got += chunk
        check(got == payload, "%s: %d bytes back, not the ones sent" % (what, len(got)))
