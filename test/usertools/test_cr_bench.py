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
from crbench import core, pair_kv  # noqa: E402

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
        cpus = sorted(os.sched_getaffinity(0))
        self.usage(["http", "--server-cpu", str(cpus[0]), "--client-cpu", str(cpus[0])],
                   "--server-cpu and --client-cpu are both %d" % cpus[0])


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
        self.assertIn("limit", r.stdout)
        self.assertIn("req/cpu-s", r.stdout)

    def sane(self, d, what, plain):
        msg = "%s: %s" % (what, d)
        self.assertGreater(d["requests"], 100, msg)
        self.assertGreater(d["rps"], 100, msg)
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


def main():
    res = unittest.main(exit=False, verbosity=2).result
    if not res.wasSuccessful():
        return 1
    return 77 if SKIPPED else 0


if __name__ == "__main__":
    sys.exit(main())
