#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-bench: --help, usage errors (exit 2 naming the value), wrk output parsing
(including the broken percentiles of pipelined runs), the core helpers, and one very short
live run of the http pairing (8 connections, 1 s, 1 run) that checks the JSON has every
row with sane figures. The figures are never compared between servers: they are
benchmarks, not pass/fail criteria.

  CR_USERTOOLS  the usertools directory;  CR_BUILD  the meson build with cr-bench-http-limit

Exits 77 (skip) if wrk or nginx is absent and cannot be installed (not root, no apt-get),
once everything else passed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USERTOOLS = os.environ.get("CR_USERTOOLS", os.path.join(TOP, "usertools"))
TOOL = os.path.join(USERTOOLS, "cr-bench")
BUILD = os.environ.get("CR_BUILD", os.path.join(TOP, "build"))
sys.path.insert(0, USERTOOLS)
from crbench import core, pair_kv, resize_load  # noqa: E402

SKIPPED = []

WRK_PLAIN = """Running 2s test @ http://127.0.0.1:42189/plaintext
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   240.46us   80.79us   2.15ms   92.00%
    Req/Sec   139.37k     4.24k  143.43k    85.00%
  Latency Distribution
     50%  229.00us
     75%  254.00us
     90%  283.00us
     99%    1.54ms
  277339 requests in 2.00s, 33.33MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec: 138586.14
Transfer/sec:     16.65MB
"""

WRK_PIPELINED = """Running 2s test @ http://127.0.0.1:40865/plaintext
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   184.56us  138.15us   2.51ms   41.71%
    Req/Sec     1.44M    57.79k    1.50M    80.95%
  Latency Distribution
     50%  350.00us
     75%    0.00us
     90%    0.00us
     99%    0.00us
  2997168 requests in 2.10s, 360.15MB read
Requests/sec: 1426288.30
Transfer/sec:    171.39MB
"""


def run(args, timeout=60):
    return subprocess.run([sys.executable, TOOL] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


class Cli(unittest.TestCase):
    def test_help(self):
        r = run(["--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("--json", "--plot", "--server-cpu", "--client-cpu", "http",
                     "server-CPU-second"):
            self.assertIn(word, r.stdout)

    def usage(self, args, *named):
        r = run(args)
        self.assertEqual(r.returncode, 2, "%s: exit %d: %s%s" % (args, r.returncode,
                                                                 r.stdout, r.stderr))
        for n in named:
            self.assertIn(n, r.stderr)
        return r

    def test_usage_errors(self):
        self.usage([], "PAIRING is required", "http")
        self.usage(["nosuch"], "'nosuch'", "http")
        self.usage(["http", "--duration", "0"], "--duration", "'0'")
        self.usage(["http", "--runs", "x"], "--runs", "'x'")
        self.usage(["http", "--connections", "-3"], "--connections", "'-3'")
        self.usage(["http", "--server-cpu", "4096"], "--server-cpu", "'4096'")
        self.usage(["http", "--plot", "out.svg"], "--plot", "'out.svg'")
        self.usage(["http", "--json", "/nonexistent-dir/x.json"], "--json",
                   "/nonexistent-dir/x.json")
        self.usage(["kv", "--modes", "set P1,plain"], "--modes", "'plain'", "get P16")
        self.usage(["handoff", "--modes", "plain"], "--modes", "accepted: none")
        self.usage(["http", "--modes", "splice-min 3k"], "--modes", "'splice-min 3k'",
                   "splice-min 64k")
        self.usage(["http", "--baseline-build", "/"], "--baseline-build", "'/'",
                   "with echo")
        self.usage(["echo", "--baseline-build", "/nonexistent"], "--baseline-build",
                   "'/nonexistent'", "app/cr-echo/cr-echo")
        self.usage(["resize", "--modes", "redis"], "--modes", "'redis'", "echo, http, kv, proxy")
        cpus = sorted(os.sched_getaffinity(0))
        self.usage(["http", "--server-cpu", str(cpus[0]), "--client-cpu", str(cpus[0])],
                   "--server-cpu and --client-cpu are both %d" % cpus[0])


class Modes(unittest.TestCase):
    def test_want(self):
        ctx = core.Ctx(None, None, 1, 0, out=open(os.devnull, "w"))
        self.assertTrue(ctx.want("plain") and ctx.want("get P1"))
        ctx.modes = ["get P1"]
        self.assertTrue(ctx.want("get P1"))
        self.assertFalse(ctx.want("set P1"))
        self.assertIn("get P16", pair_kv.MODE_NAMES)


class Parse(unittest.TestCase):
    def test_plain(self):
        r = core.parse_wrk(WRK_PLAIN)
        self.assertEqual(r["requests"], 277339)
        self.assertAlmostEqual(r["rps"], 138586.14)
        self.assertAlmostEqual(r["p50_us"], 229.0)
        self.assertAlmostEqual(r["p99_us"], 1540.0)
        self.assertAlmostEqual(r["avg_us"], 240.46)
        self.assertAlmostEqual(r["max_us"], 2150.0)
        self.assertEqual(r["errors"], 6)
        self.assertEqual(r["non_2xx"], 7)

    def test_pipelined_percentiles_unknown(self):
        r = core.parse_wrk(WRK_PIPELINED)
        self.assertEqual(r["requests"], 2997168)
        # wrk printed 0.00us for 75-99 %: every percentile is unknown, not zero
        self.assertIsNone(r["p99_us"])
        self.assertIsNone(r["p50_us"])
        self.assertAlmostEqual(r["avg_us"], 184.56)

    def test_garbage(self):
        with self.assertRaises(core.BenchError):
            core.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")

    def test_redis_benchmark_csv(self):
        # As redis-benchmark 7.0 --csv prints a built-in test and a command of its own.
        head = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
                '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n')
        text = head + '"HSET","20000.00","0.041","0.024","0.047","0.063","0.071","0.071"\n'
        r = pair_kv.parse_csv(text, pair_kv.csv_name("hset"), 5)
        self.assertEqual(r["requests"], 5)
        self.assertAlmostEqual(r["rps"], 20000.0)
        self.assertAlmostEqual(r["p50_us"], 47.0)
        self.assertAlmostEqual(r["p99_us"], 71.0)
        cmd = ["zrange", "myzset", "0", "9"]
        text = head + '"zrange myzset 0 9","inf","0.106","0.024","0.047","0.199","0.559","0.559"\n'
        r = pair_kv.parse_csv(text, pair_kv.csv_name(cmd), 5)
        self.assertAlmostEqual(r["max_us"], 559.0)
        with self.assertRaises(core.BenchError):
            pair_kv.parse_csv(text, pair_kv.csv_name("zrange"), 5)
        with self.assertRaises(core.BenchError):
            pair_kv.parse_csv("Could not connect to Redis at 127.0.0.1:1\n", "GET", 5)


class Core(unittest.TestCase):
    def test_row_ratios(self):
        a = {"rps": 300.0, "per_cpu_s": 1000.0}
        b = {"rps": 100.0, "per_cpu_s": 4000.0}
        r = core.row("x", "m", "ours", a, "peer", b)
        self.assertAlmostEqual(r["ratio_rps"], 3.0)
        self.assertAlmostEqual(r["ratio_per_cpu"], 0.25)
        self.assertIsNone(core.row("x", "m", "ours", None, "peer", b)["ratio_rps"])

    def test_median(self):
        m = core.Ctx.median([{"rps": 1.0, "p99_us": None}, {"rps": 5.0, "p99_us": 7.0},
                             {"rps": 3.0, "p99_us": 9.0}])
        self.assertEqual(m["rps"], 3.0)
        self.assertEqual(m["p99_us"], 8.0)
        self.assertEqual(len(m["runs"]), 3)

    def test_spawn_pins_and_counts_cpu(self):
        cpus = sorted(os.sched_getaffinity(0))
        ctx = core.Ctx(TOP, BUILD, cpus[-1], cpus[0], out=open(os.devnull, "w"))
        try:
            p = ctx.spawn([sys.executable, "-c",
                           "import os,time\nprint(sorted(os.sched_getaffinity(0)),flush=True)"
                           "\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"
                           "\ntime.sleep(30)"], cpus[-1])
            deadline = time.monotonic() + 10
            while "]" not in p.output() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(p.output().strip(), str([cpus[-1]]))
            while ctx.cpu_seconds(p.pid) < 0.25 and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertGreaterEqual(ctx.cpu_seconds(p.pid), 0.25)
            self.assertNotEqual(p.stop(), None)
            self.assertFalse(p.alive())
            with self.assertRaises(core.NotBuilt):
                ctx.app("no-such-app")
            d = ctx.tmpdir()
            self.assertTrue(os.path.isdir(d))
        finally:
            ctx.close()
        self.assertFalse(os.path.exists(d))


def tools_present():
    return shutil.which("wrk") is not None and (shutil.which("nginx") or
                                                os.access("/usr/sbin/nginx", os.X_OK))


class Live(unittest.TestCase):
    """One short real run: the limit and nginx (and cr-http, if this build has it)."""

    def test_http_short(self):
        can_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
        if not tools_present() and not can_install:
            SKIPPED.append("wrk or nginx absent and not installable (not root)")
            self.skipTest(SKIPPED[-1])
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            SKIPPED.append("one CPU only")
            self.skipTest(SKIPPED[-1])
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.json")
            args = ["http", "--build-dir", BUILD, "--no-build", "--duration", "1",
                    "--runs", "1", "--connections", "8", "--json", out]
            plot = shutil.which("gnuplot") is not None
            if plot:
                args += ["--plot", os.path.join(tmp, "bench.png")]
            r = run(args, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                doc = json.load(f)
            if plot:
                with open(os.path.join(tmp, "bench.png"), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(doc["settings"]["connections"], 8)
        rows = {(x["mode"], x["ours_name"], x["peer_name"]): x for x in doc["rows"]}
        has_cr_http = os.access(os.path.join(BUILD, "app", "cr-http", "cr-http"), os.X_OK)
        if not has_cr_http:
            self.assertIn("cr-http not built", r.stdout)
        for mode in ("plain", "pipeline16"):
            for key in ((mode, "cr-http", "nginx"), (mode, "cr-http", "limit"),
                        (mode, "limit", "nginx")):
                self.assertIn(key, rows)
                x = rows[key]
                self.assertEqual(x["pairing"], "http")
                for side in ("ours", "peer"):
                    d = x[side]
                    if d is None:
                        self.assertEqual((side, x["ours_name"], has_cr_http),
                                         ("ours", "cr-http", False))
                        self.assertIsNone(x["ratio_per_cpu"])
                        continue
                    name = x[side + "_name"]
                    self.sane(d, "%s %s" % (name, mode), mode == "plain")
                if x["ours"] and x["peer"]:
                    self.assertAlmostEqual(x["ratio_per_cpu"],
                                           x["ours"]["per_cpu_s"] / x["peer"]["per_cpu_s"])
        # The static files: cr-http (if built) against nginx with sendfile, 4 KiB and 1 MiB.
        for mode in ("static-4k", "static-1m"):
            x = rows[(mode, "cr-http", "nginx")]
            least = 100 if mode == "static-4k" else 10  # 1 MiB answers: fewer in 1 s
            self.sane(x["peer"], "nginx " + mode, True, least)
            if has_cr_http:
                self.sane(x["ours"], "cr-http " + mode, True, least)
        self.assertIn("limit", r.stdout)
        self.assertIn("req/cpu-s", r.stdout)

    def sane(self, d, what, plain, least=100):
        msg = "%s: %s" % (what, d)
        self.assertGreater(d["requests"], least, msg)
        self.assertGreater(d["rps"], least, msg)
        self.assertEqual(d["errors"], 0, msg)
        self.assertEqual(d["non_2xx"], 0, msg)
        # The server served the load: it spent CPU time, no more than the wall time allows.
        self.assertGreater(d["cpu_s"], 0, msg)
        self.assertLessEqual(d["cpu_s"], d["wall_s"] * 1.1 + 0.05, msg)
        self.assertAlmostEqual(d["per_cpu_s"], d["requests"] / d["cpu_s"], delta=1, msg=msg)
        self.assertGreater(d["avg_us"], 0, msg)
        if plain:
            self.assertGreater(d["p50_us"], 0, msg)
            self.assertGreaterEqual(d["p99_us"], d["p50_us"], msg)


class ResizeProtocols(unittest.TestCase):
    """resize's own load client: what counts as one whole answer, and a wrong one."""

    def test_http(self):
        a = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        self.assertEqual(resize_load.Http.answer(bytearray(a[:-1])), (0, None))
        self.assertEqual(resize_load.Http.answer(bytearray(a + b"HTTP")), (len(a), None))
        self.assertEqual(resize_load.Http.answer(bytearray(a.replace(b"200", b"503"))),
                         (len(a), "status 503"))

    def test_kv(self):
        k = resize_load.Kv(3)
        self.assertIn(b"SET", k.request())
        self.assertEqual(k.answer(bytearray(b"+OK\r\n")), (5, None))
        self.assertIn(b"GET", k.request())
        self.assertEqual(k.answer(bytearray(b"$1\r\n")), (0, None))  # the value to come
        self.assertEqual(k.answer(bytearray(b"$1\r\n1\r\n")), (7, None))
        k.request()
        self.assertEqual(k.answer(bytearray(b"-ERR unavailable\r\n")),
                         (18, "-ERR unavailable"))
        k.request()
        n, bad = k.answer(bytearray(b"$1\r\n1\r\n"))  # SET 2 was refused: a stale 1
        self.assertIn("GET answered", bad)


class ResizeLive(unittest.TestCase):
    """One short round of cr-bench resize on cr-http (8 connections): every figure there,
    the two 100-window series, and no client error (its keep-alive connections move)."""

    def test_http_round(self):
        if not os.access(os.path.join(BUILD, "app", "cr-http", "cr-http"), os.X_OK):
            self.skipTest("cr-http not built in " + BUILD)
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU only")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "b.json")
            r = run(["resize", "--modes", "http", "--build-dir", BUILD, "--no-build",
                     "--no-install", "--runs", "1", "--connections", "8", "--json", out],
                    timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                doc = json.load(f)
        (row,) = doc["rows"]
        self.assertEqual(row["pairing"], "resize http")
        (rd,) = row["figures"]["rounds"]
        self.assertGreater(rd["to_offline_ms"], 0)
        self.assertGreater(rd["to_running_ms"], 0)
        self.assertGreater(rd["requests"], 0)
        self.assertGreaterEqual(rd["moved_connections"], 0)
        self.assertIsNone(rd["moved_shards"])
        self.assertEqual(len(rd["series_shrink"]), 100)
        self.assertEqual(len(rd["series_grow"]), 100)
        self.assertEqual(rd["errors"], {k: 0 for k in resize_load.ERROR_KINDS},
                         rd["error_samples"])


class CoreModes(unittest.TestCase):
    """The C benchmark's modes as pairings of cr-bench, from the source tree: a tiny
    handoff run (1000 messages), its text report and, with --json, its figures."""

    def setUp(self):
        if not os.access(os.path.join(BUILD, "app", "cr-bench", "cr-bench-core"), os.X_OK):
            self.skipTest("cr-bench-core not built in " + BUILD)
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU only")

    def test_listed(self):
        r = run(["--help"])
        for mode in ("handoff", "echo", "resize"):
            self.assertIn(mode + " (", r.stdout)

    def test_handoff_text(self):
        r = run(["handoff", "--build-dir", BUILD, "--no-build", "--no-install", "--",
                 "--messages", "1000"], timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cr_send", r.stdout)
        self.assertIn("raw", r.stdout)
        self.assertNotIn("ours req/s", r.stdout)  # no pairing table without such rows

    def test_handoff_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "b.json")
            r = run(["handoff", "--build-dir", BUILD, "--no-build", "--no-install",
                     "--json", out, "--", "--messages", "1000"], timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                doc = json.load(f)
        rows = [x for x in doc["rows"] if x["pairing"] == "handoff"]
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["mode"], "core")
        self.assertEqual(rows[0]["figures"]["mode"], "handoff")
        self.assertIn("mode", r.stdout)

    def test_bad_core_option(self):
        r = run(["handoff", "--build-dir", BUILD, "--no-build", "--no-install", "--",
                 "--messages", "0"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cr-bench-core handoff exited 2", r.stdout)
        self.assertIn("--messages 0", r.stdout)


def load_cr_bench():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("cr_bench_tool", TOOL)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class Plot(unittest.TestCase):
    """--plot: ratios ours/peer per row on a log scale with a line at 1, the value on each
    bar, and the limit responder named for what it is."""
    ROWS = [core.row("http", "plain", "cr-http", {"rps": 1, "per_cpu_s": 300.0}, "nginx",
                     {"rps": 1, "per_cpu_s": 200.0}),
            core.row("http", "plain", "cr-http", {"rps": 1, "per_cpu_s": 300.0}, "limit",
                     {"rps": 1, "per_cpu_s": 400.0}),
            core.row("http", "plain", "limit", {"rps": 1, "per_cpu_s": 400.0}, "nginx",
                     {"rps": 1, "per_cpu_s": 200.0}),
            core.row("kv", "get", "cr-kv", None, "redis", {"rps": 1, "per_cpu_s": 1.0}),
            core.core_row("handoff", "text", None)]

    def test_data(self):
        cb = load_cr_bench()
        data = cb.plot_data(self.ROWS)
        self.assertEqual([round(v, 3) for _, v, _ in data], [1.5, 0.75, 2.0])
        self.assertEqual([t for _, _, t in data], ["1.50x", "0.75x", "2.00x"])
        self.assertIn("cr-http\n/ nginx", data[0][0])
        # "limit" is not a server anyone knows: the plot says what it is.
        self.assertIn("/ the limit (a minimal\nliburing responder,\nno HTTP parsing)",
                      data[1][0])
        self.assertTrue(data[2][0].startswith("http plain\nthe limit (a minimal\nliburing"))

    def test_script(self):
        cb = load_cr_bench()
        gp = cb.gnuplot_script(cb.plot_data(self.ROWS), "/x/plot.dat", "/x/out.png", True)
        self.assertIn("set logscale y", gp)
        self.assertIn("with labels", gp)        # the value on each bar
        self.assertIn("first 1 to graph 1, first 1", gp)  # the line at 1
        self.assertIn("ours / peer", gp)

    @unittest.skipIf(shutil.which("gnuplot") is None, "no gnuplot")
    def test_render(self):
        cb = load_cr_bench()
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "p.png")
            self.assertEqual(cb.plot(self.ROWS, out, tmp), "gnuplot")
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with self.assertRaises(core.BenchError):
            cb.plot([self.ROWS[3]], os.path.join(tempfile.gettempdir(), "never.png"), "/tmp")


class AskBeforeInstalling(unittest.TestCase):
    """apt-get: asked on a terminal, said in one line without one, its output kept back.

    A copy of the usertools with one more pairing that needs a package no archive has, so
    the real apt-get runs and fails (nothing gets installed)."""
    PKG = "coreact-test-no-such-package"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cr-bench-ask.")
        cls.tools = os.path.join(cls.tmp, "usertools")
        shutil.copytree(USERTOOLS, cls.tools, ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(cls.tools, "crbench", "pair_nopkg.py"), "w") as f:
            f.write('"""a pairing that needs a package no archive has"""\n'
                    'PAIRING = "nopkg"\nPACKAGES = ["%s"]\n\n\ndef run(ctx):\n'
                    '    return []\n' % cls.PKG)
        cls.tool = os.path.join(cls.tools, "cr-bench")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def need_root_apt(self):
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            SKIPPED.append("not root, or no apt-get")
            self.skipTest(SKIPPED[-1])

    def test_terminal_asks(self):
        self.need_root_apt()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import crlive
        t = crlive.OnTerminal(self.tool, ["nopkg", "--build-dir", BUILD, "--no-build"],
                              dict(os.environ))
        try:
            t.expect("install the missing Debian packages %s with apt-get? [Y/n] " % self.PKG)
            t.send("n")
            t.expect("not installing %s" % self.PKG)
            self.assertEqual(t.wait(), 1)
            self.assertNotIn("failed", t.text)  # apt-get never ran
        finally:
            t.kill()

    def test_no_terminal_says_so_and_hides_apt(self):
        self.need_root_apt()
        r = subprocess.run([sys.executable, self.tool, "nopkg", "--build-dir", BUILD,
                            "--no-build"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=600)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "cr-bench: installing the missing Debian packages %s with "
                         "apt-get (no terminal to ask; --no-install to refuse)" % self.PKG)
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertTrue(lines[1].startswith("cr-bench: apt-get install %s failed: " % self.PKG),
                        lines[1])
        self.assertIn(self.PKG, lines[1])  # apt's own last word on it
        self.assertNotIn("Reading package lists", r.stdout + r.stderr)

    def test_yes_on_a_terminal_does_not_ask(self):
        self.need_root_apt()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import crlive
        t = crlive.OnTerminal(self.tool, ["nopkg", "--yes", "--build-dir", BUILD,
                                          "--no-build"], dict(os.environ))
        try:
            t.expect("apt-get install %s failed: " % self.PKG, timeout=600)
            self.assertEqual(t.wait(), 1)
            self.assertNotIn("[Y/n]", t.text)
            self.assertIn("installing the missing Debian packages %s with apt-get\r\n"
                          % self.PKG, t.text)
        finally:
            t.kill()


def main():
    res = unittest.main(exit=False, verbosity=2).result
    if not res.wasSuccessful():
        return 1
    return 77 if SKIPPED else 0


if __name__ == "__main__":
    sys.exit(main())
