#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Logging as an operator sees it, on a real app (cr-echo) and its real lcores.

  log_test.py CR_ECHO TEST [--driver uring|epoll]

TEST is one of:
  file      --log-file: lines an lcore logs (lib.net's "connection ends", at debug) reach the
            file with an RFC 3339 UTC timestamp, none reach stderr; after a rename (what
            logrotate does) /log/reopen on the telemetry socket moves new lines to a new
            file and the old one keeps the old lines.
  nostamp   --log-timestamps none: the same lines without a timestamp, on stderr.
  bad       --log-file that cannot be opened, --log-file with --syslog, --syslog without a
            syslog daemon: one line naming the option and why, exit 2.
Each run is bounded in time, uses ephemeral ports on 127.0.0.1 and a private directory, and
exits 0 (pass), 1 (fail) or 77 (skip).
"""
import argparse
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from started import Failure, Started, WAIT, check, round_trip

STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z "
ENDS = r"lib\.net: debug: lcore \d+: connection fd \d+ ends: [a-z ]+"


class Echo(Started):
    """cr-echo on 127.0.0.1:0 with a telemetry socket in @p tmp."""

    def __init__(self, exe, driver, tmp, extra):
        self.sock = os.path.join(tmp, "echo.sock")
        super().__init__([exe, "--io-driver", driver, "--listen", "127.0.0.1:0",
                          "--telemetry", self.sock] + list(extra))

    def echo_once(self):
        round_trip(self.port, b"ping\n", "cr-echo")

    def ask(self, cmd):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(WAIT)
            s.connect(self.sock)
            s.sendall(cmd.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                check(chunk, "telemetry closed the connection")
                buf += chunk
        return json.loads(buf)


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(path, pattern, count=1):
    """Wait until @p path holds @p count lines matching @p pattern; return its text."""
    deadline = time.monotonic() + WAIT
    while True:
        text = read(path)
        if len(re.findall(pattern, text, re.M)) >= count:
            return text
        check(time.monotonic() < deadline,
              "no %d lines matching %r in %s after %.0f s:\n%s" % (count, pattern, path, WAIT,
                                                                  text))
        time.sleep(0.05)


def test_file(exe, driver, tmp):
    log = os.path.join(tmp, "echo.log")
    app = Echo(exe, driver, tmp, ["--log-file", log, "--log-level", "lib.net:debug"])
    app.echo_once()
    text = wait_for(log, "^" + STAMP + ENDS + "$")
    # Each line is whole and stamped with the UTC time it was logged (give or take the
    # time a loaded machine takes to get here).
    for line in text.splitlines():
        check(re.match(STAMP, line), "line without a timestamp: %r" % line)
        when = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        check(abs(when - time.time()) < 120, "timestamp %s is not now (UTC)" % line[:24])
    reply = app.ask("/log")["/log"]
    check(reply["sink"] == "file" and reply["path"] == log and reply["timestamps"] is True,
          "/log: %r" % reply)
    check(all(v == 0 for v in reply["dropped_lines"].values()), "dropped: %r" % reply)

    # logrotate: rename, then reopen; new lines go to a new file.
    os.rename(log, log + ".1")
    app.echo_once()  # before the reopen: still the renamed file
    wait_for(log + ".1", ENDS, 2)
    reply = app.ask("/log/reopen")
    check(reply == {"/log/reopen": {"sink": "file", "path": log, "reopened": True}},
          "/log/reopen: %r" % reply)
    app.echo_once()
    wait_for(log, "^" + STAMP + ENDS + "$")
    # The same by SIGUSR1, as `systemctl kill -s USR1` in a postrotate does.
    os.rename(log, log + ".2")
    app.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + WAIT
    while not os.path.exists(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(os.path.exists(log), "SIGUSR1 did not reopen %s" % log)
    app.echo_once()
    wait_for(log, "^" + STAMP + ENDS + "$")
    out, err = app.stop()
    check(len(re.findall(ENDS, read(log + ".1"))) == 2, "old file: %r" % read(log + ".1"))
    check(len(re.findall(ENDS, read(log + ".2"))) == 1, "second file: %r" % read(log + ".2"))
    check(len(re.findall(ENDS, read(log))) == 1, "new file: %r" % read(log))
    check(not re.search(ENDS, err), "log lines on stderr with --log-file: %r" % err)

    # A reopen that cannot open the path says so, and keeps writing to the old file.
    app = Echo(exe, driver, tmp, ["--log-file", log, "--log-level", "lib.net:debug"])
    os.unlink(log)
    os.mkdir(log)  # the path is now a directory: open fails
    reply = app.ask("/log/reopen")
    check(reply == {"error": "/log/reopen: cannot reopen the log: Is a directory; still "
                             "writing to the old one"}, "/log/reopen: %r" % reply)
    app.stop()
    os.rmdir(log)
    print("file: lines stamped, reopen (telemetry or SIGUSR1) after rename moves to the new "
          "file, error named")


def test_nostamp(exe, driver, tmp):
    app = Echo(exe, driver, tmp, ["--log-timestamps", "none", "--log-level", "lib.net:debug"])
    app.echo_once()
    _, err = app.stop()
    check(re.search("^" + ENDS + "$", err, re.M), "no bare line on stderr: %r" % err)
    check(not re.search(STAMP, err), "a timestamp with --log-timestamps none: %r" % err)
    print("nostamp: " + err.splitlines()[0])


def run_bad(exe, args):
    r = subprocess.run([exe, "--telemetry", "off"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=WAIT)
    return r.returncode, r.stderr


def test_bad(exe, driver, tmp):
    rc, err = run_bad(exe, ["--io-driver", driver, "--log-file", "/nonexistent-dir/x.log"])
    check(rc == 2 and err == "cr-echo: --log-file /nonexistent-dir/x.log: cannot open: No "
          "such file or directory; accepted: a file this user can create or append to; not "
          "with --syslog\n", "bad --log-file: %d %r" % (rc, err))
    rc, err = run_bad(exe, ["--log-file", tmp])
    check(rc == 2 and "cr-echo: --log-file %s: cannot open: Is a directory" % tmp in err
          and err.count("\n") == 1, "directory: %d %r" % (rc, err))
    rc, err = run_bad(exe, ["--log-file", os.path.join(tmp, "a.log"), "--syslog"])
    check(rc == 2 and err.startswith("cr-echo: --syslog: --log-file was given too;")
          and err.count("\n") == 1, "both: %d %r" % (rc, err))
    rc, err = run_bad(exe, ["--log-timestamps", "local"])
    check(rc == 2 and err == "cr-echo: --log-timestamps local: unknown format; accepted: "
          "rfc3339, none\n", "bad format: %d %r" % (rc, err))
    if not os.path.exists("/dev/log"):
        rc, err = run_bad(exe, ["--syslog"])
        check(rc == 2 and err.startswith("cr-echo: --syslog: cannot reach the syslog socket "
                                         "/dev/log: No such file or directory;"),
              "no syslog daemon: %d %r" % (rc, err))
    print("bad: each bad value is one line naming the option, exit 2")


TESTS = {"file": test_file, "nostamp": test_nostamp, "bad": test_bad}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="log_test.") as tmp:
        try:
            TESTS[a.test](a.exe, a.driver, tmp)
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
