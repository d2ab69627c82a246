#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hostile clients of lib/telemetry, on a real app (cr-echo), issue 14 items 6 and 13.

  hostile_telemetry_test.py CR_ECHO TEST [--driver uring|epoll] [--tools DIR]

metrics_slots: 40 connections to --metrics that send half a request and then nothing.
  Meanwhile a probe asks /info on the unix socket 8 times and scrapes /metrics 4 times:
  every one is answered within a few seconds. The attackers are dropped by the server's
  own request timeout, and the app's fds come back to what they were; its RSS stays put.
squat: (root; the app runs as an unused uid) another user made /tmp/coreact-<uid> first.
  The app still starts, in a fresh /tmp/coreact-<uid>-XXXXXX it announces, leaves the
  squatted directory alone, and removes its own at exit. cr-telemetry --list and --app
  find it and nothing planted in directories another uid owns (or ours, open to others).
  With /run/user/<uid> present, the socket goes there instead.
Exit 0 pass, 1 fail, 77 skip (driver refused; squat: not root).
"""
import argparse
import glob
import json
import os
import pwd
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import apptest
from apptest import fds_of, rss_kib
from started import Failure, Started, WAIT, check, round_trip, wait_for

NOBODY = 65534


def log(msg):
    print(msg, flush=True)


def unix_request(path, cmd, timeout):
    """One request line on the app's unix socket; the JSON reply, or raise."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(cmd.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(65536)
            check(d, "%s: closed before the reply to %s (%r)" % (path, cmd, buf))
            buf += d
    return json.loads(buf)


def scrape(hostport, timeout):
    """GET /metrics: the body, or raise."""
    with urllib.request.urlopen("http://%s/metrics" % hostport, timeout=timeout) as r:
        check(r.status == 200, "GET /metrics: %d" % r.status)
        return r.read()


# ---- item 6: the metrics port never takes the unix socket's slots ----

def t_metrics_slots(exe, driver, tools):
    tmp = os.path.join("/tmp", "crtel-%d-%d" % (os.getpid(), random.randrange(1 << 30)))
    os.mkdir(tmp, 0o700)
    tel = os.path.join(tmp, "tel.sock")
    app = Started([exe, "--io-driver", driver, "-l", "0", "--listen", "127.0.0.1:0",
                   "--metrics", "127.0.0.1:0", "--telemetry", tel],
                  [rb"metrics on", rb"listening on"])
    attackers = []
    try:
        m = re.search(rb"metrics on http://(\S+)/metrics", app.out)
        check(m, "no metrics address in %r" % app.out)
        metrics = m.group(1).decode()
        pid = app.proc.pid
        scrape(metrics, WAIT)
        unix_request(tel, "/info", WAIT)
        fds0, rss0 = fds_of(pid), rss_kib(pid)
        host, port = metrics.rsplit(":", 1)
        for _ in range(40):
            s = socket.create_connection((host, int(port)), timeout=WAIT)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line, ever
            attackers.append(s)
        t_attack = time.monotonic()
        time.sleep(0.3)  # let the server take them (bounded: a condition is checked below)
        fails, worst = [], 0.0
        for i in range(8):
            t0 = time.monotonic()
            try:
                r = unix_request(tel, "/info", 3.0)
                check("/info" in r, "reply %r" % r)
            except (OSError, Failure, ValueError) as e:
                fails.append("/info %d: %s" % (i, e))
            worst = max(worst, time.monotonic() - t0)
        for i in range(4):
            t0 = time.monotonic()
            try:
                got = scrape(metrics, 3.0)
                check(b"coreact_" in got, "reply %r" % got[:80])
            except (OSError, Failure) as e:
                fails.append("/metrics %d: %s" % (i, e))
            worst = max(worst, time.monotonic() - t0)
        log("under 40 incomplete metrics requests: %d of 12 probes failed, slowest %.3f s"
            % (len(fails), worst))
        check(not fails, "probes failed: %s" % "; ".join(fails))
        # The server drops them itself, by its request timeout (5 s), not when they give up.
        for s in attackers:
            s.settimeout(max(1.0, 15.0 - (time.monotonic() - t_attack)))
            try:
                d = s.recv(4096)
            except ConnectionResetError:
                d = b""
            except socket.timeout:
                raise Failure("an incomplete metrics request was kept %.1f s"
                              % (time.monotonic() - t_attack))
            check(d == b"", "an incomplete request got %r" % d[:80])
        log("all 40 dropped by the server %.1f s after they connected"
            % (time.monotonic() - t_attack))
        for s in attackers:
            s.close()
        attackers = []
        wait_for(lambda: fds_of(pid) <= fds0, WAIT, "fds back to %d (now %d)"
                 % (fds0, fds_of(pid)))
        rss1 = rss_kib(pid)
        check(rss1 < rss0 + 16 * 1024, "RSS grew from %d to %d KiB" % (rss0, rss1))
        log("fds %d before, %d after; RSS %d KiB before, %d after" % (fds0, fds_of(pid), rss0,
                                                                      rss1))
        round_trip(app.port, b"still echoing", "cr-echo")
        app.stop()
    finally:
        for s in attackers:
            s.close()
        app.kill()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- item 13: a squatted /tmp/coreact-<uid> ----

def free_uid():
    """A uid nobody uses here: no passwd entry, no directory of it in /tmp or /run/user."""
    for _ in range(1000):
        uid = random.randrange(40000, 60000)
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not glob.glob("/tmp/coreact-%d*" % uid) and not os.path.exists("/run/user/%d" % uid):
            return uid
    raise Failure("no free uid")


def as_uid(uid):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop


class Decoy:
    """A unix socket a squatter serves: any tool that reads it gets the app name 'decoy'."""

    def __init__(self, path, owner):
        self.path = path
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        os.chmod(path, 0o777)
        os.chown(path, owner, owner)
        self.ls.listen(8)
        self.ls.settimeout(0.1)
        self.hits = 0
        self.stopping = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.hits += 1
            try:
                c.settimeout(1)
                c.recv(1024)
                c.sendall(b'{"/info":{"app":"decoy","pid":1}}\n')
            except OSError:
                pass
            c.close()

    def close(self):
        self.stopping = True
        self.t.join()
        self.ls.close()


def readable_copy(tools):
    """The usertools copied where the unused uid can read them: the checkout may sit under
    a directory closed to others (a CI clone in a mktemp -d, mode 0700)."""
    import atexit
    import tempfile
    top = tempfile.mkdtemp(prefix="cr-tools.")
    atexit.register(shutil.rmtree, top, True)
    os.chmod(top, 0o755)
    dst = os.path.join(top, "usertools")
    shutil.copytree(tools, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, files in os.walk(dst):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), os.stat(os.path.join(d, f)).st_mode | 0o444)
    return dst


def tool(tools, uid, env, *args):
    # The system's python: one under /root (pyenv) is closed to the uid the tool runs as.
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    return subprocess.run([py, os.path.join(tools, "cr-telemetry")] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=WAIT, env=env, preexec_fn=as_uid(uid))


def start_as(exe, driver, uid, env):
    """cr-echo run as @p uid: returns (the app, the socket path it announced)."""
    app = Started([exe, "--io-driver", driver, "-l", "0", "--listen", "127.0.0.1:0"],
                  [rb"telemetry on", rb"listening on"], env=env, preexec_fn=as_uid(uid))
    return app, re.search(rb"telemetry on (\S+)", app.out).group(1).decode()


def t_squat(exe, driver, tools):
    if os.geteuid() != 0:
        log("SKIP: the squat test makes directories of other uids: run as root")
        return apptest.SKIP
    uid = free_uid()
    tools = readable_copy(tools)
    squat = "/tmp/coreact-%d" % uid
    planted = "/tmp/coreact-%d-plant0" % uid  # the fallback's shape, but nobody's
    open_ours = "/tmp/coreact-%d-open00" % uid  # ours, but open to others
    run_user = "/run/user/%d" % uid
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["HOME"] = "/"
    decoys, app = [], None
    try:
        for d, owner, mode in ((squat, NOBODY, 0o755), (planted, NOBODY, 0o755),
                               (open_ours, uid, 0o755)):
            os.mkdir(d)
            os.chown(d, owner, owner)
            os.chmod(d, mode)
        app, path = start_as(exe, driver, uid, env)
        pid = app.proc.pid
        for d in (squat, planted, open_ours):
            decoys.append(Decoy(os.path.join(d, "cr-echo.%d.sock" % pid), os.stat(d).st_uid))
        log("squatted %s (uid %d): the app announced %s" % (squat, NOBODY, path))
        d = os.path.dirname(path)
        check(re.fullmatch(r"/tmp/coreact-%d-[A-Za-z0-9]{6}" % uid, d),
              "socket directory %s: expected a fresh /tmp/coreact-%d-XXXXXX" % (d, uid))
        st = os.lstat(d)
        check(st.st_uid == uid and (st.st_mode & 0o777) == 0o700,
              "%s: uid %d mode %o" % (d, st.st_uid, st.st_mode & 0o777))
        check(os.stat(squat).st_uid == NOBODY, "the squatted directory was changed")
        round_trip(app.port, b"served", "cr-echo")
        r = tool(tools, uid, env, "--list", "--json")
        check(r.returncode == 0, "cr-telemetry --list: %d %s" % (r.returncode, r.stderr))
        listed = json.loads(r.stdout)
        check([a["socket"] for a in listed] == [path],
              "cr-telemetry --list found %r, expected only %s" % (listed, path))
        r = tool(tools, uid, env, "--app", "cr-echo", "-c", "/info")
        check(r.returncode == 0, "cr-telemetry --app: %d %s" % (r.returncode, r.stderr))
        info = json.loads(r.stdout)["/info"]
        check(info.get("pid") == pid and info.get("app") == "cr-echo", "/info: %r" % info)
        check(sum(x.hits for x in decoys) == 0, "a tool connected to a planted socket")
        log("cr-telemetry --list and --app found %s only, no planted socket" % path)
        app.stop()
        check(not os.path.exists(d), "%s left behind at exit" % d)
        # /run/user/<uid> exists (a login session): the socket goes there.
        os.mkdir(run_user)
        os.chown(run_user, uid, uid)
        os.chmod(run_user, 0o700)
        app, path = start_as(exe, driver, uid, env)
        check(path == "%s/coreact/cr-echo.%d.sock" % (run_user, app.proc.pid),
              "with %s present the socket is %s" % (run_user, path))
        r = tool(tools, uid, env, "--app", "cr-echo", "-c", "/info")
        check(r.returncode == 0 and json.loads(r.stdout)["/info"]["pid"] == app.proc.pid,
              "cr-telemetry --app with /run/user: %d %s %s" % (r.returncode, r.stdout,
                                                               r.stderr))
        log("with %s present: %s, found by cr-telemetry --app" % (run_user, path))
        app.stop()
    finally:
        if app is not None:
            app.kill()
        for x in decoys:
            x.close()
        for d in [squat, planted, open_ours, run_user] + glob.glob("/tmp/coreact-%d-*" % uid):
            shutil.rmtree(d, ignore_errors=True)
    return 0


TESTS = {"metrics_slots": t_metrics_slots, "squat": t_squat}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exe", help="path of cr-echo")
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    ap.add_argument("--tools", default=os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "usertools"), help="the usertools directory")
    a = ap.parse_args()
    if apptest.skip_if_refused(a.exe, a.driver, log):
        return apptest.SKIP
    try:
        rc = TESTS[a.test](a.exe, a.driver, a.tools)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1
    if rc:
        return rc
    log("PASS %s (%s)" % (a.test, a.driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
