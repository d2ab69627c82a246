# SPDX-License-Identifier: BSD-3-Clause
"""cr-bench resize on cr-http, cr-kv and cr-proxy: its own load client and the timeline.

One round: the app runs on the two CPUs (lcores SERVER and CLIENT, SERVER the main one),
with a telemetry socket of its own; this process, pinned to the client CPU, keeps N
keep-alive connections with one request in flight each (a thread with a selector) and
counts completed requests in 10 ms windows. At 1 s it asks /pool/resize,1 and polls
/lcores and /stats,OTHER every 2 ms until OTHER is OFFLINE, noting when OTHER first holds
no connection (its last one moved or closed: it reached its boundary); once OFFLINE, and
not before 2.5 s, /pool/resize,2 and polls until RUNNING; the round ends 1 s after.

What a round reports:
  to_offline_ms            /pool/resize,1 -> OFFLINE
  boundary_to_offline_ms   the last connection gone from OTHER (net_connections 0 in
                           /stats, polled) -> OFFLINE; null if it never read 0 before
  to_running_ms            /pool/resize,2 -> RUNNING
  moved_connections        connections the main lcore took (its net_moved_in, before and
                           after the shrink); moved_shards the same of app counters named
                           *shards_moved_in (null when the app has none)
  requests, errors         completed requests; errors by kind: eof (the server closed a
                           connection: a disconnect), reset, timeout (no answer in 2 s),
                           refused (a reconnect refused), bad (an answer that is not what
                           was asked: a non-2xx status, an error reply such as cr-kv's
                           unavailable shard, a wrong value), each with a first sample
  series                   completed requests per 10 ms window, from 300 ms before each
                           request to 700 ms after it, for the shrink and the grow

The protocols: cr-http GET /plaintext HTTP/1.1 (200 with a body, keep-alive); cr-kv
SET then GET of a key of the connection's own (RESP; the GET must return what was set, so
a stale read counts as bad), keys spread over every shard; cr-proxy a 64-byte ping-pong
through it to cr-echo (one lcore, on the client CPU). A connection the server closes is
reconnected at once (and counted). The load client shares the two CPUs with the app:
the series shows where requests stop and start again, not a capacity.
"""
import json
import os
import random
import re
import selectors
import socket
import subprocess
import tempfile
import threading
import time

WINDOW_NS = 10 * 1000 * 1000
SHRINK_AT = 1.0
GROW_AT = 2.5
TAIL = 1.0
POLL_S = 0.002
ANSWER_TIMEOUT = 2.0
SERIES_BEFORE, SERIES_AFTER = 30, 70  # windows
ERROR_KINDS = ("eof", "reset", "timeout", "refused", "bad")


class ResizeError(Exception):
    """The round could not be run (the app did not start, never went OFFLINE, ...)."""


# ---- protocols: a request, and how much of the input is one whole answer ----

class Http:
    name = "cr-http"
    REQ = b"GET /plaintext HTTP/1.1\r\nHost: bench\r\n\r\n"

    def __init__(self, i):
        pass

    def request(self):
        return self.REQ

    @staticmethod
    def answer(buf):
        """(bytes of one whole answer, None) or (its length, "what is wrong"); 0: more."""
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return 0, None
        head = bytes(buf[:end])
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        n = end + 4 + (int(m.group(1)) if m else 0)
        if len(buf) < n:
            return 0, None
        status = head[9:12]
        return n, None if status[:1] == b"2" else "status " + status.decode(errors="replace")


class Kv:
    name = "cr-kv"

    def __init__(self, i):
        self.key = b"bench:%d:%d" % (i, random.getrandbits(32))
        self.n = 0
        self.setting = True

    def request(self):
        k = self.key
        if self.setting:
            self.n += 1
            v = b"%d" % self.n
            return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)
        return b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k)

    def answer(self, buf):
        nl = buf.find(b"\r\n")
        if nl < 0:
            return 0, None
        line = bytes(buf[:nl])
        n, body = nl + 2, None
        if line[:1] == b"$" and line != b"$-1":
            size = int(line[1:])
            if len(buf) < n + size + 2:
                return 0, None
            body = bytes(buf[n:n + size])
            n += size + 2
        was_set, self.setting = self.setting, not self.setting
        if line[:1] == b"-":
            return n, line.decode(errors="replace")
        if was_set:
            return n, None if line == b"+OK" else "SET answered %r" % line
        return n, None if body == b"%d" % self.n else "GET answered %r" % (body or line)


class Echo:
    name = "cr-proxy"
    MSG = bytes(range(64))

    def __init__(self, i):
        pass

    def request(self):
        return self.MSG

    def answer(self, buf):
        if len(buf) < len(self.MSG):
            return 0, None
        ok = bytes(buf[:len(self.MSG)]) == self.MSG
        return len(self.MSG), None if ok else "echo differs"


PROTOCOLS = {"http": Http, "kv": Kv, "proxy": Echo}


# ---- the load client ----

class Conn:
    def __init__(self, i, proto):
        self.i = i
        self.proto = proto(i)
        self.sock = None
        self.buf = bytearray()
        self.sent_at = 0.0


class Load(threading.Thread):
    """N connections, one request in flight each; counts answers per 10 ms window."""

    def __init__(self, addr, n, proto, t0_ns, run_s):
        super().__init__(daemon=True)
        self.addr, self.proto, self.t0, self.run_s = addr, proto, t0_ns, run_s
        self.windows = [0] * (int(run_s * 1e9 / WINDOW_NS) + 1)
        self.errors = {k: 0 for k in ERROR_KINDS}
        self.samples = {}
        self.reconnects = 0
        self.stop = threading.Event()
        self.sel = selectors.DefaultSelector()
        self.conns = [Conn(i, proto) for i in range(n)]
        self.failed = None

    def error(self, kind, what):
        self.errors[kind] += 1
        self.samples.setdefault(kind, what)

    def connect(self, c):
        for _ in range(50):
            try:
                s = socket.create_connection(self.addr, timeout=2.0)
                break
            except ConnectionRefusedError as e:
                self.error("refused", str(e))
                time.sleep(0.01)
        else:
            raise ResizeError("cannot connect to %s:%d" % self.addr)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c.sock, c.buf = s, bytearray()
        self.sel.register(s, selectors.EVENT_READ, c)
        self.send(c)

    def drop(self, c, kind, what):
        self.error(kind, what)
        self.sel.unregister(c.sock)
        c.sock.close()
        self.reconnects += 1
        c.proto = self.proto(c.i)
        self.connect(c)

    def send(self, c):
        c.sent_at = time.monotonic()
        try:
            c.sock.sendall(c.proto.request())  # small: the socket takes it at once
        except OSError as e:
            self.drop(c, "reset", repr(e))

    def readable(self, c, now_ns):
        try:
            data = c.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError as e:
            self.drop(c, "reset", repr(e))
            return
        if not data:
            self.drop(c, "eof", "the server closed a connection")
            return
        c.buf += data
        n, bad = c.proto.answer(c.buf)
        if n == 0:
            return
        del c.buf[:n]  # one request in flight: nothing follows its answer
        if bad is not None:
            self.error("bad", bad)
        w = (now_ns - self.t0) // WINDOW_NS
        if 0 <= w < len(self.windows):
            self.windows[w] += 1
        self.send(c)

    def run(self):
        try:
            for c in self.conns:
                self.connect(c)
            end = time.monotonic() + self.run_s + 1.0
            next_check = time.monotonic() + 0.5
            while not self.stop.is_set() and time.monotonic() < end:
                for key, _ in self.sel.select(0.05):
                    self.readable(key.data, time.monotonic_ns())
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + 0.5
                    for c in self.conns:
                        if now - c.sent_at > ANSWER_TIMEOUT:
                            self.drop(c, "timeout", "no answer in %.0f s" % ANSWER_TIMEOUT)
        except (ResizeError, OSError) as e:
            self.failed = str(e)
        finally:
            for c in self.conns:
                if c.sock is not None:
                    c.sock.close()
            self.sel.close()


# ---- the app and its telemetry ----

def telemetry(path, cmd):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5.0)
        s.connect(path)
        s.sendall(cmd.encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])[cmd.split(",")[0]]


def lcore_stats(path, lcore):
    for s in telemetry(path, "/stats,%d" % lcore)["lcores"]:
        if s["lcore"] == lcore:
            return s
    return None


def state(path, lcore):
    for lc in telemetry(path, "/lcores"):
        if lc["lcore"] == lcore:
            return lc["state"]
    return None


def shards_in(stats):
    v = [x for k, x in stats.get("app", {}).items() if k.endswith("shards_moved_in")]
    return sum(v) if v else None


def start(argv, cpus, port, tmp, name):
    log = open(os.path.join(tmp, name + ".log"), "wb")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         preexec_fn=lambda: os.sched_setaffinity(0, cpus),
                         start_new_session=True)
    log.close()
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline:
        if p.poll() is not None:
            with open(os.path.join(tmp, name + ".log"), "rb") as f:
                raise ResizeError("%s exited %d: %s" % (name, p.returncode,
                                                        f.read()[-500:].decode(errors="replace")))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise ResizeError("%s did not listen on port %d" % (name, port))


def stop(p):
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_for(path, lcore, want, t0, deadline_s, on_poll=None):
    """Poll until lcore is in state want; the seconds since t0 when it was seen."""
    while time.monotonic() - t0 < deadline_s:
        if on_poll is not None:
            on_poll()
        if state(path, lcore) == want:
            return time.monotonic() - t0
        time.sleep(POLL_S)
    raise ResizeError("lcore %d not %s within %.0f s" % (lcore, want, deadline_s))


def series(windows, at_s):
    w = int(at_s * 1e9 / WINDOW_NS)
    return windows[max(0, w - SERIES_BEFORE):w + SERIES_AFTER]


def run_round(ctx, which, app_path, echo_path, connections):
    """One round of cr-bench resize on app `which` (http, kv, proxy): a dict of figures."""
    main, other = ctx.server_cpu, ctx.client_cpu
    cpus = {main, other}
    tmp = tempfile.mkdtemp(dir=ctx.tmpdir())
    sock = os.path.join(tmp, "tel.sock")
    port = ctx.free_port()
    procs = []
    mine = os.sched_getaffinity(0)
    try:
        argv = [app_path, "-l", "%d,%d" % (min(cpus), max(cpus)), "--main-lcore", str(main),
                "--telemetry", sock, "--listen", "127.0.0.1:%d" % port] + list(ctx.ours_args)
        if which == "proxy":
            bport = ctx.free_port()
            procs.append(start([echo_path, "-l", str(other), "--listen",
                                "127.0.0.1:%d" % bport, "--telemetry", "off"], {other},
                               bport, tmp, "cr-echo"))
            # Sessions stay on their lcore under its lease until they end; this bounds
            # how long a retire waits for them (then they are closed: disconnects).
            argv += ["--backend", "127.0.0.1:%d" % bport, "--shutdown-timeout", "1",
                     "--check-interval", "0"]
        procs.append(start(argv, cpus, port, tmp, os.path.basename(app_path)))
        time.sleep(0.2)
        os.sched_setaffinity(0, {other})
        before_in = lcore_stats(sock, main)
        t0 = time.monotonic()
        load = Load(("127.0.0.1", port), connections, PROTOCOLS[which], time.monotonic_ns(),
                    GROW_AT + 6.0 + TAIL)
        load.start()
        time.sleep(SHRINK_AT)
        r = {"app": which, "connections": connections}
        emptied = []

        def look():
            s = lcore_stats(sock, other)
            if not emptied and s is not None and s.get("net_connections", 1) == 0:
                emptied.append(time.monotonic() - t0)

        asked = time.monotonic() - t0
        telemetry(sock, "/pool/resize,1")
        off = wait_for(sock, other, "OFFLINE", t0, asked + 15.0, look)
        r["to_offline_ms"] = (off - asked) * 1e3
        r["boundary_to_offline_ms"] = (off - emptied[0]) * 1e3 if emptied else None
        after_in = lcore_stats(sock, main)
        r["moved_connections"] = after_in["net_moved_in"] - before_in["net_moved_in"]
        si, sa = shards_in(before_in), shards_in(after_in)
        r["moved_shards"] = None if si is None or sa is None else sa - si
        time.sleep(max(0.0, GROW_AT - (time.monotonic() - t0)))
        grow = time.monotonic() - t0
        telemetry(sock, "/pool/resize,2")
        on = wait_for(sock, other, "RUNNING", t0, grow + 15.0)
        r["to_running_ms"] = (on - grow) * 1e3
        time.sleep(TAIL)
        load.stop.set()
        load.join(10)
        if load.failed:
            raise ResizeError(load.failed)
        end = int((time.monotonic() - t0) * 1e9 / WINDOW_NS)
        r["requests"] = sum(load.windows[:end])
        r["errors"] = dict(load.errors)
        r["error_samples"] = dict(load.samples)
        r["reconnects"] = load.reconnects
        r["shrink_at_ms"], r["grow_at_ms"] = asked * 1e3, grow * 1e3
        r["series_shrink"] = series(load.windows, asked)
        r["series_grow"] = series(load.windows, grow)
        return r
    finally:
        os.sched_setaffinity(0, mine)
        for p in reversed(procs):
            stop(p)


def report(r):
    """A round as text: the figures, then the two series."""
    errs = ", ".join("%s %d" % (k, v) for k, v in r["errors"].items())
    lines = [
        "  /pool/resize,1 -> OFFLINE          %8.1f ms" % r["to_offline_ms"],
        "  last connection gone -> OFFLINE    %8s ms" % (
            "-" if r["boundary_to_offline_ms"] is None else
            "%.1f" % r["boundary_to_offline_ms"]),
        "  /pool/resize,2 -> RUNNING          %8.1f ms" % r["to_running_ms"],
        "  moved: %d connections, %s shards" % (
            r["moved_connections"], "-" if r["moved_shards"] is None else r["moved_shards"]),
        "  client: %d requests; errors: %s; %d reconnects" % (r["requests"], errs,
                                                              r["reconnects"]),
    ]
    for k, v in r["error_samples"].items():
        lines.append("    first %s: %s" % (k, v))
    for name in ("shrink", "grow"):
        lines.append("  requests per 10 ms, %d ms before to %d ms after the %s request:"
                     % (SERIES_BEFORE * 10, SERIES_AFTER * 10, name))
        s = r["series_" + name]
        for i in range(0, len(s), 20):
            lines.append("    " + " ".join("%5d" % x for x in s[i:i + 20]))
    return "\n".join(lines) + "\n"
