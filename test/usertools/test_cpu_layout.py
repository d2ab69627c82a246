#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-cpu-layout against the fake trees in fixtures/ and this machine.

The tool runs as a subprocess, as a user runs it; the corelist parser is also checked
directly against lib/eal's messages.
"""
import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(TOP, "usertools", "cr-cpu-layout")
FIX = os.path.join(HERE, "fixtures")
VM2 = os.path.join(FIX, "vm2")
TWO_S = os.path.join(FIX, "2s-numa-smt")
HOLES = os.path.join(FIX, "holes")

sys.path.insert(0, os.path.join(TOP, "usertools"))
sys.path.insert(0, HERE)
import crlive  # noqa: E402
import crtopo  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def layout(root, *args):
    r = run("--root", root, "--json", *args)
    if r.returncode != 0:
        raise AssertionError("exit %d: %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


class Text(unittest.TestCase):
    maxDiff = None

    def test_vm2(self):
        r = run("--root", VM2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout, """\
1 package, 1 NUMA node, 2 cores, 2 CPUs, 1 thread per core (AMD EPYC)
read from %s

  online    0-1; offline none
  allowed   0-1 (every online CPU)
  isolated  none
  nohz_full none (this kernel has no nohz_full)
  lcores    0-1, main 0 (default: the first allowed CPU of each core; same as -l 0-1)

package  node  core  CPUs  L1d  L2  L3
      0     0     0  0M    32K  1M  32M
      0     0     1  1*    32K  1M  32M
  M main lcore, * lcore

NUMA nodes:
  node 0: CPUs 0-1, 4.3 GiB memory
caches:
  L1d  32K    per core, 2 instances
  L1i  32K    per core, 2 instances
  L2   1M     per core, 2 instances
  L3   32M    shared by 2 cores, 1 instance: CPUs 0-1
""" % VM2)

    def test_two_sockets(self):
        r = run("--root", TWO_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, """\
2 packages, 2 NUMA nodes, 8 cores, 16 CPUs, 2 threads per core \
(Intel(R) Xeon(R) Silver 4309Y CPU @ 2.80GHz)
read from %s

  online    0-15; offline none
  allowed   0-15 (every online CPU)
  isolated  2-3,10-11 (kernel command line: isolcpus=2-3,10-11 nohz_full=2-3,10-11)
  nohz_full 2-3,10-11
  lcores    0-7, main 0 (default: the first allowed CPU of each core; same as -l 0-7)

package  node  core  CPUs       L1d  L2  L3
      0     0     0  0M   8     48K  2M  30M #0
      0     0     1  1*   9     48K  2M  30M #0
      0     0     2  2*in 10in  48K  2M  30M #0
      0     0     3  3*in 11in  48K  2M  30M #0
      1     1     4  4*   12    48K  2M  30M #1
      1     1     5  5*   13    48K  2M  30M #1
      1     1     6  6*   14    48K  2M  30M #1
      1     1     7  7*   15    48K  2M  30M #1
  M main lcore, * lcore, i isolated from the scheduler (isolcpus / cpu/isolated), n nohz_full

NUMA nodes:
  node 0: CPUs 0-3,8-11, 62.5 GiB memory, distances 10 21
  node 1: CPUs 4-7,12-15, 62.5 GiB memory, distances 21 10
caches:
  L1d  48K    per core, 8 instances
  L1i  32K    per core, 8 instances
  L2   2M     per core, 8 instances
  L3   30M    shared by 4 cores, 2 instances: #0 CPUs 0-3,8-11, #1 CPUs 4-7,12-15
""" % TWO_S)

    def test_holes_smt_and_allowed(self):
        r = run("--root", HOLES, "--smt", "--allowed", "0-2,6-7", "--main-lcore", "6")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("  online    0-2,4,6-7; offline 3,5", lines)
        self.assertIn("  allowed   0-2,6-7 (--allowed)", lines)
        self.assertIn("  lcores    0-2,6-7, main 6 (--smt: every allowed CPU; "
                      "same as -l 0-2,6-7 --main-lcore 6)", lines)
        table = lines[lines.index("package  node  core  CPUs   L1d  L2    L3"):][:6]
        self.assertEqual(table, [
            "package  node  core  CPUs   L1d  L2    L3",
            "      0     0     0  0* 4x  32K  256K  8M",
            "      0     0     1  1*     32K  256K  8M",
            "      0     0     2  2* 6M  32K  256K  8M",
            "      0     0     3  7*     32K  256K  8M",
            "  M main lcore, * lcore, x not allowed for this process",
        ])
        self.assertIn("NUMA nodes: none in sysfs (one node, as hwloc assumes)", lines)

    def test_smt_ignored_with_list(self):
        r = run("--root", TWO_S, "-l", "2", "--smt")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("  note      --smt has no effect with -l (lib/eal takes -l as it is)",
                      r.stdout.splitlines())


class Json(unittest.TestCase):
    def test_shape(self):
        d = layout(TWO_S)
        self.assertEqual(set(d), {"root", "model", "summary", "threads_per_core", "cpus",
                                  "kernel_params", "packages", "numa_nodes", "cores", "pus",
                                  "caches", "lcores"})
        self.assertEqual(d["threads_per_core"], 2)
        self.assertEqual(d["cpus"]["online"], list(range(16)))
        self.assertEqual(d["cpus"]["isolated"], [2, 3, 10, 11])
        self.assertEqual(d["cpus"]["nohz_full"], [2, 3, 10, 11])
        self.assertEqual(d["kernel_params"], {"isolcpus": "2-3,10-11", "nohz_full": "2-3,10-11"})
        self.assertEqual([p["cpus"] for p in d["packages"]],
                         [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]])
        self.assertEqual([(n["id"], n["distances"]) for n in d["numa_nodes"]],
                         [(0, [10, 21]), (1, [21, 10])])
        # Core numbering is hwloc's (logical, across packages), not sysfs core_id.
        self.assertEqual([(c["core"], c["core_id"], c["package"], c["cpus"]) for c in d["cores"]],
                         [(i, i % 4, i // 4, [i, i + 8]) for i in range(8)])
        self.assertEqual(len(d["pus"]), 16)
        pu10 = d["pus"][10]
        self.assertEqual(pu10, {"cpu": 10, "core": 2, "core_id": 2, "package": 0, "node": 0,
                                "siblings": [2, 10], "allowed": True, "isolated": True,
                                "nohz_full": True, "lcore": False, "main_lcore": False,
                                "caches": {"L1d": 2, "L1i": 2, "L2": 2, "L3": 0}})
        l3 = [k for k in d["caches"] if k["name"] == "L3"]
        self.assertEqual([(k["index"], k["size"], k["cpus"], k["sharing"]) for k in l3],
                         [(0, 30 << 20, [0, 1, 2, 3, 8, 9, 10, 11], "shared by 4 cores"),
                          (1, 30 << 20, [4, 5, 6, 7, 12, 13, 14, 15], "shared by 4 cores")])
        self.assertEqual(d["lcores"], {"corelist": None, "smt": False,
                                       "lcores": list(range(8)), "list": "0-7",
                                       "main_lcore": 0,
                                       "how": "default: the first allowed CPU of each core",
                                       "warnings": []})

    def test_offline(self):
        d = layout(HOLES)
        self.assertEqual(d["cpus"]["online"], [0, 1, 2, 4, 6, 7])
        self.assertEqual(d["cpus"]["offline"], [3, 5])
        self.assertEqual([c["cpus"] for c in d["cores"]], [[0, 4], [1], [2, 6], [7]])
        self.assertEqual(d["numa_nodes"], [{"id": 0, "cpus": [0, 1, 2, 4, 6, 7],
                                            "mem_kib": None, "distances": []}])


class ReaderGone(unittest.TestCase):
    """`cr-cpu-layout --json | head`: no BrokenPipeError traceback, exit 0."""

    def test_json_and_text(self):
        for args in (["--root", TWO_S, "--json"], ["--root", TWO_S]):
            r = crlive.run_tool_reader_gone("cr-cpu-layout", args, None)
            self.assertEqual((r.returncode, r.stderr), (0, ""), args)


class Selection(unittest.TestCase):
    """The lcores lib/eal would choose: (tree, options) -> (lcores, main lcore)."""

    CASES = [
        (VM2, [], [0, 1], 0),
        (VM2, ["--smt"], [0, 1], 0),
        (VM2, ["-l", "1"], [1], 1),
        (TWO_S, [], list(range(8)), 0),
        (TWO_S, ["--smt"], list(range(16)), 0),
        (TWO_S, ["-l", "8-9"], [8, 9], 8),
        (TWO_S, ["-l", "3,1", "--main-lcore", "3"], [1, 3], 3),
        (TWO_S, ["-l", "1,1,0-1"], [0, 1], 0),
        (TWO_S, ["--allowed", "8-15"], list(range(8, 16)), 8),
        (TWO_S, ["--allowed", "1,2,9", "--smt"], [1, 2, 9], 1),
        (TWO_S, ["--allowed", "1,2,9"], [1, 2], 1),
        (TWO_S, ["--max-lcores", "4"], [0, 1, 2, 3], 0),
        (HOLES, [], [0, 1, 2, 7], 0),
        (HOLES, ["--smt"], [0, 1, 2, 4, 6, 7], 0),
        (HOLES, ["--allowed", "4-7"], [4, 6, 7], 4),
        (HOLES, ["-l", "4,6-7", "--main-lcore", "7"], [4, 6, 7], 7),
    ]

    def test_cases(self):
        for root, args, lcores, main in self.CASES:
            with self.subTest(root=os.path.basename(root), args=args):
                d = layout(root, *args)["lcores"]
                self.assertEqual((d["lcores"], d["main_lcore"]), (lcores, main))

    def test_too_large_warning(self):
        d = layout(TWO_S, "--max-lcores", "4", "--smt")
        self.assertEqual(d["lcores"]["warnings"],
                         ["12 allowed CPUs are above the largest lcore id 3 and left unused "
                          "(build option max_lcores)"])


class UsageErrors(unittest.TestCase):
    """One line on stderr, exit 2, worded as lib/eal words it."""

    CASES = [
        (VM2, ["-l", "0-999"], "-l 0-999: CPU 999 does not exist; this machine has CPUs 0-1"),
        (HOLES, ["-l", "3"], "-l 3: CPU 3 does not exist; this machine has CPUs 0-2,4,6-7"),
        (HOLES, ["-l", "0-5"], "-l 0-5: CPU 5 does not exist; this machine has CPUs 0-2,4,6-7"),
        (HOLES, ["-l", "2-4"], "-l 2-4: CPU 3 does not exist; this machine has CPUs 0-2,4,6-7"),
        (VM2, ["-l", "x"], "-l x: 'x' is not a CPU id; accepted: CPU ids and ranges like 0-3,6"),
        (VM2, ["-l", "3-1"],
         "-l 3-1: range 3-1 is reversed; accepted: CPU ids and ranges like 0-3,6"),
        (VM2, ["-l", "0,,1"],
         "-l 0,,1: empty element at position 3; accepted: CPU ids and ranges like 0-3,6"),
        (VM2, ["-l", "0,"], "-l 0,: trailing ','; accepted: CPU ids and ranges like 0-3,6"),
        (VM2, ["-l", ""], "-l '': empty list; accepted: CPU ids and ranges like 0-3,6"),
        (VM2, ["-l", "1-"], "-l 1-: '1-' is not a CPU range; accepted: CPU ids and ranges "
                            "like 0-3,6"),
        (VM2, ["-l", "0-999,x"], "-l 0-999,x: 'x' is not a CPU id; accepted: CPU ids and "
                                 "ranges like 0-3,6"),
        (VM2, ["-l", "0" * 256], "-l %s: longer than 255 characters; accepted: CPU ids and "
                                 "ranges like 0-3,6" % ("0" * 256)),
        (VM2, ["--allowed", "0", "-l", "1"], "-l 1: CPU 1 is not in the allowed cpuset 0"),
        (TWO_S, ["--max-lcores", "4", "-l", "2-7"],
         "-l 2-7: CPU 4 is above the largest lcore id 3; accepted: CPUs 0-3 "
         "(build option max_lcores)"),
        (TWO_S, ["--max-lcores", "4", "--allowed", "4-7"],
         "lcore selection: every allowed CPU is above the largest lcore id 3; accepted: "
         "CPUs 0-3 (build option max_lcores)"),
        (HOLES, ["--allowed", "3,5"],
         "lcore selection: no CPU of this machine (0-2,4,6-7) is in the allowed cpuset none"),
        (TWO_S, ["--main-lcore", "9"],
         "--main-lcore 9: not in the lcore list 0-7; accepted: one of 0-7"),
        (TWO_S, ["--main-lcore", "-1"],
         "--main-lcore -1: not a CPU id; accepted: a CPU id from the lcore list"),
        (VM2, ["--allowed", "a"],
         "--allowed a: 'a' is not a CPU id; accepted: CPU ids and ranges like 0-3,6"),
        ("/nonexistent", [], "--root /nonexistent: no /nonexistent/sys/devices/system/cpu; "
                             "accepted: / or a copy of its sys/ and proc/"),
    ]

    def test_cases(self):
        for root, args, msg in self.CASES:
            with self.subTest(root=os.path.basename(root), args=args):
                r = run("--root", root, *args)
                self.assertEqual((r.returncode, r.stderr, r.stdout),
                                 (2, "cr-cpu-layout: %s\n" % msg, ""))

    def test_unknown_option(self):
        r = run("--bogus")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "cr-cpu-layout: unrecognized arguments: --bogus; "
                                   "see cr-cpu-layout --help\n")

    def test_missing_value(self):
        r = run("-l")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1)

    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: cr-cpu-layout", r.stdout)
        for opt in ("-l CORELIST", "--smt", "--main-lcore N", "--allowed LIST", "--root DIR",
                    "--json"):
            self.assertIn(opt, r.stdout)


class Corelist(unittest.TestCase):
    """crtopo.corelist_walk() against the reasons lib/eal's cr__corelist_walk() gives."""

    def test_accepted(self):
        self.assertEqual(crtopo.corelist_walk("0-3,6"), [(0, 3), (6, 6)])
        self.assertEqual(crtopo.corelist_walk("007"), [(7, 7)])

    def test_rejected(self):
        for text, why in [("", "empty list"), (",", "empty element at position 1"),
                          ("1,", "trailing ','"), ("-1", "'-1' is not a CPU id"),
                          ("1 ", "'1 ' is not a CPU id"), ("1-2-3", "'1-2-3' is not a CPU range"),
                          ("5-2", "range 5-2 is reversed"),
                          ("0-99999999999", "CPU 99999999999 is above the largest supported "
                                            "id 2147483647"),
                          ("x" * 50, "'%s' is not a CPU id" % ("x" * 40))]:
            with self.subTest(text=text):
                with self.assertRaises(crtopo.UsageError) as cm:
                    crtopo.corelist_walk(text)
                self.assertEqual(str(cm.exception), why)

    def test_kernel_lists(self):
        self.assertEqual(crtopo.parse_kernel_cpulist("0-3,8-11"), {0, 1, 2, 3, 8, 9, 10, 11})
        self.assertEqual(crtopo.parse_kernel_cpulist("(null)\n"), set())
        self.assertEqual(crtopo.parse_kernel_cpulist("0-7:2/4"), {0, 1, 4, 5})
        self.assertEqual(crtopo.parse_kernel_cpulist("2-N", last=5), {2, 3, 4, 5})
        self.assertEqual(crtopo.format_cpulist([6, 0, 1, 2, 3]), "0-3,6")
        self.assertEqual(crtopo.parse_isolcpus("nohz,managed_irq,1-2"),
                         (["nohz", "managed_irq"], {1, 2}))
        self.assertEqual(crtopo.parse_isolcpus("1-2"), (["domain"], {1, 2}))


@unittest.skipIf(shutil.which("lstopo-no-graphics") is None, "hwloc's lstopo is not installed")
class Hwloc(unittest.TestCase):
    """hwloc (what lib/eal uses) reads each fake tree as crtopo does: same PUs, packages,
    NUMA nodes, and cores in the same logical order."""

    def test_fixtures_agree(self):
        for root in (VM2, TWO_S, HOLES):
            with self.subTest(root=os.path.basename(root)):
                hw = crtopo.hwloc_summary(root)
                self.assertIsNotNone(hw, "lstopo-no-graphics cannot read %s" % root)
                self.assertEqual(crtopo.hwloc_disagreements(crtopo.Topology(root), hw), [])


class ThisMachine(unittest.TestCase):
    def test_runs(self):
        d = layout("/")
        self.assertEqual(len(d["cpus"]["online"]), os.cpu_count())
        self.assertEqual(len(d["pus"]), os.cpu_count())
        self.assertEqual(d["cpus"]["allowed"], sorted(os.sched_getaffinity(0)))
        self.assertTrue(d["lcores"]["lcores"])
        if "hwloc" in d:
            self.assertEqual(d["hwloc"]["disagreements"], [])
        r = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("%d CPU" % os.cpu_count(), r.stdout.splitlines()[0])


if __name__ == "__main__":
    unittest.main()
