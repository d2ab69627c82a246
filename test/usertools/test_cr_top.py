#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-top: rates and sorting on made-up samples, batch and --json output against
a live cr-hello, usage errors (exit 2), and the full-screen view under tmux: the lcore rows
appear, keys sort, ask before retiring, send start, and q quits with status 0."""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crlive  # noqa: E402

TOOL = "cr-top"


def run(args, env, timeout=crlive.TOOL_TIMEOUT):
    return crlive.run_tool(TOOL, args, env, timeout=timeout)


def stats(time_ns, lcores):
    return {"time_ns": time_ns, "lcores": lcores}


def lc(i, inc=1, **kw):
    s = {"lcore": i, "state": "RUNNING", "incarnation": inc, "turns": 0, "busy_ns": 0,
         "msgs_in": 0, "cqes": 0}
    s.update(kw)
    return s


class Rates(unittest.TestCase):
    """The arithmetic, without an app."""

    @classmethod
    def setUpClass(cls):
        cls.top = crlive.load_tool(TOOL)

    def test_rates_from_two_samples(self):
        prev = stats(1_000_000_000, [lc(0, turns=100, busy_ns=0, msgs_in=10, cqes=5,
                                        spin_ns=100_000_000),
                                     lc(1, turns=0)])
        cur = stats(3_000_000_000, [lc(0, turns=300, busy_ns=500_000_000, msgs_in=30, cqes=9,
                                       spin_ns=300_000_000),
                                    lc(1, inc=2, turns=50, net_connections=7,
                                       net_moved_in=3, net_moved_out=1,
                                       app={"kv_shards_moved_in": 1, "kv_shards_moved_out": 0,
                                            "hits": 9})])
        rows = self.top.compute_rows(prev, cur, [{"lcore": 0, "cpu": 4}, {"lcore": 1, "cpu": 5}])
        r0, r1 = rows
        self.assertEqual((r0["cpu"], r0["turns"], r0["msgs"], r0["cqes"]), (4, 100, 10, 2))
        self.assertAlmostEqual(r0["busy"], 25.0)
        self.assertAlmostEqual(r0["spin"], 10.0)
        self.assertIsNone(r0["conns"])
        # Restarted (new incarnation): no rates until the next sample.
        self.assertIsNone(r1["turns"])
        self.assertIsNone(r1["busy"])
        self.assertEqual(r1["conns"], 7)
        self.assertEqual(r1["inc"], 2)
        # What moved in/out: connections (lib/net's readers), shards (the app's counters).
        self.assertEqual((r0["cmoved"], r0["smoved"]), (None, None))
        self.assertEqual((r1["cmoved"], r1["smoved"]), ("3/1", "1/0"))
        self.assertIn(" 3/1 ", self.top.format_row(r1))
        total = self.top.total_row(rows)
        self.assertEqual((total["turns"], total["conns"]), (100, 7))
        self.assertEqual((total["cmoved"], total["smoved"]), ("3/1", "1/0"))
        self.assertAlmostEqual(total["busy"], 25.0)
        self.assertAlmostEqual(total["spin"], 10.0)

    def test_first_sample_has_no_rates(self):
        rows = self.top.compute_rows(None, stats(5, [lc(0, turns=9)]), [])
        self.assertIsNone(rows[0]["turns"])
        self.assertIn(" - ", self.top.format_row(rows[0]))

    def test_sort_unknown_last(self):
        rows = [{"lcore": 0, "busy": None}, {"lcore": 1, "busy": 5.0},
                {"lcore": 2, "busy": 50.0}]
        self.assertEqual([r["lcore"] for r in self.top.sort_rows(rows, "busy", True)],
                         [2, 1, 0])
        self.assertEqual([r["lcore"] for r in self.top.sort_rows(rows, "busy", False)],
                         [1, 2, 0])

    def test_keys(self):
        class FakeClient:
            def __init__(self):
                self.sent = []

            def request(self, cmd):
                self.sent.append(cmd)
                if cmd == "/info":
                    return {"/info": {"app": "x", "pid": 1}}
                return {"error": "unknown command '%s'; try /help" % cmd.split(",")[0]}

        fake = FakeClient()
        t = self.top.Top(fake)
        t.rows = [{"lcore": 0, "busy": 1.0}, {"lcore": 3, "busy": 9.0}]
        t.selected = 0
        self.assertTrue(t.key("b"))
        self.assertEqual((t.sort, t.reverse), ("busy", True))
        self.assertTrue(t.key("b"))
        self.assertEqual(t.reverse, False)
        self.assertTrue(t.key("DOWN"))
        self.assertEqual(t.selected, 3)
        self.assertTrue(t.key("x"))
        self.assertEqual(t.status, "retire lcore 3? (y/n)")
        self.assertTrue(t.key("n"))
        self.assertEqual(t.status, "not done")
        self.assertTrue(t.key("x"))
        self.assertTrue(t.key("y"))
        self.assertEqual(fake.sent[-1], "/lcore/retire,3")
        self.assertTrue(t.key("s"))
        self.assertEqual(fake.sent[-1], "/lcore/start,3")
        self.assertIn("unknown command", t.status)
        self.assertFalse(t.key("q"))


class Usage(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cr-usertools-empty-")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.dir)

    def tearDown(self):
        os.rmdir(self.dir)

    def test_help(self):
        r = run(["--help"], self.env)
        self.assertEqual(r.returncode, 0)
        for word in ("--pid", "--delay", "--batch", "--json", "retire"):
            self.assertIn(word, r.stdout)

    def test_usage_errors_exit_2(self):
        for args in (["--bogus"], ["-b", "--delay", "0"], ["-b", "--iterations", "-1"],
                     ["-b", "--pid", "-3"], ["-b", "--pid", "1", "--socket", "/x"],
                     []):  # the last: no terminal and neither -b nor --json
            r = run(args, self.env)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("cr-top: ", r.stderr)

    def test_no_app_exits_1(self):
        r = run(["-b", "-n", "1"], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no running coreact app", r.stderr)


@unittest.skipUnless(crlive.have_app(), "CR_HELLO is not set to the cr-hello binary")
class Live(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.app = crlive.LiveApp(run_for=40)
        cls.env = cls.app.env
        cls.lcores = [x["lcore"] for x in cls.app.request("/lcores")["/lcores"]]

    @classmethod
    def tearDownClass(cls):
        status = cls.app.stop()
        cls.app.cleanup()
        if status != 0:
            raise AssertionError("cr-hello exit status %s" % status)

    def test_batch(self):
        r = run(["-b", "-n", "2", "-d", "0.3", "--pid", str(self.app.pid)], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        tables = r.stdout.strip().split("\n\n")
        self.assertEqual(len(tables), 2)
        for t in tables:
            lines = t.splitlines()
            self.assertIn("cr-top - cr-hello pid %d" % self.app.pid, lines[0])
            self.assertEqual(lines[1].split()[:4], ["LCORE", "CPU", "STATE", "BUSY%"])
            rows = [line.split() for line in lines[2:2 + len(self.lcores)]]
            self.assertEqual([int(x[0]) for x in rows], self.lcores)
            self.assertTrue(all(x[2] == "RUNNING" for x in rows))
            self.assertEqual(lines[-1].split()[2], "total")

    def test_first_frame_has_rates(self):
        """The first -b frame is taken one interval after a first sample: real rates, not
        dashes (the token goes round every 100 ms, so every lcore turns)."""
        r = run(["-b", "-n", "1", "-d", "0.5", "--pid", str(self.app.pid)], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        for line in lines[2:2 + len(self.lcores)]:
            cells = line.split()
            for col in (3, 4, 5, 6):  # BUSY%, SPIN%, TURNS/s, MSGS/s
                self.assertNotEqual(cells[col], "-", line)
            self.assertGreater(float(cells[5]), 0, line)

    def test_reader_gone(self):
        """`cr-top -b | head`: no traceback, exit 0."""
        r = crlive.run_tool_reader_gone(TOOL, ["-b", "-n", "1", "-d", "0.2", "--pid",
                                               str(self.app.pid)], self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_json(self):
        r = run(["--json", "-n", "2", "-d", "0.3", "--app", "cr-hello"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        snaps = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual(len(snaps), 2)
        for s in snaps:
            self.assertEqual(s["pid"], self.app.pid)
            self.assertEqual([x["lcore"] for x in s["lcores"]], self.lcores)
            for row in s["lcores"]:
                self.assertEqual(row["state"], "RUNNING")
                self.assertGreaterEqual(row["busy"], 0.0)
                self.assertLessEqual(row["busy"], 100.0)
                self.assertIsNone(row["conns"])
            # The token goes round every 100 ms, so the main lcore turns and gets messages.
            self.assertGreater(s["total"]["turns"], 0)
            self.assertGreater(s["total"]["msgs"], 0)

    @unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed")
    def test_full_screen_under_tmux(self):
        tdir = tempfile.mkdtemp(prefix="cr-top-tmux-")
        tmux = ["tmux", "-S", os.path.join(tdir, "tmux.sock"), "-f", "/dev/null"]
        cmd = "env XDG_RUNTIME_DIR=%s TERM=screen %s %s --pid %d -d 0.3; echo EXIT=$?; sleep 60" % (
            shlex.quote(self.app.runtime_dir), shlex.quote(sys.executable),
            shlex.quote(crlive.tool_path(TOOL)), self.app.pid)

        def screen():
            r = subprocess.run(tmux + ["capture-pane", "-p", "-t", "top"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=10)
            return r.stdout

        def wait_for(pred, limit=15.0):
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline:
                s = screen()
                if pred(s):
                    return s
                time.sleep(0.1)
            self.fail("screen never matched; last:\n" + screen())

        def keys(*k):
            subprocess.run(tmux + ["send-keys", "-t", "top"] + list(k), check=True, timeout=10)

        try:
            subprocess.run(tmux + ["new-session", "-d", "-s", "top", "-x", "110", "-y", "30",
                                   cmd], check=True, timeout=10, env=self.env)

            def rows_ready(s):
                rows = [line for line in s.splitlines() if "RUNNING" in line]
                # Rates appear from the second refresh on.
                return len(rows) == len(self.lcores) and all(
                    line.split()[-5] != "-" for line in rows)

            s = wait_for(rows_ready)
            self.assertIn("cr-top - cr-hello pid %d" % self.app.pid, s)
            self.assertIn("LCORE  CPU STATE", s)
            self.assertIn("q quit", s)
            keys("b")
            wait_for(lambda s: "sort: busy desc" in s)
            keys("l")
            wait_for(lambda s: "sort: lcore asc" in s)
            keys("x")
            wait_for(lambda s: "retire lcore %d? (y/n)" % self.lcores[0] in s)
            keys("n")
            wait_for(lambda s: "not done" in s)
            keys("s")
            # Answered by the lifecycle command, or an error while none is registered.
            wait_for(lambda s: "/lcore/start,%d: " % self.lcores[0] in s)
            keys("q")
            wait_for(lambda s: "EXIT=0" in s)
        finally:
            subprocess.run(tmux + ["kill-server"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
            shutil.rmtree(tdir, ignore_errors=True)




@unittest.skipUnless(crlive.have_app(), "CR_HELLO is not set to the cr-hello binary")
class TwoApps(unittest.TestCase):
    """--app NAME with two instances: a list in the full-screen view, an error in batch."""

    def setUp(self):
        self.a = crlive.LiveApp(run_for=30)
        self.b = crlive.LiveApp(run_for=30, runtime_dir=self.a.runtime_dir)

    def tearDown(self):
        try:
            self.assertEqual(self.b.stop(), 0)
        finally:
            self.a.stop()
            self.a.cleanup()

    def test_batch_names_the_pids(self):
        r = run(["-b", "-n", "1", "--app", "cr-hello"], self.a.env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--app cr-hello: 2 instances (pids %s); choose one with --pid"
                      % ", ".join(str(p) for p in sorted([self.a.pid, self.b.pid])), r.stderr)

    def test_full_screen_offers_a_list(self):
        t = crlive.OnTerminal(TOOL, ["--app", "cr-hello", "-d", "0.2"], self.a.env)
        try:
            t.expect("choose 1-2 (q: quit): ")
            t.send("1")
            # The view of the first (lower pid) instance, then q quits it.
            t.expect("cr-hello pid %d" % min(self.a.pid, self.b.pid))
            t.expect("RUNNING")
            t.send("q")
            self.assertEqual(t.wait(), 0)
        finally:
            t.kill()


if __name__ == "__main__":
    unittest.main(verbosity=2)
