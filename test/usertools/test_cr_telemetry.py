#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-telemetry against a live cr-hello (unix socket and loopback only): --list,
one-shot by --pid, --app and --socket, interactive on a pipe and on a terminal, error
replies, usage errors (exit 2), and the socket's modes; plus the Prometheus endpoint the
same app serves."""
import json
import os
import shutil
import select
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crlive  # noqa: E402

TOOL = "cr-telemetry"


def run(args, env, stdin=None):
    return crlive.run_tool(TOOL, args, env, stdin=stdin)


class Offline(unittest.TestCase):
    """What needs no app."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cr-usertools-empty-")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_help(self):
        r = run(["--help"], self.env)
        self.assertEqual(r.returncode, 0)
        for word in ("--pid", "--app", "--socket", "--list", "--json", "-c"):
            self.assertIn(word, r.stdout)

    def test_usage_errors_exit_2(self):
        for args in (["--bogus"], ["--pid", "0"], ["--pid", "x"], ["--pid", "1", "--app", "a"],
                     ["--list", "-c", "/info"], ["--timeout", "0"], ["-c"]):
            r = run(args, self.env)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("cr-telemetry: ", r.stderr, args)
            self.assertEqual(r.stdout, "", args)

    def test_no_app(self):
        r = run(["-c", "/info"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no running coreact app in %s/coreact" % self.dir, r.stderr)
        r = run(["--pid", "999999999", "-c", "/info"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no coreact app with pid 999999999", r.stderr)
        r = run(["--socket", os.path.join(self.dir, "nothing.sock"), "-c", "/info"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot connect to", r.stderr)
        r = run(["--list"], self.env)
        self.assertEqual(r.returncode, 0)
        self.assertIn("no running coreact apps", r.stdout)
        r = run(["--list", "--json"], self.env)
        self.assertEqual(json.loads(r.stdout), [])

    def test_socket_dir_rule(self):
        tel = crlive.load_tool(TOOL)
        env = dict(os.environ)
        uid = os.geteuid()
        tmp = os.path.join(self.dir, "tmp")
        run_user = os.path.join(self.dir, "run-user")
        os.mkdir(tmp)
        try:
            os.environ["XDG_RUNTIME_DIR"] = "/run/user/42"
            self.assertEqual(tel.candidate_dirs(tmp, run_user), ["/run/user/42/coreact"])
            os.environ["XDG_RUNTIME_DIR"] = ""
            self.assertEqual(tel.candidate_dirs(tmp, run_user),
                             [os.path.join(tmp, "coreact-%d" % uid)])
            del os.environ["XDG_RUNTIME_DIR"]
            os.makedirs(os.path.join(run_user, str(uid)))
            self.assertEqual(tel.candidate_dirs(tmp, run_user),
                             [os.path.join(run_user, str(uid), "coreact")])
            os.rmdir(os.path.join(run_user, str(uid)))
            # Only directories of ours with mode 0700 are searched: not one open to
            # others, not a link to one of ours, not another uid's (as root: chown).
            self.assertEqual(tel.socket_dirs(tmp, run_user), [])
            self.check_private_only(tel, tmp, run_user)
        finally:
            os.environ.clear()
            os.environ.update(env)

    def check_private_only(self, tel, tmp, run_user):
        uid = os.geteuid()
        base = os.path.join(tmp, "coreact-%d" % uid)
        good, fresh, shared, link = base, base + "-Ab12Cd", base + "-open00", base + "-link00"
        for d in (good, fresh, shared):
            os.mkdir(d, 0o700)
        os.chmod(shared, 0o755)
        os.symlink(good, link)
        want = [good, fresh]
        if uid == 0:
            theirs = base + "-other0"
            os.mkdir(theirs, 0o700)
            os.chown(theirs, 65534, 65534)
        self.assertEqual(tel.socket_dirs(tmp, run_user), want)
        m = tel.SOCK_RE.match("cr-echo.1234.sock")
        self.assertEqual((m.group("app"), m.group("pid")), ("cr-echo", "1234"))
        self.assertIsNone(tel.SOCK_RE.match("cr-echo.sock"))
        self.assertIsNone(tel.SOCK_RE.match("notes.txt"))


@unittest.skipUnless(crlive.have_app(), "CR_HELLO is not set to the cr-hello binary")
class Live(unittest.TestCase):
    """One cr-hello for the class, with --metrics on loopback."""

    @classmethod
    def setUpClass(cls):
        cls.app = crlive.LiveApp(run_for=40, extra=["--metrics", "127.0.0.1:0"])
        cls.env = cls.app.env

    @classmethod
    def tearDownClass(cls):
        status = cls.app.stop()
        gone = not os.path.exists(cls.app.socket)
        cls.app.cleanup()
        if status != 0 or not gone:
            raise AssertionError("cr-hello exit %s, socket removed: %s" % (status, gone))

    def lcores(self):
        return [lc["lcore"] for lc in self.app.request("/lcores")["/lcores"]]

    def test_socket_modes(self):
        d = os.path.dirname(self.app.socket)
        self.assertEqual(stat.S_IMODE(os.lstat(d).st_mode), 0o700)
        st = os.lstat(self.app.socket)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def test_list(self):
        r = run(["--list"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["APP", "PID", "SOCKET"])
        self.assertEqual(lines[1].split(), ["cr-hello", str(self.app.pid), self.app.socket])
        r = run(["--list", "--json"], self.env)
        self.assertEqual(json.loads(r.stdout),
                         [{"app": "cr-hello", "pid": self.app.pid, "socket": self.app.socket}])

    def test_dead_app_not_listed(self):
        dead = subprocess.Popen(["true"])
        dead.wait()
        ghost = os.path.join(os.path.dirname(self.app.socket), "ghost.%d.sock" % dead.pid)
        open(ghost, "w").close()
        try:
            r = run(["--list", "--json"], self.env)
            self.assertEqual([a["pid"] for a in json.loads(r.stdout)], [self.app.pid])
        finally:
            os.unlink(ghost)

    def test_one_shot_by_pid_app_socket_and_default(self):
        for sel in (["--pid", str(self.app.pid)], ["--app", "cr-hello"],
                    ["--socket", self.app.socket], []):
            r = run(sel + ["-c", "/info"], self.env)
            self.assertEqual(r.returncode, 0, (sel, r.stderr))
            info = json.loads(r.stdout)["/info"]
            self.assertEqual(info["app"], "cr-hello")
            self.assertEqual(info["pid"], self.app.pid)
            self.assertEqual(info["socket"], self.app.socket)
        r = run(["--app", "cr-nothing", "-c", "/info"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no running app named cr-nothing", r.stderr)

    def test_json_is_one_line_per_reply(self):
        r = run(["--json", "-c", "/lcores", "-c", "/stats"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        lcores = json.loads(lines[0])["/lcores"]
        self.assertGreaterEqual(len(lcores), 1)
        for lc in lcores:
            self.assertEqual(lc["state"], "RUNNING")
            self.assertEqual(lc["cpu"], lc["lcore"])
            self.assertGreaterEqual(lc["incarnation"], 1)
        stats = json.loads(lines[1])["/stats"]
        self.assertEqual([s["lcore"] for s in stats["lcores"]], [lc["lcore"] for lc in lcores])
        self.assertEqual(stats["total"]["turns"], sum(s["turns"] for s in stats["lcores"]))

    def test_counters_advance(self):
        first = self.app.request("/stats")["/stats"]
        time.sleep(0.5)
        r = run(["-c", "/stats"], self.env)
        second = json.loads(r.stdout)["/stats"]
        self.assertGreater(second["time_ns"], first["time_ns"])
        self.assertGreater(second["total"]["turns"], first["total"]["turns"])
        self.assertGreater(second["total"]["app"]["token_passes"],
                           first["total"]["app"]["token_passes"])
        self.assertIn("laps_done", second["total"]["app"])

    def test_error_reply_exits_1(self):
        r = run(["-c", "/nope"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(json.loads(r.stdout), {"error": "unknown command '/nope'; try /help"})
        r = run(["-c", "/stats,notanlcore"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not an lcore", json.loads(r.stdout)["error"])
        r = run(["-c", "/" + "x" * 2000], self.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("longer than 1024 bytes", r.stderr)

    def test_help_lists_app_command(self):
        r = run(["-c", "/help"], self.env)
        cmds = json.loads(r.stdout)["/help"]
        for c in ("/help", "/info", "/lcores", "/stats", "/hello/ping"):
            self.assertIn(c, cmds)

    def test_app_command_runs_on_lcore(self):
        for lc in self.lcores():
            r = run(["-c", "/hello/ping,%d" % lc], self.env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            ping = json.loads(r.stdout)["/hello/ping"]
            self.assertEqual(ping["lcore"], lc)
            self.assertEqual(ping["cpu"], lc)
        r = run(["-c", "/hello/ping,x"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("usage: /hello/ping,ID", json.loads(r.stdout)["error"])

    def test_interactive_on_a_pipe(self):
        r = run(["--json"], self.env, stdin="/info\n\n  /lcores  \nquit\n/help\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn("/info", json.loads(lines[0]))
        self.assertIn("/lcores", json.loads(lines[1]))
        r = run([], self.env, stdin="/info\n/nope\n")
        self.assertEqual(r.returncode, 1)

    def test_interactive_on_a_terminal(self):
        master, slave = os.openpty()
        proc = subprocess.Popen([sys.executable, crlive.tool_path(TOOL)], env=self.env,
                                stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        out = b""

        def read_until(token, limit=10.0):
            nonlocal out
            deadline = time.monotonic() + limit
            while token not in out and time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    try:
                        out += os.read(master, 65536)
                    except OSError:
                        break
            return token in out

        try:
            self.assertTrue(read_until(b"cr-telemetry> "), out)
            self.assertIn(b"connected to cr-hello (pid %d)" % self.app.pid, out)
            out = b""
            os.write(master, b"/lcores\n")
            self.assertTrue(read_until(b"cr-telemetry> "), out)
            self.assertIn(b'"/lcores": [', out)
            os.write(master, b"quit\n")
            self.assertEqual(proc.wait(timeout=10), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            os.close(master)

    def test_prometheus(self):
        addr = self.app.request("/info")["/info"]["metrics"]
        self.assertTrue(addr.startswith("127.0.0.1:"), addr)
        with urllib.request.urlopen("http://%s/metrics" % addr, timeout=5) as resp:
            self.assertEqual(resp.status, 200)
            self.assertTrue(resp.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            body = resp.read().decode()
        self.assertIn("# TYPE coreact_lcore_turns_total counter\n", body)
        self.assertIn('coreact_info{app="cr-hello",version=', body)
        for lc in self.lcores():
            self.assertIn('coreact_app_token_passes_total{lcore="%d"} ' % lc, body)
            # One series per state: 1 for the lcore's, 0 for the others.
            self.assertIn('coreact_lcore_state{lcore="%d",state="RUNNING"} 1\n' % lc, body)
            self.assertIn('coreact_lcore_state{lcore="%d",state="OFFLINE"} 0\n' % lc, body)


@unittest.skipUnless(crlive.have_app(), "CR_HELLO is not set to the cr-hello binary")
class TwoApps(unittest.TestCase):
    """Choosing between instances, and an app that ends on its own."""

    def test_choose_between_two(self):
        a = crlive.LiveApp(run_for=20)
        try:
            b = crlive.LiveApp(run_for=20, runtime_dir=a.runtime_dir)
            try:
                r = run(["-c", "/info"], a.env)
                self.assertEqual(r.returncode, 2)
                self.assertIn("2 apps are running", r.stderr)
                r = run(["--app", "cr-hello", "-c", "/info"], a.env)
                self.assertEqual(r.returncode, 2)
                self.assertIn("choose one with --pid", r.stderr)
                r = run(["--pid", str(b.pid), "-c", "/info"], a.env)
                self.assertEqual(json.loads(r.stdout)["/info"]["pid"], b.pid)
                r = run(["--list", "--json"], a.env)
                self.assertEqual(sorted(x["pid"] for x in json.loads(r.stdout)),
                                 sorted([a.pid, b.pid]))
            finally:
                self.assertEqual(b.stop(), 0)
        finally:
            a.cleanup()

    def test_choose_on_a_terminal(self):
        """Interactive, on a terminal, two instances are a list to choose from."""
        a = crlive.LiveApp(run_for=20)
        try:
            b = crlive.LiveApp(run_for=20, runtime_dir=a.runtime_dir)
            try:
                t = crlive.OnTerminal(TOOL, ["--app", "cr-hello"], a.env)
                try:
                    t.expect("--app cr-hello: 2 instances")
                    t.expect("choose 1-2 (q: quit): ")
                    self.assertIn("pid %d" % a.pid, t.text)
                    self.assertIn("pid %d" % b.pid, t.text)
                    t.send("7")
                    t.expect("'7' is not one of 1-2")
                    # The list is by pid: the second is the larger one.
                    t.send("2")
                    t.expect("(pid %d)" % max(a.pid, b.pid))
                    t.send("/info")
                    t.expect('"pid": %d' % max(a.pid, b.pid))
                    t.send("quit")
                    self.assertEqual(t.wait(), 0)
                finally:
                    t.kill()
                # q at the list: no app chosen, exit 1, nothing left hanging.
                t = crlive.OnTerminal(TOOL, ["--app", "cr-hello"], a.env)
                try:
                    t.expect("choose 1-2")
                    t.send("q")
                    t.expect("no app chosen")
                    self.assertEqual(t.wait(), 1)
                finally:
                    t.kill()
                # Batch (-c) on a terminal too: still the error naming the pids.
                t = crlive.OnTerminal(TOOL, ["--app", "cr-hello", "-c", "/info"], a.env)
                try:
                    t.expect("choose one with --pid")
                    self.assertEqual(t.wait(), 2)
                finally:
                    t.kill()
            finally:
                self.assertEqual(b.stop(), 0)
        finally:
            a.cleanup()

    def test_list_reader_gone(self):
        """`cr-telemetry --list | head`: no traceback, exit 0."""
        app = crlive.LiveApp(run_for=20)
        try:
            r = crlive.run_tool_reader_gone(TOOL, ["--list"], app.env)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            self.assertEqual(app.stop(), 0)
        finally:
            app.cleanup()

    def test_socket_removed_at_exit(self):
        app = crlive.LiveApp(run_for=1)
        try:
            self.assertEqual(app.proc.wait(timeout=20), 0, app.output())
            self.assertFalse(os.path.exists(app.socket))
            self.assertIn("stopped cleanly", app.output())
            r = run(["--list", "--json"], app.env)
            self.assertEqual(json.loads(r.stdout), [])
        finally:
            app.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
