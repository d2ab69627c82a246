#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""meson install: what lands where, and that the installed usertools run from there.

  CR_BUILD  the meson build to install (into a private DESTDIR, never the system)

Checked: the five usertools are commands in the bindir (symlinks into
datadir/coreact/usertools, where their modules are), cr-quickstart and the C benchmark
are not, cr-bench-core and the http pairing's limit are in libexecdir/coreact, no private
header (*_internal.h) is installed; from the staged bindir, cr-telemetry, cr-top, cr-cores,
cr-cpu-layout and cr-bench answer --help, `cr-bench handoff` runs the installed C benchmark,
and `cr-bench http` (a 1 s run, when wrk and nginx are here) the installed cr-http and limit.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ["CR_BUILD"]
CMDS = ["cr-telemetry", "cr-top", "cr-cpu-layout", "cr-cores", "cr-bench"]
STAGE = None
PREFIX = None


def setUpModule():
    global STAGE, PREFIX
    STAGE = tempfile.mkdtemp(prefix="test_install.")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", STAGE, "--quiet",
                        "--no-rebuild"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("meson install failed:\n" + r.stdout)
    with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
        opts = {o["name"]: o["value"] for o in json.load(f)}
    PREFIX = STAGE + opts["prefix"]
    PREFIX_OPTS.update(opts)


def tearDownModule():
    shutil.rmtree(STAGE, ignore_errors=True)


PREFIX_OPTS = {}


def path(opt, *rest):
    return os.path.join(PREFIX, PREFIX_OPTS[opt], *rest)


def run(cmd, *args, timeout=60):
    return subprocess.run([path("bindir", cmd)] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


class Layout(unittest.TestCase):
    def test_commands(self):
        share = path("datadir", "coreact", "usertools")
        for c in CMDS:
            link = path("bindir", c)
            self.assertTrue(os.path.islink(link), link)
            # Relative, so that a staged tree works as well as the installed one.
            self.assertFalse(os.readlink(link).startswith("/"), os.readlink(link))
            self.assertEqual(os.path.realpath(link), os.path.join(share, c))
            self.assertTrue(os.access(os.path.join(share, c), os.X_OK))
        for mod in ("crtopo.py", "crpaths.py", "crbench/core.py", "crbench/pair_http.py",
                    "crbench/pair_handoff.py", "crbench/pipeline.lua"):
            self.assertTrue(os.path.isfile(os.path.join(share, mod)), mod)
        self.assertFalse(os.path.exists(path("bindir", "cr-quickstart")))

    def test_every_crbench_module(self):
        # Every module of the source's crbench package is installed (a new one that the
        # install list missed broke every installed cr-bench at its import).
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                           "usertools", "crbench")
        share = path("datadir", "coreact", "usertools", "crbench")
        for f in sorted(os.listdir(src)):
            if f.endswith((".py", ".lua")):
                self.assertTrue(os.path.isfile(os.path.join(share, f)), f)

    def test_benchmarks_in_libexec(self):
        for exe in ("cr-bench-core", "cr-bench-http-limit"):
            self.assertTrue(os.access(path("libexecdir", "coreact", exe), os.X_OK), exe)
        # cr-bench is the usertool; the C benchmark is not a command of its own.
        self.assertEqual(os.path.realpath(path("bindir", "cr-bench")),
                         path("datadir", "coreact", "usertools", "cr-bench"))

    def test_no_private_header(self):
        headers = glob.glob(path("includedir", "**", "*.h"), recursive=True)
        self.assertTrue(headers)
        for h in headers:
            self.assertFalse(h.endswith("_internal.h"), h)
            self.assertTrue(os.path.basename(h).startswith("cr_"), h)


class Run(unittest.TestCase):
    def test_help(self):
        for c in CMDS:
            r = run(c, "--help")
            self.assertEqual(r.returncode, 0, "%s: %s" % (c, r.stderr))
            self.assertIn("usage", r.stdout.lower())
        self.assertIn("handoff (", run("cr-bench", "--help").stdout)

    def test_cpu_layout_json(self):
        r = run("cr-cpu-layout", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        json.loads(r.stdout)

    def test_bench_handoff_installed(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU only")
        r = run("cr-bench", "handoff", "--no-install", "--", "--messages", "1000",
                timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("running the installed binaries (%s, %s)"
                      % (path("bindir"), path("libexecdir", "coreact")), r.stdout)
        self.assertIn("cr_send", r.stdout)

    def test_bench_http_installed(self):
        if shutil.which("wrk") is None or not (shutil.which("nginx") or
                                               os.access("/usr/sbin/nginx", os.X_OK)):
            self.skipTest("wrk or nginx absent")
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU only")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "b.json")
            r = run("cr-bench", "http", "--no-install", "--duration", "1", "--runs", "1",
                    "--connections", "8", "--json", out, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                doc = json.load(f)
        self.assertEqual(doc["settings"]["buildtype"], "installed")
        names = {(x["ours_name"], x["peer_name"]) for x in doc["rows"]}
        self.assertIn(("cr-http", "nginx"), names)
        for x in doc["rows"]:
            if x["ours_name"] == "cr-http":
                self.assertGreater(x["ours"]["requests"], 0, x)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
