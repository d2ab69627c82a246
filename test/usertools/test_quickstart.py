#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""usertools/cr-quickstart run: builds (a no-op on the built tree given by CR_BUILD_DIR),
starts cr-http on loopback, shows a request served; --once stops it, otherwise it serves
until interrupted, and an interrupt stops it gracefully. Plus its usage errors (exit 2)."""
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TOOL = os.path.join(os.environ["CR_USERTOOLS"], "cr-quickstart")
BUILD = os.environ["CR_BUILD_DIR"]


class Quickstart(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cr-quickstart-")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.dir)

    def tearDown(self):
        for root, dirs, files in os.walk(self.dir, topdown=False):
            for f in files:
                os.unlink(os.path.join(root, f))
            for d in dirs:
                os.rmdir(os.path.join(root, d))
        os.rmdir(self.dir)

    def test_usage(self):
        r = subprocess.run([sys.executable, TOOL], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("accepted: run, test", r.stderr)
        r = subprocess.run([sys.executable, TOOL, "run", "--help"], stdout=subprocess.PIPE,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("--once", r.stdout)
        self.assertIn("cr-http", r.stdout)

    def test_run_once(self):
        r = subprocess.run([sys.executable, TOOL, "--build-dir", BUILD, "run", "--once",
                            "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout)
        out = r.stdout
        self.assertIn("cr-http: listening on 127.0.0.1:", out)
        self.assertIn("HTTP/1.1 200 OK", out)
        self.assertIn("Server: coreact", out)
        self.assertIn("\nHello, World!\n", out)
        self.assertIn("cr-http: stopped: 1 requests", out)

    def test_run_until_interrupted(self):
        p = subprocess.Popen([sys.executable, TOOL, "--build-dir", BUILD, "run", "--listen",
                              "127.0.0.1:0"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=self.env)
        out = b""
        deadline = time.monotonic() + 120
        try:
            while b"Ctrl-C stops it" not in out:
                left = deadline - time.monotonic()
                self.assertGreater(left, 0, out)
                self.assertIsNone(p.poll(), out)
                r, _, _ = select.select([p.stdout], [], [], left)
                if r:
                    out += os.read(p.stdout.fileno(), 65536)
            self.assertIn(b"Hello, World!", out)
            time.sleep(0.3)
            self.assertIsNone(p.poll(), "stopped by itself: %r" % out)
            p.send_signal(signal.SIGINT)
            rest, _ = p.communicate(timeout=30)
            out += rest
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn(b"cr-http: stopped: 1 requests", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
