# SPDX-License-Identifier: BSD-3-Clause
"""Shared by the integration tests of the sample apps (echo_test.py, http_test.py,
kv_test.py, proxy_test.py, hostile_*_test.py): whether the io driver a test asks for can
run here, and what a process holds (fds, RSS) before and after an attack.

A test of a driver this kernel refuses (io_uring missing, kernel.io_uring_disabled, a
seccomp filter) is skipped, exit 77 (Meson's skip), rather than failed: the app's own
--version says which driver --io-driver would get, or why none.
"""
import os
import socket
import subprocess

SKIP = 77


def driver_refused(exe, driver):
    """None when `exe --io-driver DRIVER` can run here, else the app's reason."""
    if driver in (None, "auto"):
        return None
    r = subprocess.run([exe, "--io-driver", driver, "--version"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    for line in r.stdout.splitlines():
        if line.startswith("io driver: none"):
            return line[len("io driver: none"):].lstrip(": ")
    return None


def fds_of(pid):
    """How many file descriptors process @p pid has open."""
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    """The resident set of process @p pid, in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def skip_if_refused(exe, driver, log):
    """SKIP (77) after one line saying why when the driver is refused, else None."""
    why = driver_refused(exe, driver)
    if why is None:
        return None
    log("SKIP: --io-driver %s cannot run here: %s" % (driver, why))
    return SKIP


def free_port():
    """A port of 127.0.0.1 free a moment ago, for a peer that cannot bind port 0 itself
    (nginx): the caller retries with another if it was taken meanwhile."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
