#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-quickstart package: the .deb, installed, serves a request.

  CR_USERTOOLS  the usertools directory

Builds the package as a user would (a release build for /usr in a fresh build directory,
meson install, dpkg-deb), checks its control data and contents, installs it with dpkg into
a private root (--root with its own database; --force-depends, since that database has
none of the system's packages: the libraries themselves come from this machine), then runs
the installed cr-http from there on 127.0.0.1 with an ephemeral port and gets
/plaintext, runs the installed usertools, and removes the package again. The system's
own dpkg database and /usr are never touched. .ci/run installs the package for real.
"""
import glob
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

USERTOOLS = os.environ["CR_USERTOOLS"]
TMP = None
DEB = None
ROOT = None


def sh(*argv, timeout=120, ok=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if ok and r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s" % (" ".join(argv), r.returncode, r.stdout))
    return r


def setUpModule():
    global TMP, DEB, ROOT
    TMP = tempfile.mkdtemp(prefix="test_package.")
    sh(sys.executable, os.path.join(USERTOOLS, "cr-quickstart"), "--build-dir",
       os.path.join(TMP, "build-deb"), "package", "--output", TMP, timeout=1500)
    debs = glob.glob(os.path.join(TMP, "coreact_*.deb"))
    if len(debs) != 1:
        raise AssertionError("no single .deb in %s: %r" % (TMP, debs))
    DEB = debs[0]
    ROOT = os.path.join(TMP, "root")
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        os.makedirs(os.path.join(ROOT, d))
    open(os.path.join(ROOT, "var/lib/dpkg/status"), "w").close()


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def dpkg(*args):
    return sh("dpkg", "--root=" + ROOT, "--force-depends", "--force-not-root", *args)


class Package(unittest.TestCase):
    def test_control(self):
        info = sh("dpkg-deb", "--info", DEB).stdout
        self.assertIn("Package: coreact", info)
        self.assertRegex(info, r"Version: \d+\.\d+\.\d+")
        dep = re.search(r"Depends: (.*)", info).group(1)
        for pkg in ("liburing2", "libhwloc15", "python3", "libc6"):
            self.assertIn(pkg, dep)
        self.assertIn("/etc/coreact/cr-proxy.conf", sh("dpkg-deb", "-I", DEB,
                                                         "conffiles").stdout)

    def test_contents(self):
        listing = sh("dpkg-deb", "--contents", DEB).stdout
        for f in ("./usr/bin/cr-http", "./usr/bin/cr-kv", "./usr/bin/cr-proxy",
                  "./usr/bin/cr-echo", "./usr/libexec/coreact/cr-bench-core",
                  "./usr/lib/systemd/system/cr-http.service",
                  "./usr/share/coreact/usertools/cr-bench", "./etc/coreact/cr-proxy.conf",
                  "./usr/share/doc/coreact/copyright"):
            self.assertIn(f, listing)
        self.assertIn("./usr/bin/cr-bench -> ../share/coreact/usertools/cr-bench", listing)
        self.assertNotRegex(listing, r"_internal\.h")
        self.assertNotIn("cr-quickstart", listing)
        self.assertRegex(listing, r"root/root\s+\d+ .* \./usr/bin/cr-http")


def threads(pid):
    """Where each thread of @p pid waits, and its descriptors: for a start that hangs."""
    def read(path):
        with open(path) as f:
            return f.read().strip()

    try:
        t = ["%s %s %s" % (tid, read("/proc/%d/task/%s/comm" % (pid, tid)),
                           read("/proc/%d/task/%s/wchan" % (pid, tid)))
             for tid in sorted(os.listdir("/proc/%d/task" % pid))]
        fds = [os.readlink("/proc/%d/fd/%s" % (pid, f)) for f in os.listdir("/proc/%d/fd" % pid)]
        return "threads: %s; fds: %s" % ("; ".join(t), fds)
    except OSError as e:
        return "(gone: %s)" % e


class Installed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        dpkg("-i", DEB)

    @classmethod
    def tearDownClass(cls):
        dpkg("-r", "coreact")
        if os.path.exists(os.path.join(ROOT, "usr/bin/cr-http")):
            raise AssertionError("dpkg -r left /usr/bin/cr-http")

    def test_status(self):
        self.assertIn("Status: install ok installed", dpkg("-s", "coreact").stdout)

    def test_unit_points_at_usr_bin(self):
        with open(os.path.join(ROOT, "usr/lib/systemd/system/cr-http.service")) as f:
            self.assertRegex(f.read(), r"(?m)^ExecStart=/usr/bin/cr-http ")

    def test_usertools_run(self):
        for c in ("cr-telemetry", "cr-top", "cr-cpu-layout", "cr-cores", "cr-bench"):
            r = sh(os.path.join(ROOT, "usr/bin", c), "--help")
            self.assertIn("usage", r.stdout.lower())

    def test_cr_http_serves(self):
        exe = os.path.join(ROOT, "usr/bin/cr-http")
        p = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--telemetry", "off"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, deadline = b"", time.monotonic() + 20
            while b"listening on" not in out and p.poll() is None:
                left = deadline - time.monotonic()
                r = select.select([p.stdout], [], [], max(left, 0))[0]
                if not r:
                    break
                out += os.read(p.stdout.fileno(), 4096)
            m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", out)
            if m is None:
                self.fail("no ready line after 20 s: %r; %s" % (out, threads(p.pid)))
            with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=20) as s:
                s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                buf = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
            self.assertTrue(buf.startswith(b"HTTP/1.1 200 OK\r\n"), buf)
            self.assertTrue(buf.endswith(b"Hello, World!"), buf)
        finally:
            p.send_signal(signal.SIGINT)
            p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
