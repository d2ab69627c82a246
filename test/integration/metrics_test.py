#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every app's Prometheus text, checked by promtool and by the naming rules we keep.

  metrics_test.py EXE APP [--driver uring|epoll]

APP is hello, echo, http, kv or proxy. The app runs with --metrics 127.0.0.1:0 on
loopback, gets some real traffic, and /metrics is scraped. Then:
  - `promtool check metrics` (Debian's prometheus package) accepts the text, lint included;
  - names follow the rules: a unit is a suffix (no _ns/_ms/_us, bytes only as _bytes or
    _bytes_total), no status class in a name (one metric with a code label instead);
  - coreact_lcore_state is 0/1 per state label, exactly one 1 per lcore, RUNNING here;
  - the process_* metrics are there and plausible;
  - the app's own series count what the traffic did (http: responses by code and the
    request-time histogram; proxy: the connect-time histogram and per-backend series; kv:
    the commands counted, keys and memory per shard where the SETs put them, the
    command-time histogram growing by the commands run);
  with --busy instead: a start that fails on --metrics or --telemetry gives a true hint
  and prints no totals.
Exit 0 pass, 1 fail, 77 skip (no promtool, or a client tool missing).
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import kv_test
from started import Failure, Started, WAIT, check, round_trip

SKIP = 77


# ---- the app ----

class App(Started):
    def __init__(self, exe, driver, extra, listens):
        argv = [exe, "--io-driver", driver, "--metrics", "127.0.0.1:0", "--telemetry",
                "off"] + extra
        super().__init__(argv, [rb"metrics on"] + ([rb"listening on"] if listens else []))
        m = re.search(rb"metrics on (http://\S+/metrics)", self.out)
        check(m, "no metrics address in %r" % self.out)
        self.metrics = m.group(1).decode()

    def scrape(self):
        with urllib.request.urlopen(self.metrics, timeout=WAIT) as r:
            check(r.status == 200, "GET /metrics: %d" % r.status)
            return r.read().decode()


# ---- the text ----

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{name: type} and [(name, {labels}, value)]."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            check(m, "not a sample: %r" % line)
            labels = dict(LABEL.findall(m.group(3) or ""))
            samples.append((m.group(1), labels, float(m.group(4))))
    return types, samples


def values(samples, name, **want):
    return [v for n, labels, v in samples
            if n == name and all(labels.get(k) == w for k, w in want.items())]


def total(samples, name, **want):
    got = values(samples, name, **want)
    check(got, "no sample %s%r" % (name, want))
    return sum(got)


def promtool(text):
    exe = shutil.which("promtool")
    r = subprocess.run([exe, "check", "metrics"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=WAIT)
    check(r.returncode == 0 and r.stdout.strip() == "",
          "promtool check metrics: rc %d:\n%s" % (r.returncode, r.stdout))


def naming_rules(types):
    for name in types:
        check(not re.search(r"_[1-5]xx(_|$)", name),
              "%s: a status class in a name (use a code label)" % name)
        check(not re.search(r"_(ns|us|ms|nanoseconds|microseconds|milliseconds)(_total)?$",
                            name), "%s: not a base unit" % name)
        if "bytes" in name:
            check(re.search(r"_bytes(_total)?$", name),
                  "%s: bytes is a unit, so it is the suffix" % name)
        if types[name] == "counter":
            check(name.endswith("_total"), "%s: a counter without _total" % name)


def lcore_states(samples):
    lcores = {}
    for n, labels, v in samples:
        if n == "coreact_lcore_state":
            check(v in (0, 1), "state value %r: %r" % (v, labels))
            lcores.setdefault(labels["lcore"], {})[labels["state"]] = v
    check(lcores, "no coreact_lcore_state")
    for lc, states in lcores.items():
        check(sorted(states) == ["OFFLINE", "RETIRING", "RUNNING", "STARTING"],
              "lcore %s states %r" % (lc, states))
        check(sum(states.values()) == 1 and states["RUNNING"] == 1,
              "lcore %s: %r" % (lc, states))
    return len(lcores)


def process_metrics(types, samples, app):
    for name, kind in [("process_cpu_seconds_total", "counter"),
                       ("process_resident_memory_bytes", "gauge"),
                       ("process_virtual_memory_bytes", "gauge"),
                       ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
                       ("process_start_time_seconds", "gauge")]:
        check(types.get(name) == kind, "%s: %r" % (name, types.get(name)))
    check(total(samples, "process_resident_memory_bytes") > 1 << 20, "RSS under 1 MiB")
    fds = len(os.listdir("/proc/%d/fd" % app.proc.pid))
    check(abs(total(samples, "process_open_fds") - fds) <= 4,
          "open fds %r, /proc says %d" % (total(samples, "process_open_fds"), fds))
    start = total(samples, "process_start_time_seconds")
    check(abs(start - app.started) < 5, "start time %.1f, started %.1f" % (start, app.started))


def histogram(types, samples, name, count):
    check(types.get(name) == "histogram", "%s: %r" % (name, types.get(name)))
    n = total(samples, name + "_count")
    check(n == count, "%s_count %r, want %r" % (name, n, count))
    inf = values(samples, name + "_bucket", le="+Inf")
    check(inf == [n], "%s +Inf bucket %r" % (name, inf))
    check(total(samples, name + "_sum") >= 0, name + "_sum")
    return n


# ---- traffic per app ----

def drive_hello(app):
    return {}


def drive_echo(app):
    for i in range(5):
        round_trip(app.port, b"x" * 1000, "cr-echo")
    return {}


def http_get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return int(buf.split(b" ", 2)[1])


def drive_http(app):
    for _ in range(20):
        check(http_get(app.port, "/plaintext") == 200, "/plaintext")
    check(http_get(app.port, "/nothing-here") == 404, "404")
    return {"ok": 20, "missing": 1}


def check_http(types, samples, seen):
    check(total(samples, "coreact_http_responses_total", code="2xx") == seen["ok"],
          "2xx: %r" % values(samples, "coreact_http_responses_total", code="2xx"))
    check(total(samples, "coreact_http_responses_total", code="4xx") == seen["missing"],
          "4xx")
    check(total(samples, "coreact_http_requests_total") == seen["ok"] + seen["missing"],
          "requests")
    histogram(types, samples, "coreact_http_request_duration_seconds",
              seen["ok"] + seen["missing"])


def resp(port, *cmds):
    """Send RESP commands on one connection; return the raw replies."""
    out = b"".join(b"*%d\r\n" % len(c) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in c)
                   for c in cmds)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(out)
        buf = b""
        deadline = time.monotonic() + WAIT
        while buf.count(b"\r\n") < len(cmds) and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf


def kv_shards(app):
    m = re.search(rb", (\d+) shards?,", app.out)
    check(m, "no shard count in %r" % app.out)
    return int(m.group(1))


def kv_per_shard(samples, name, n):
    got = {int(l["shard"]): v for m, l, v in samples if m == name}
    check(sorted(got) == list(range(n)), "%s shards %r, want 0..%d" % (name, got, n - 1))
    return [got[i] for i in range(n)]


def drive_kv(app):
    cmds = [(b"SET", b"key:%d" % i, b"v" * 100) for i in range(40)]
    cmds += [(b"GET", b"key:%d" % i) for i in range(10)]
    resp(app.port, *cmds)
    n = kv_shards(app)
    want = [0] * n
    for i in range(40):
        want[kv_test.key_shard("key:%d" % i, n)] += 1
    # The keys are published at each shard's 100 ms tick: scrape until they are in.
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        _, samples = parse(app.scrape())
        if kv_per_shard(samples, "coreact_kv_keys", n) == want:
            break
        time.sleep(0.05)
    return {"commands": len(cmds), "keys": want, "more": [(b"GET", b"nokey")] * 7}


def check_kv(types, samples, seen, app):
    n = len(seen["keys"])
    check(total(samples, "coreact_app_kv_commands_total") == seen["commands"],
          "commands: %r" % values(samples, "coreact_app_kv_commands_total"))
    keys = kv_per_shard(samples, "coreact_kv_keys", n)
    check(keys == seen["keys"], "keys per shard %r, the SETs put %r" % (keys, seen["keys"]))
    mem = kv_per_shard(samples, "coreact_kv_memory_bytes", n)
    # Each key holds a 100-byte value: at least that much per key, and INFO's used_memory
    # is the same counters summed.
    check(all(m >= k * 100 for m, k in zip(mem, keys)), "memory per shard %r for keys %r"
          % (mem, keys))
    with socket.create_connection(("127.0.0.1", app.port), timeout=WAIT) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        info = b""
        while not re.match(rb"\$(\d+)\r\n", info) or len(info) < int(info[1:info.index(b"\r")]):
            chunk = s.recv(65536)
            check(chunk, "INFO memory: closed after %r" % info)
            info += chunk
    used = int(re.search(rb"used_memory:(\d+)", info).group(1))
    check(sum(mem) == used, "memory per shard %r sum to %d, INFO used_memory %d"
          % (mem, sum(mem), used))
    before = histogram(types, samples, "coreact_kv_command_duration_seconds",
                       seen["commands"])
    # It grows by the commands run (the INFO above and these 7 GETs of a missing key,
    # each reply one line, so resp() returns once all of them are answered).
    resp(app.port, *seen["more"])
    types, samples = parse(app.scrape())
    histogram(types, samples, "coreact_kv_command_duration_seconds",
              before + 1 + len(seen["more"]))


class Backend:
    """A TCP echo backend on 127.0.0.1."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.port = self.s.getsockname()[1]
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=self.echo, args=(c,), daemon=True).start()

    @staticmethod
    def echo(c):
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                c.sendall(d)


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now: connects are refused
    return port


def drive_proxy(app):
    for _ in range(6):
        round_trip(app.port, b"y" * 500, "cr-proxy")
    # The server side closes after the client side: wait until no session is left.
    deadline = time.monotonic() + WAIT
    while True:
        _, samples = parse(app.scrape())
        if sum(values(samples, "coreact_proxy_backend_sessions")) == 0:
            break
        check(time.monotonic() < deadline, "sessions still open after %.0f s" % WAIT)
        time.sleep(0.05)
    return {"sessions": 6, "bytes": 6 * 500}


def check_proxy(types, samples, seen, good, dead):
    histogram(types, samples, "coreact_proxy_connect_duration_seconds", seen["sessions"])
    g, d = "127.0.0.1:%d" % good, "127.0.0.1:%d" % dead
    check(total(samples, "coreact_proxy_backend_up", backend=g) == 1, "good backend up")
    check(total(samples, "coreact_proxy_backend_up", backend=d) == 0, "dead backend down")
    check(total(samples, "coreact_proxy_backend_connections_total", backend=g) ==
          seen["sessions"], "connections")
    # Marked down by the checks before any session, so no session tried it.
    check(total(samples, "coreact_proxy_backend_connect_failures_total", backend=d) == 0,
          "connect failures")
    check(total(samples, "coreact_proxy_backend_sent_bytes_total", backend=g) == seen["bytes"],
          "sent bytes")
    check(total(samples, "coreact_proxy_backend_received_bytes_total", backend=g) ==
          seen["bytes"], "received bytes")
    check(total(samples, "coreact_proxy_backend_sessions", backend=g) == 0, "sessions now")
    for b, want in ((g, "up"), (d, "down")):
        states = {lab["state"]: v for n, lab, v in samples
                  if n == "coreact_proxy_backend_check_state" and lab["backend"] == b}
        check(sorted(states) == ["down", "falling", "rising", "unchecked", "up"] and
              sum(states.values()) == 1 and states[want] == 1, "%s check state %r" % (b, states))


def wait_dead_marked(app, dead):
    """The checks mark the dead backend down within a few intervals."""
    deadline = time.monotonic() + WAIT
    while True:
        text = app.scrape()
        _, samples = parse(text)
        if values(samples, "coreact_proxy_backend_up", backend="127.0.0.1:%d" % dead) == [0]:
            return
        check(time.monotonic() < deadline, "the dead backend was never marked down")
        time.sleep(0.1)


def start_fails(exe, app, extra):
    """Start @p exe with @p extra; it must fail: (exit status, stdout, stderr)."""
    base = {"hello": ["--laps", "1"], "proxy": ["--listen", "127.0.0.1:0", "--backend",
                                                "127.0.0.1:9"]}.get(
        app, ["--listen", "127.0.0.1:0"])
    r = subprocess.run([exe] + base + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=WAIT)
    return r.returncode, r.stdout, r.stderr


def test_busy(exe, app):
    """--metrics on an address another process holds: exit 1, the hint says what helps
    (not --telemetry off, which was given), and no totals of a run that never started;
    a telemetry socket that cannot be made: the hint is --telemetry off."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    addr = "127.0.0.1:%d" % taken.getsockname()[1]
    rc, out, err = start_fails(exe, app, ["--telemetry", "off", "--metrics", addr])
    taken.close()
    check(rc == 1, "exit %d with --metrics %s taken: %r" % (rc, addr, err))
    check("--metrics %s: cannot listen: Address already in use" % addr in err, err)
    check("; another --metrics port (0: the kernel picks one) or no --metrics runs without "
          "it\n" in err, "no true hint: %r" % err)
    check("--telemetry off" not in err, "a hint to give --telemetry off, which was: %r" % err)
    check("stopped" not in out, "totals after a failed start: %r" % out)
    rc, out, err = start_fails(exe, app, ["--telemetry", "/nonexistent-dir/t.sock"])
    check(rc == 1 and "; --telemetry off runs without the socket\n" in err,
          "socket failure: %d %r" % (rc, err))
    check("stopped" not in out, "totals after a failed start: %r" % out)
    print("%s: the hints are true, no totals after a failed start" % app)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("app", choices=["hello", "echo", "http", "kv", "proxy"])
    ap.add_argument("--driver", default="uring", choices=["uring", "epoll"])
    ap.add_argument("--busy", action="store_true",
                    help="instead: a taken --metrics address and a bad --telemetry path")
    a = ap.parse_args()
    if a.busy:
        try:
            test_busy(a.exe, a.app)
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
        return 0
    if shutil.which("promtool") is None:
        print("SKIP: no promtool (Debian package prometheus; usertools/cr-quickstart test "
              "installs it)")
        return SKIP
    extra, good, dead = [], None, None
    if a.app == "hello":
        extra = ["-q", "--run-for", "0"]
    elif a.app in ("echo", "http", "kv"):
        extra = ["--listen", "127.0.0.1:0"]
        if a.app == "kv":  # keys on known shards: kv_test.key_shard() places them
            extra += ["--hash-seed", kv_test.HASH_SEED]
    else:
        backend, dead = Backend(), dead_port()
        good = backend.port
        extra = ["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:%d" % good,
                 "--backend", "127.0.0.1:%d" % dead, "--check-interval", "0.1", "--fall", "1"]
    app = App(a.exe, a.driver, extra, a.app != "hello")
    try:
        if a.app == "proxy":
            wait_dead_marked(app, dead)
        seen = globals()["drive_" + a.app](app)
        text = app.scrape()
        types, samples = parse(text)
        promtool(text)
        naming_rules(types)
        n = lcore_states(samples)
        process_metrics(types, samples, app)
        if a.app == "http":
            check_http(types, samples, seen)
        elif a.app == "kv":
            check_kv(types, samples, seen, app)
        elif a.app == "proxy":
            check_proxy(types, samples, seen, good, dead)
        app.stop()
        print("%s: promtool clean, %d families, %d samples, %d lcores"
              % (a.app, len(types), len(samples), n))
    except Failure as e:
        if app.proc.poll() is None:
            app.proc.kill()
        print("FAIL: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
