# SPDX-License-Identifier: BSD-3-Clause
"""Shared by the usertools tests: a live cr-hello with its telemetry socket in a private
runtime directory, the tools as modules, and running a tool with a bounded time.

Environment (set by test/usertools/meson.build): CR_HELLO, the cr-hello binary;
CR_USERTOOLS, the usertools directory.
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
USERTOOLS = os.environ.get("CR_USERTOOLS",
                           os.path.join(os.path.dirname(os.path.dirname(HERE)), "usertools"))
CR_HELLO = os.environ.get("CR_HELLO", "")
TOOL_TIMEOUT = 20


def tool_path(name):
    return os.path.join(USERTOOLS, name)


def load_tool(name):
    """A usertools script (no .py suffix) as a module, without running its main()."""
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), tool_path(name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run_tool(name, args, env, stdin=None, timeout=TOOL_TIMEOUT):
    """Run a tool to completion; returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, tool_path(name)] + list(args), env=env,
                          input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def have_app():
    return bool(CR_HELLO) and os.access(CR_HELLO, os.X_OK)


class LiveApp:
    """cr-hello running for a bounded time with XDG_RUNTIME_DIR in a fresh 0700 directory,
    so the tools find exactly the apps a test started."""

    def __init__(self, run_for=30, extra=(), runtime_dir=None):
        self.own_dir = runtime_dir is None
        self.runtime_dir = runtime_dir or tempfile.mkdtemp(prefix="cr-usertools-")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.runtime_dir)
        self.env.pop("TMUX", None)
        self.log_path = os.path.join(self.runtime_dir, "cr-hello.%d.log" % time.monotonic_ns())
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [CR_HELLO, "-q", "--run-for", str(run_for)] + list(extra), env=self.env,
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self.socket = os.path.join(self.runtime_dir, "coreact", "cr-hello.%d.sock" % self.pid)
        self._wait_ready(15.0)

    def _wait_ready(self, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("cr-hello exited with %s:\n%s"
                                   % (self.proc.returncode, self.output()))
            if os.path.exists(self.socket):
                try:
                    self.request("/info")
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("cr-hello did not serve %s within %.0f s" % (self.socket, limit))

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def request(self, cmd, timeout=5.0):
        """One request over a fresh connection; the decoded reply."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket)
            s.sendall(cmd.encode() + b"\n")
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("connection closed")
                buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])

    def stop(self, timeout=15.0):
        """SIGTERM, then wait (bounded); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        self.log.close()
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)


class OnTerminal:
    """A tool run with a pseudo-terminal as stdin, stdout and stderr (what a person at a
    terminal gives it): expect() waits for text, send() types a line. Bounded waits."""

    def __init__(self, name, args, env, rows=30, cols=110):
        import fcntl
        import pty
        import struct
        import termios
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = dict(env, TERM="xterm")
        self.proc = subprocess.Popen([sys.executable, tool_path(name)] + list(args), env=env,
                                     stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.text = ""

    def expect(self, needle, timeout=TOOL_TIMEOUT):
        import select
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %r on the terminal within %.0f s; it shows:\n%s"
                                     % (needle, timeout, self.text))
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the tool exited: EIO on the master
                    chunk = b""
                if not chunk:
                    if self.proc.poll() is not None and needle not in self.text:
                        raise AssertionError("the tool exited (%r) before %r; it showed:\n%s"
                                             % (self.proc.returncode, needle, self.text))
                    time.sleep(0.05)
                self.text += chunk.decode(errors="replace")
        return self.text

    def send(self, line):
        os.write(self.master, line.encode() + b"\r")

    def wait(self, timeout=TOOL_TIMEOUT):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            os.close(self.master)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_tool_reader_gone(name, args, env):
    """Run tool @p name with a stdout whose reader is already gone (`| head` that has
    what it wanted): its first write fails with EPIPE. @p env None: ours."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, tool_path(name)] + list(args), env=env,
                              stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=TOOL_TIMEOUT)
    finally:
        os.close(w)
