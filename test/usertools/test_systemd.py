#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The apps' systemd units, as this build generates them (build/config/systemd/*.service).

  CR_BUILD  the meson build;  CR_SOURCE  the source tree (for config/systemd/cr-proxy.conf)

For each unit: `systemd-analyze verify` accepts it without a word of warning, its
ExecStart pointed at this build's binary (PID 1 here is not systemd: units are verified,
not started); Type is simple or notify; and the app accepts the command line the unit gives
it (its Environment= OPTIONS expanded, cr-proxy's config file from the tree), checked by
running that command line with --version at the end. A unit with a misspelt directive is
refused by the same check, so the check can fail.
Exits 77 (skip) without systemd-analyze (Debian package systemd; usertools/cr-quickstart
test installs it).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ["CR_BUILD"]
SOURCE = os.environ["CR_SOURCE"]
UNITS = ["cr-echo", "cr-http", "cr-kv", "cr-proxy"]
ANALYZE = shutil.which("systemd-analyze")


def unit_text(name):
    with open(os.path.join(BUILD, "config", "systemd", name + ".service")) as f:
        return f.read()


def exec_start(text):
    m = re.search(r"^ExecStart=(\S+)(.*)$", text, re.M)
    return m.group(1), m.group(2)


def verify(text, tmp, name):
    """systemd-analyze verify of @p text as unit @p name; (ok, output)."""
    path = os.path.join(tmp, name + ".service")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([ANALYZE, "verify", "--man=no", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.returncode == 0 and r.stdout.strip() == "", r.stdout


@unittest.skipIf(ANALYZE is None, "no systemd-analyze")
class Units(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_systemd.")
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for a in UNITS:
            os.symlink(os.path.join(BUILD, "app", a, a), os.path.join(self.bin, a))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def here(self, text):
        """The unit with ExecStart pointed at this build's binary."""
        exe, _ = exec_start(text)
        return text.replace(exe, os.path.join(self.bin, os.path.basename(exe)), 1)

    def test_verify(self):
        for a in UNITS:
            ok, out = verify(self.here(unit_text(a)), self.tmp, a)
            self.assertTrue(ok, "%s: %s" % (a, out))

    def test_type(self):
        for a in UNITS:
            t = re.search(r"^Type=(\S+)$", unit_text(a), re.M).group(1)
            self.assertIn(t, ("simple", "notify"), a)

    def test_bad_unit_is_refused(self):
        text = self.here(unit_text("cr-http")).replace("RuntimeDirectory=", "RuntimeDirectroy=")
        ok, out = verify(text, self.tmp, "cr-http")
        self.assertFalse(ok)
        self.assertIn("RuntimeDirectroy", out)
        text = self.here(unit_text("cr-http")).replace(self.bin, "/nonexistent-bin")
        self.assertFalse(verify(text, self.tmp, "cr-http")[0])

    def test_app_takes_the_command_line(self):
        for a in UNITS:
            text = unit_text(a)
            m = re.search(r'^Environment="OPTIONS=(.*)"$', text, re.M)
            self.assertIsNotNone(m, a)
            _, args = exec_start(text)
            args = args.replace("$OPTIONS", m.group(1))
            args = args.replace("/etc/coreact/", os.path.join(SOURCE, "config", "systemd") + "/")
            argv = [os.path.join(BUILD, "app", a, a)] + shlex.split(args) + ["--version"]
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, "%s: %s" % (" ".join(argv), r.stderr))
            self.assertIn(a + " coreact", r.stdout)


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    if not res.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if ANALYZE is None else 0)
