# SPDX-License-Identifier: BSD-3-Clause
"""The harness of usertools/cr-bench: pinned processes, server CPU time, wrk, rows.

A pairing module (crbench/pair_<name>.py) exposes PAIRING, PACKAGES and run(ctx) -> rows;
ctx is a Ctx below. Everything here is the Python 3 standard library.

  ctx.root, ctx.build_dir             repo root; a release build of coreact (both None
                                      when cr-bench runs installed: ctx.installed)
  ctx.server_cpu, ctx.client_cpu      the server's CPU and the load generator's
  ctx.duration, ctx.runs, ctx.connections
  ctx.app(name) -> path               build_dir/app/NAME/NAME (or any build_dir/app/*/NAME),
                                      installed: the bindir or libexecdir/coreact;
                                      raises NotBuilt (a FileNotFoundError) if absent
  ctx.core_args                       extra words for the C benchmark (after '--')
  ctx.free_port() -> int
  ctx.spawn(argv, cpu, env=None, cwd=None) -> Proc   pinned to cpu; .pid .argv .stop()
  ctx.wait_port(port, host="127.0.0.1", timeout=10.0)
  ctx.cpu_seconds(pid) -> float       utime+stime of the whole process (every thread)
  ctx.measure(proc, load) -> dict     load() -> {"requests", "rps", "p50_us", "p99_us", ...};
                                      adds "cpu_s" and "per_cpu_s" (requests / server cpu s)
  ctx.wrk(url, connections, duration, script=None) -> dict   wrk pinned to client_cpu
  ctx.tmpdir() -> str                 a fresh directory, removed at exit
  row(pairing, mode, ours_name, ours, peer_name, peer) -> dict   adds ratio_rps and
                                      ratio_per_cpu (ours / peer; None if either is missing)
Extras: ctx.median(results) (field-wise median of measure() dicts, raw runs kept under
"runs"), ctx.log(msg), BenchError (a failure the CLI prints as one line, exit 1).
"""
import atexit
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
# The numeric fields median() takes the median of; anything else is kept from run 0.
NUMERIC = ("requests", "rps", "p50_us", "p99_us", "avg_us", "max_us", "cpu_s", "per_cpu_s", "wall_s",
           "cpu_util", "errors", "non_2xx")


class BenchError(Exception):
    """A failure worth one line: what failed and the value or output that shows it."""


class NotBuilt(FileNotFoundError):
    """ctx.app(name) found no such executable in the build directory."""


def _pin(cpu):
    def pre():
        os.sched_setaffinity(0, {cpu})
    return pre


class Proc:
    """A child process pinned to one CPU, its output in a log file; stop() ends it."""

    def __init__(self, argv, cpu, env, cwd, logdir):
        self.argv = [str(a) for a in argv]
        self.cpu = cpu
        fd, self.log_path = tempfile.mkstemp(prefix=os.path.basename(self.argv[0]) + ".",
                                             suffix=".log", dir=logdir)
        with os.fdopen(fd, "wb") as logf:
            try:
                self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                              stdout=logf, stderr=subprocess.STDOUT,
                                              env=env, cwd=cwd, preexec_fn=_pin(cpu),
                                              start_new_session=True)
            except OSError as e:
                raise BenchError("cannot start %s: %s" % (self.argv[0], e)) from None
        self.pid = self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def output(self, limit=2000):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def stop(self, timeout=5.0):
        """SIGTERM, then SIGKILL after @timeout s; returns the exit status."""
        if self.popen.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode


class Ctx:
    def __init__(self, root, build_dir, server_cpu, client_cpu, duration=5, runs=3,
                 connections=64, verbose=False, out=sys.stdout, installed=None):
        self.root = root
        self.build_dir = build_dir
        # Installed: {"bindir": ..., "libexecdir": ...}, where the binaries are.
        self.installed = installed
        self.core_args = []
        # Extra options for our apps (cr-http, cr-kv, cr-proxy), e.g. --idle-spin 0.
        self.ours_args = []
        self.server_cpu = server_cpu
        self.client_cpu = client_cpu
        self.duration = duration
        self.runs = runs
        self.connections = connections
        # --modes: the only modes (rows) to run, or None for every one.
        self.modes = None
        # --baseline-build: a build of the baseline commit (its app/cr-echo/cr-echo), or None.
        self.baseline_build = None
        self.verbose = verbose
        self.out = out
        self._procs = []
        self._top = None
        atexit.register(self.close)

    def want(self, mode):
        """True when mode (a pairing's row name, e.g. 'plain' or 'get P1') is to run."""
        return self.modes is None or mode in self.modes

    # ---- output ----
    def log(self, msg):
        print("cr-bench: " + msg, file=self.out, flush=True)

    def debug(self, msg):
        if self.verbose:
            self.log(msg)

    # ---- files and processes ----
    def _topdir(self):
        if self._top is None:
            self._top = tempfile.mkdtemp(prefix="cr-bench.")
        return self._top

    def tmpdir(self):
        return tempfile.mkdtemp(dir=self._topdir())

    def app(self, name):
        if self.installed is not None:
            for d in (self.installed["bindir"], self.installed["libexecdir"]):
                path = os.path.join(d, name)
                if os.path.isfile(path) and os.access(path, os.X_OK):
                    return path
            raise NotBuilt("%s not installed: not in %s or %s"
                           % (name, self.installed["bindir"], self.installed["libexecdir"]))
        path = os.path.join(self.build_dir, "app", name, name)
        if os.access(path, os.X_OK):
            return path
        appdir = os.path.join(self.build_dir, "app")
        if os.path.isdir(appdir):
            for d in sorted(os.listdir(appdir)):
                p = os.path.join(appdir, d, name)
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
        raise NotBuilt("%s not built: no %s" % (name, path))

    def free_port(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def spawn(self, argv, cpu, env=None, cwd=None):
        p = Proc(argv, cpu, env, cwd, self._topdir())
        self._procs.append(p)
        self.debug("started %s (pid %d, cpu %d)" % (" ".join(p.argv), p.pid, cpu))
        return p

    def wait_port(self, port, host="127.0.0.1", timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((host, port), timeout=1.0):
                    return
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise BenchError("nothing accepts on %s:%d after %.1f s: %s"
                                     % (host, port, timeout, e)) from None
            time.sleep(0.05)

    def close(self):
        for p in reversed(self._procs):
            p.stop()
        self._procs = []
        if self._top is not None:
            shutil.rmtree(self._top, ignore_errors=True)
            self._top = None

    # ---- measuring ----
    @staticmethod
    def cpu_seconds(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
        except OSError as e:
            raise BenchError("cannot read /proc/%d/stat: %s" % (pid, e)) from None
        # The fields after "(comm)": state is field 3, utime 14 and stime 15 (proc(5)).
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def measure(self, proc, load):
        pid = proc.pid if isinstance(proc, Proc) else int(proc)
        if isinstance(proc, Proc) and not proc.alive():
            raise BenchError("%s exited (status %s) before the load: %s"
                             % (proc.argv[0], proc.popen.returncode, proc.output()))
        c0, t0 = self.cpu_seconds(pid), time.monotonic()
        res = dict(load())
        c1, t1 = self.cpu_seconds(pid), time.monotonic()
        res["cpu_s"] = c1 - c0
        res["wall_s"] = t1 - t0
        res["cpu_util"] = res["cpu_s"] / res["wall_s"] if res["wall_s"] > 0 else 0.0
        res["per_cpu_s"] = res["requests"] / res["cpu_s"] if res["cpu_s"] > 0 else 0.0
        if isinstance(proc, Proc) and not proc.alive():
            raise BenchError("%s exited (status %s) during the load: %s"
                             % (proc.argv[0], proc.popen.returncode, proc.output()))
        return res

    @staticmethod
    def median(results):
        """Field-wise median of measure() dicts; the raw dicts are kept under "runs"."""
        if not results:
            return None
        out = dict(results[0])
        for k in NUMERIC:
            vals = [r[k] for r in results if isinstance(r.get(k), (int, float))]
            if vals:
                out[k] = statistics.median(vals)
        out["runs"] = list(results)
        return out

    def wrk(self, url, connections, duration, script=None):
        exe = shutil.which("wrk")
        if exe is None:
            raise BenchError("wrk not found in PATH (Debian package wrk)")
        argv = [exe, "-t1", "-c%d" % connections, "-d%ds" % duration, "--latency"]
        if script is not None:
            argv += ["-s", script]
        argv.append(url)
        self.debug("load: " + " ".join(argv))
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, preexec_fn=_pin(self.client_cpu),
                               timeout=duration + 30)
        except subprocess.TimeoutExpired:
            raise BenchError("wrk did not finish within %d s: %s" % (duration + 30, url)) \
                from None
        if r.returncode != 0:
            raise BenchError("wrk exited %d: %s" % (r.returncode, r.stdout.strip()))
        return parse_wrk(r.stdout)


_UNIT_US = {"us": 1.0, "ms": 1000.0, "s": 1e6, "m": 60e6, "h": 3600e6}


def _us(value, unit):
    return round(float(value) * _UNIT_US[unit], 3)


def parse_wrk(text):
    """The figures of wrk --latency output: requests, rps, p50_us, p99_us, avg_us, max_us,
    errors (socket errors), non_2xx.

    With pipelining wrk records one latency per batch and its coordinated-omission
    correction then adds samples below the minimum that its percentile walk never reaches:
    the high percentiles come out as 0.00us and the others are ranked against a count that
    includes the lost samples. If any percentile printed is 0, p50_us and p99_us are both
    None (unknown), never 0; avg_us and max_us (one sample per batch) stay.
    """
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", text, re.M)
    rps = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M)
    p50 = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
    p99 = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
    lat = re.search(r"^\s*Latency\s+([\d.]+)(us|ms|s|m|h)\s+[\d.]+\w+\s+([\d.]+)(us|ms|s|m|h)",
                    text, re.M)
    if not (m and rps and p50 and p99 and lat):
        raise BenchError("cannot read wrk's output: %s" % text.strip()[-600:])
    pcts = re.findall(r"^\s*\d+%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
    broken = any(_us(*p) == 0 for p in pcts)
    res = {"requests": int(m.group(1)), "load_s": _us(m.group(2), m.group(3)) / 1e6,
           "rps": float(rps.group(1)), "p50_us": None if broken else _us(*p50.groups()),
           "p99_us": None if broken else _us(*p99.groups()), "avg_us": _us(*lat.group(1, 2)),
           "max_us": _us(*lat.group(3, 4)), "errors": 0, "non_2xx": 0}
    e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                  text)
    if e:
        res["errors"] = sum(int(x) for x in e.groups())
    n = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if n:
        res["non_2xx"] = int(n.group(1))
    return res


def _ratio(a, b, key):
    if not a or not b or not b.get(key):
        return None
    return a[key] / b[key]


def row(pairing, mode, ours_name, ours, peer_name, peer):
    """One line of the table: @ours and @peer are measure()/median() dicts, or None."""
    return {"pairing": pairing, "mode": mode,
            "ours_name": ours_name, "ours": ours,
            "peer_name": peer_name, "peer": peer,
            "ratio_rps": _ratio(ours, peer, "rps"),
            "ratio_per_cpu": _ratio(ours, peer, "per_cpu_s")}


def core_row(pairing, report, figures):
    """A row of the C benchmark (cr-bench-core): its own report as text, or with --json
    the figures it printed as one JSON object."""
    return {"pairing": pairing, "mode": "core", "report": report, "figures": figures}


def run_core(ctx, mode, args=(), want_json=False, env_extra=None):
    """Run cr-bench-core MODE on the client and server CPUs (the client is its main lcore,
    the server the other one), cr-echo given by path, @p env_extra added to its
    environment; @return a core_row()."""
    import json
    exe = ctx.app("cr-bench-core")
    argv = [exe, mode, "-l", "%d,%d" % (ctx.client_cpu, ctx.server_cpu),
            "--main-lcore", str(ctx.client_cpu)] + list(args) + list(ctx.core_args)
    if want_json:
        argv.append("--json")
    env = dict(os.environ)
    try:
        env["CR_BENCH_ECHO"] = ctx.app("cr-echo")
    except NotBuilt:
        pass
    env.update(env_extra or {})
    ctx.debug("running " + " ".join(argv))
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env)
    if r.returncode != 0:
        raise BenchError("cr-bench-core %s exited %d: %s" % (
            mode, r.returncode, (r.stderr.strip() or r.stdout.strip())[-2000:]))
    if not want_json:
        return core_row(mode, r.stdout, None)
    try:
        return core_row(mode, None, json.loads(r.stdout))
    except ValueError:
        raise BenchError("cr-bench-core %s --json printed no JSON: %r" % (mode, r.stdout[:300]))
