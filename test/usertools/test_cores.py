#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-cores against the fake sysfs/procfs trees in fixtures/ and this machine.

--apply --yes and --restore only ever run on a copy of a fixture in a temporary directory;
on this machine the tool is only asked for a plan (and refused --apply as a non-root user).
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(TOP, "usertools", "cr-cores")
FIX = os.path.join(HERE, "fixtures")
VM2 = os.path.join(FIX, "vm2")
TWO_S = os.path.join(FIX, "2s-numa-smt")
HOLES = os.path.join(FIX, "holes")
NOBODY = 65534

sys.path.insert(0, HERE)
import crlive  # noqa: E402


def run(*args, python=sys.executable, tool=TOOL, **kw):
    return subprocess.run([python, tool] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60, **kw)


_nobody_tools = []


def nobody_tool():
    """A copy of usertools/ that user nobody can read: the checkout may sit below a
    directory only root can enter (mktemp -d makes them 0700)."""
    if not _nobody_tools:
        top = tempfile.mkdtemp(prefix="cr-cores-ut.")
        os.chmod(top, 0o755)
        dst = os.path.join(top, "usertools")
        shutil.copytree(os.path.dirname(TOOL), dst,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for d, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chmod(os.path.join(d, name), 0o755)
        _nobody_tools.append(top)
    return os.path.join(_nobody_tools[0], "usertools", os.path.basename(TOOL))


def as_nobody():
    """Keyword arguments for run() that drop root, or None if that cannot be done."""
    kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            r = subprocess.run([python, "-c", "import os; print(os.geteuid())"], timeout=60,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **kw)
        except (OSError, subprocess.SubprocessError):
            continue
        if r.returncode == 0 and r.stdout.strip() == str(NOBODY).encode():
            return dict(kw, python=python, tool=nobody_tool())
    return None


def plan(root, *args):
    r = run("--root", root, "--json", *args)
    if r.returncode != 0:
        raise AssertionError("exit %d: %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


def tree_files(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            with open(path) as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out


class Text(unittest.TestCase):
    maxDiff = None

    def test_vm2(self):
        """This machine's shape: the honest 1 + 1 plan."""
        r = run("--root", VM2)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        irqs = [(24, 0, "ACPI:Ged"), (25, 1, "ACPI:Ged"), (26, 13, "ttyS0"),
                (31, 1637, "virtio0-stats"), (32, 0, "virtio0-reporting_vq"),
                (34, 0, "virtio4-input"), (36, 168449, "virtio1-req.0"),
                (38, 411, "virtio2-input.0"), (39, 0, "virtio2-output.0"),
                (41, 0, "virtio3-rx"), (42, 10379, "virtio3-tx")]
        rows = "".join("  %3d  %17d  0-1       0    %s\n" % i for i in irqs)
        self.assertEqual(r.stdout, """\
cr-cores: plan for 1 package, 1 NUMA node, 2 cores, 2 CPUs, 1 thread per core
read from %s

  housekeeping  CPU 0 (core 0): the kernel, IRQs and the main lcore 0
  isolated      CPU 1 (core 1): lcore 1
  app options   -l 0-1

kernel command line (add to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot):
  isolcpus=managed_irq,domain,1  add
  nohz_full=1                    add
  rcu_nocbs=1                    add
  irqaffinity=0                  add
  all at once: isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1 irqaffinity=0

IRQs that can land on isolated CPUs (--apply sets their affinity):
  IRQ  count on isolated  affinity  new  name
%s  default_smp_affinity (IRQs set up later): 3 -> 1

CPU frequency governors: no cpufreq here (a VM, or no cpufreq driver): nothing to set

irqbalance: not running

notes:
  - this machine has 2 CPUs: isolation keeps CPU 0 for the kernel, IRQs and the main lcore, \
so 1 of 2 CPUs runs an undisturbed lcore: isolation halves the cores that lcores have to \
themselves, and buys steadier latency on lcore 1, not throughput
  - this is a VM: the hypervisor still preempts vCPUs; pin them (and keep the host's own \
work off their host CPUs) for isolation to pay off
  - this kernel has no nohz_full (no /sys/devices/system/cpu/nohz_full): it ignores \
nohz_full=, the other parameters still apply
  - once the kernel isolates these CPUs (isolcpus=domain), new processes start on \
housekeeping CPUs only: start the app as `taskset -c 0-1 APP -l 0-1` so that it may pin \
lcores to isolated CPUs
""" % (VM2, rows))

    def test_two_sockets_follows_current_isolation(self):
        """isolcpus/nohz_full already on 2-3,10-11: plan around them, add what is missing."""
        r = run("--root", TWO_S)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, """\
cr-cores: plan for 2 packages, 2 NUMA nodes, 8 cores, 16 CPUs, 2 threads per core
read from %s

  housekeeping  CPUs 0-1,4-9,12-15 (cores 0-1,4-7): the kernel, IRQs and the main lcore 0
  isolated      CPUs 2-3,10-11 (cores 2-3): lcores 2-3
  app options   -l 0,2-3

kernel command line (add to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot):
  isolcpus=managed_irq,domain,2-3,10-11  change (now isolcpus=2-3,10-11)
  nohz_full=2-3,10-11                    ok, already there
  rcu_nocbs=2-3,10-11                    add
  irqaffinity=0-1,4-9,12-15              add
  all at once: isolcpus=managed_irq,domain,2-3,10-11 nohz_full=2-3,10-11 rcu_nocbs=2-3,10-11 \
irqaffinity=0-1,4-9,12-15

IRQs that can land on isolated CPUs (--apply sets their affinity):
  IRQ  count on isolated  affinity   new            name
    8                  0  0-15       0-1,4-9,12-15  rtc0
    9                  0  0-15       0-1,4-9,12-15  acpi
   16                  0  0-15       0-1,4-9,12-15  ehci_hcd:usb1
  120                  0  0-15       0-1,4-9,12-15  nvme0q0
  122               4413  2-3,10-11  0-1,8-9        nvme0q2
  132             100002  2          0-1,8-9        ens1f0-TxRx-2
  133             100003  3          0-1,8-9        ens1f0-TxRx-3
  138                  0  0-15       0-1,4-9,12-15  ens1f0
  default_smp_affinity (IRQs set up later): ffff -> f3f3

CPU frequency governors on lcore CPUs (intel_pstate): CPUs 0,2 powersave -> performance; \
CPU 3 performance already

irqbalance: running (pid 742); it keeps IRQs off the CPUs the kernel isolates (2-3,10-11) by \
itself: leave it

notes:
  - following the kernel's current isolation (2-3,10-11); pass --lcores N or -l LIST to plan \
another set
  - SMT siblings CPUs 10-11 are isolated but run no lcore; --smt puts lcores on them
  - once the kernel isolates these CPUs (isolcpus=domain), new processes start on \
housekeeping CPUs only: start the app as `taskset -c 0,2-3 APP -l 0,2-3` so that it may pin \
lcores to isolated CPUs
""" % TWO_S)

    def test_holes(self):
        """Offline CPUs 3 and 5: left out, and /proc/interrupts columns skip them."""
        r = run("--root", HOLES)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        lines = r.stdout.splitlines()
        for want in [
                "  housekeeping  CPUs 0,4 (core 0): the kernel, IRQs and the main lcore 0",
                "  isolated      CPUs 1-2,6-7 (cores 1-3): lcores 1-2,7",
                "  app options   -l 0-2,7",
                "  irqaffinity=0,4                      add",
                "   12                155  0-7       0,4  i8042",
                "  129              88123  6         0,4  enp0s31f6",
                "  default_smp_affinity (IRQs set up later): ff -> 11",
                "CPU frequency governors on lcore CPUs (acpi-cpufreq): CPUs 0-2,7 schedutil -> "
                "performance",
                "  - SMT sibling CPU 6 is isolated but runs no lcore; --smt puts an lcore on it",
                "  - CPUs 3,5 are offline and left out; bring them online "
                "(/sys/devices/system/cpu/cpuN/online) and run cr-cores again to use them"]:
            self.assertIn(want, lines)


class ReaderGone(unittest.TestCase):
    """`cr-cores | head`: no BrokenPipeError traceback, exit 0."""

    def test_plan(self):
        for args in (["--root", TWO_S], ["--root", TWO_S, "--json"]):
            r = crlive.run_tool_reader_gone("cr-cores", args, None)
            self.assertEqual((r.returncode, r.stderr), (0, ""), args)


class Plans(unittest.TestCase):
    def test_json_shape(self):
        p = plan(TWO_S, "--lcores", "7")
        self.assertEqual(set(p), {"root", "summary", "mode", "housekeeping", "isolated",
                                  "isolated_cores", "lcores", "main_lcore", "app_args",
                                  "taskset", "kernel_cmdline", "nohz_full_supported", "irqs",
                                  "default_smp_affinity", "governors", "irqbalance", "notes",
                                  "actions"})
        self.assertEqual(p["mode"], "count")
        self.assertEqual(p["housekeeping"], [0, 8])
        self.assertEqual(p["isolated"], [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15])
        self.assertEqual(p["lcores"], list(range(8)))
        self.assertEqual((p["main_lcore"], p["app_args"], p["taskset"]),
                         (0, "-l 0-7", "taskset -c 0-7"))
        self.assertEqual([(k["arg"], k["status"]) for k in p["kernel_cmdline"]],
                         [("isolcpus=managed_irq,domain,1-7,9-15", "change"),
                          ("nohz_full=1-7,9-15", "change"), ("rcu_nocbs=1-7,9-15", "add"),
                          ("irqaffinity=0,8", "add")])
        irqs = {r["irq"]: r for r in p["irqs"]}
        self.assertEqual(sorted(irqs), [8, 9, 16, 120, 121, 122, 123, 124] +
                         list(range(131, 139)))
        self.assertEqual(irqs[122], {"irq": 122, "name": "nvme0q2", "count_on_isolated": 4413,
                                     "affinity": "2-3,10-11", "effective": "2", "new": "0,8"})
        # A queue on the other NUMA node has no housekeeping CPU there: all of them.
        self.assertEqual(irqs[135]["new"], "0,8")
        self.assertEqual(p["default_smp_affinity"], {"now": "ffff", "new": "101"})
        self.assertEqual([(g["cpu"], g["new"]) for g in p["governors"]],
                         [(0, "performance"), (1, "performance"), (2, "performance"),
                          (3, None), (4, "performance"), (5, "performance"),
                          (6, "performance"), (7, "performance")])
        # The kernel does not isolate 1, 4-9...: irqbalance would undo the IRQ affinity.
        self.assertTrue(p["irqbalance"]["stop"])
        self.assertEqual(p["irqbalance"]["pids"], [742])
        self.assertEqual(p["actions"][0], {"kind": "stop", "service": "irqbalance",
                                           "pids": [742], "systemd": False})
        self.assertEqual(len(p["actions"]), 1 + 16 + 1 + 7)

    def test_cases(self):
        """(tree, options) -> housekeeping, isolated, app options."""
        cases = [
            (VM2, [], [0], [1], "-l 0-1"),
            (VM2, ["--lcores", "1", "--smt"], [0], [1], "-l 0-1"),
            (VM2, ["-l", "1"], [0], [1], "-l 1"),
            (TWO_S, ["--lcores", "2"], [0, 1, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15],
             [2, 3, 10, 11], "-l 0,2-3"),
            (TWO_S, ["--lcores", "3", "--smt"], [0, 4, 5, 6, 7, 8, 12, 13, 14, 15],
             [1, 2, 3, 9, 10, 11], "-l 0-3,9-11"),
            (TWO_S, ["--housekeeping", "2"], [0, 4, 8, 12],
             [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15], "-l 0-3,5-7"),
            (TWO_S, ["--housekeeping-cpus", "12", "--lcores", "1"],
             [0, 1, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15], [2, 10], "-l 0,2"),
            (TWO_S, ["-l", "2-5", "--main-lcore", "3"], [0, 1, 6, 7, 8, 9, 14, 15],
             [2, 3, 4, 5, 10, 11, 12, 13], "-l 2-5 --main-lcore 3"),
            (TWO_S, ["-l", "0-1"], [0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15], [1, 9],
             "-l 0-1"),
            (HOLES, [], [0, 4], [1, 2, 6, 7], "-l 0-2,7"),
            (HOLES, ["--smt"], [0, 4], [1, 2, 6, 7], "-l 0-2,6-7"),
            (HOLES, ["--housekeeping-cpus", "7"], [7], [0, 1, 2, 4, 6],
             "-l 0-2,7 --main-lcore 7"),
        ]
        for root, args, hk, isolated, app in cases:
            with self.subTest(root=os.path.basename(root), args=args):
                p = plan(root, *args)
                self.assertEqual((p["housekeeping"], p["isolated"], p["app_args"]),
                                 (hk, isolated, app))

    def test_kernel_already_isolating_keeps_irqbalance(self):
        p = plan(TWO_S, "--lcores", "2")
        self.assertFalse(p["irqbalance"]["stop"])
        self.assertNotIn("stop", [a["kind"] for a in p["actions"]])


class UsageErrors(unittest.TestCase):
    CASES = [
        (TWO_S, ["-l", "x"],
         "cr-cores: -l x: 'x' is not a CPU id; accepted: CPU ids and ranges like 0-3,6"),
        (TWO_S, ["-l", "0-99"],
         "cr-cores: -l 0-99: CPU 99 does not exist; this machine has CPUs 0-15"),
        (HOLES, ["-l", "3"],
         "cr-cores: -l 3: CPU 3 does not exist; this machine has CPUs 0-2,4,6-7"),
        (TWO_S, ["-l", "0,8"], "cr-cores: -l 0,8: every lcore is on a housekeeping core (0,8); "
                               "accepted: CPUs outside 0,8"),
        (TWO_S, ["-l", "2-3", "--main-lcore", "9"],
         "cr-cores: --main-lcore 9: not in the lcore list 2-3; accepted: one of 2-3"),
        (TWO_S, ["--lcores", "8"], "cr-cores: --lcores 8: not a number of cores this machine "
                                   "can give; accepted: 1-7"),
        (TWO_S, ["--lcores", "0"], "cr-cores: --lcores 0: not a number of cores this machine "
                                   "can give; accepted: 1-7"),
        (VM2, ["--lcores", "x"], "cr-cores: --lcores x: not a number of cores this machine "
                                 "can give; accepted: 1"),
        (TWO_S, ["--housekeeping", "8"], "cr-cores: --housekeeping 8: not a number of cores "
                                         "this machine can give; accepted: 1-7"),
        (TWO_S, ["--housekeeping-cpus", "16"], "cr-cores: --housekeeping-cpus 16: CPU 16 does "
                                               "not exist; this machine has CPUs 0-15"),
        (VM2, ["--housekeeping-cpus", "0-1"], "cr-cores: --housekeeping-cpus 0-1: leaves no "
                                              "core to isolate; accepted: CPUs of at most 1 "
                                              "cores"),
    ]

    def test_cases(self):
        for root, args, msg in self.CASES:
            with self.subTest(root=os.path.basename(root), args=args):
                r = run("--root", root, *args)
                self.assertEqual((r.returncode, r.stderr, r.stdout), (2, msg + "\n", ""))

    def test_argparse_errors(self):
        for args in (["--bogus"], ["-l", "1", "--lcores", "1"], ["--yes"],
                     ["--main-lcore", "1"], ["--restore", "--lcores", "1"],
                     ["--housekeeping", "1", "--housekeeping-cpus", "0"], ["-l"]):
            with self.subTest(args=args):
                r = run("--root", VM2, *args)
                self.assertEqual(r.returncode, 2)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertTrue(r.stderr.startswith("cr-cores: "), r.stderr)

    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for opt in ("--lcores N", "-l CORELIST", "--housekeeping N", "--apply", "--yes",
                    "--restore", "--state PATH", "--root DIR", "--json"):
            self.assertIn(opt, r.stdout)


class Apply(unittest.TestCase):
    """--apply on a copy of a fixture: dry run, --yes, --restore."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cr-cores-test.")
        self.root = os.path.join(self.tmp, "root")
        shutil.copytree(TWO_S, self.root)
        self.state = os.path.join(self.root, "var/lib/coreact/cr-cores.state")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def read(self, rel):
        with open(os.path.join(self.root, rel)) as f:
            return f.read().strip()

    def test_dry_run_changes_nothing(self):
        before = tree_files(self.root)
        r = run("--root", self.root, "--lcores", "7", "--apply")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(tree_files(self.root), before)
        out = r.stdout.splitlines()
        start = out.index("--apply, dry run (add --yes to make these changes; the previous "
                          "values go to %s):" % self.state)
        acts = out[start + 1:]
        self.assertEqual(acts[0], "  stop irqbalance: kill 742")
        self.assertIn("  write %s/proc/irq/122/smp_affinity_list 0,8 (now 2-3,10-11)"
                      % self.root, acts)
        self.assertIn("  write %s/proc/irq/default_smp_affinity 101 (now ffff)" % self.root, acts)
        self.assertIn("  write %s/sys/devices/system/cpu/cpu7/cpufreq/scaling_governor "
                      "performance (now powersave)" % self.root, acts)
        self.assertEqual(len([a for a in acts if a.startswith("  write ")]), 24)
        self.assertEqual(acts[-1], "the kernel command line is never changed by cr-cores: add "
                                   "to GRUB_CMDLINE_LINUX in /etc/default/grub, run "
                                   "update-grub, reboot")

    def test_apply_then_restore(self):
        before = tree_files(self.root)
        r = run("--root", self.root, "--lcores", "7", "--apply", "--yes")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.read("proc/irq/122/smp_affinity_list"), "0,8")
        self.assertEqual(self.read("proc/irq/135/smp_affinity_list"), "0,8")
        self.assertEqual(self.read("proc/irq/0/smp_affinity_list"), "0")
        self.assertEqual(self.read("proc/irq/default_smp_affinity"), "101")
        self.assertEqual(self.read("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"),
                         "performance")
        self.assertEqual(self.read("sys/devices/system/cpu/cpu9/cpufreq/scaling_governor"),
                         "powersave")
        self.assertIn("  done: stop irqbalance: kill 742 (not run: --root is not /)",
                      r.stdout.splitlines())
        with open(self.state) as f:
            state = json.load(f)
        self.assertEqual(state["root"], os.path.realpath(self.root))
        self.assertEqual(len(state["writes"]), 24)
        self.assertIn({"path": "proc/irq/122/smp_affinity_list", "value": "2-3,10-11"},
                      state["writes"])
        self.assertEqual(state["stopped"], [{"service": "irqbalance", "systemd": False}])

        # A second apply with another plan keeps the first originals.
        r = run("--root", self.root, "--lcores", "1", "--apply", "--yes")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        with open(self.state) as f:
            self.assertIn({"path": "proc/irq/122/smp_affinity_list", "value": "2-3,10-11"},
                          json.load(f)["writes"])

        r = run("--root", self.root, "--restore")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn("  done: write %s/proc/irq/122/smp_affinity_list 2-3,10-11" % self.root,
                      r.stdout.splitlines())
        self.assertFalse(os.path.exists(self.state))
        after = tree_files(self.root)
        self.assertEqual(after, before)

        r = run("--root", self.root, "--restore")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "cr-cores: --restore: no state file %s (nothing was applied, "
                                   "or it was restored already)\n" % self.state)

    def test_state_option(self):
        state = os.path.join(self.tmp, "elsewhere.state")
        r = run("--root", self.root, "--apply", "--yes", "--state", state)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(os.path.exists(state))
        self.assertFalse(os.path.exists(self.state))
        self.assertIn("undo with: cr-cores --restore --root %s --state %s" % (self.root, state),
                      r.stdout.splitlines())
        r = run("--root", self.root, "--restore", "--state", state)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(filecmp.cmp(os.path.join(self.root, "proc/irq/122/smp_affinity_list"),
                                    os.path.join(TWO_S, "proc/irq/122/smp_affinity_list"),
                                    shallow=False))

    def test_failed_write(self):
        """A write refused (EACCES here, EIO for a kernel-managed IRQ): the others still
        happen, exit 1, the state file stays for --restore."""
        target = os.path.join(self.root, "proc/irq/132/smp_affinity_list")
        kw = {}
        if os.geteuid() == 0:
            # Root writes anything: let nobody own the tree but this one file.
            kw = as_nobody()
            if kw is None:
                self.skipTest("cannot run a Python as user nobody")
            os.chmod(self.tmp, 0o755)
            for d, dirs, files in os.walk(self.root):
                for name in dirs + files:
                    os.chown(os.path.join(d, name), NOBODY, NOBODY)
            os.chown(self.root, NOBODY, NOBODY)
            os.chown(target, 0, 0)
        os.chmod(target, 0o444)
        r = run("--root", self.root, "--apply", "--yes", **kw)
        self.assertEqual(r.returncode, 1)
        failed = [line for line in r.stdout.splitlines() if line.startswith("  FAILED: ")]
        self.assertEqual(failed, ["  FAILED: write %s 0-1,8-9 (now 2): Permission denied"
                                  % target])
        self.assertEqual(self.read("proc/irq/133/smp_affinity_list"), "0-1,8-9")
        # What was not changed is not in the state, so --restore does not fail on it.
        with open(self.state) as f:
            saved = [w["path"] for w in json.load(f)["writes"]]
        self.assertIn("proc/irq/133/smp_affinity_list", saved)
        self.assertNotIn("proc/irq/132/smp_affinity_list", saved)

    def test_json_apply(self):
        r = run("--root", self.root, "--apply", "--yes", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        p = json.loads(r.stdout)
        self.assertTrue(p["applied"])
        self.assertEqual(p["state"], self.state)
        self.assertTrue(all(res["ok"] for res in p["results"]))
        self.assertEqual(len(p["results"]), len(p["actions"]))


class ThisMachine(unittest.TestCase):
    def test_plan_runs(self):
        r = run("--json")
        if os.cpu_count() == 1:
            self.assertEqual(r.returncode, 1)
            return
        self.assertEqual(r.returncode, 0, r.stderr)
        p = json.loads(r.stdout)
        self.assertEqual(len(p["housekeeping"]) + len(p["isolated"]), os.cpu_count())
        self.assertIn(p["main_lcore"], p["lcores"])
        r = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("%d CPU" % os.cpu_count(), r.stdout.splitlines()[0])

    def test_apply_needs_root(self):
        """Run as an unprivileged user (nobody when the tests run as root)."""
        kw = {}
        if os.geteuid() == 0:
            kw = as_nobody()
            if kw is None:
                self.skipTest("cannot run a Python as user nobody")
        for args in (["--apply"], ["--apply", "--yes"], ["--restore"]):
            with self.subTest(args=args):
                r = run(*args, **kw)
                self.assertEqual((r.returncode, r.stdout, r.stderr),
                                 (1, "", "cr-cores: %s needs root (it writes "
                                         "/proc/irq/*/smp_affinity_list and cpufreq "
                                         "governors)\n" % args[0]))


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        for top in _nobody_tools:
            shutil.rmtree(top, ignore_errors=True)
