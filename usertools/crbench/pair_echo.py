# SPDX-License-Identifier: BSD-3-Clause
"""cr-echo vs a minimal liburing loop (the limit) and an epoll loop, messages per server CPU-s.

The C benchmark (cr-bench-core echo): each server a process alone on --server-cpu, the
client (one message in flight per connection over 127.0.0.1) on --client-cpu; --duration
is the measured seconds per server per round, --connections the client connections.

With --baseline-build DIR (a build of the baseline commit, e.g. 9825665 for issue 16's
target: git worktree add /tmp/base 9825665 && meson setup /tmp/base/build
-Dbuildtype=release /tmp/base && ninja -C /tmp/base/build app/cr-echo/cr-echo), a second
row "64k": 64 KiB messages, where DIR's cr-echo, ours and ours with --zero-copy take turns
in the same rounds (interleaved) beside the two loops, and the report gives ours / the
baseline's per server-CPU-second.
"""
import os

from . import core

PAIRING = "echo"
PACKAGES = []
BIG = 64 * 1024


def run(ctx):
    args = ["--seconds", str(ctx.duration), "--connections", str(ctx.connections)]
    rows = [core.run_core(ctx, "echo", args, want_json=ctx.want_json)]
    if ctx.baseline_build is not None:
        base = os.path.join(ctx.baseline_build, "app", "cr-echo", "cr-echo")
        if not os.access(base, os.X_OK):
            raise core.BenchError("--baseline-build %s: no %s" % (ctx.baseline_build, base))
        rows.append(core.run_core(ctx, "echo", args + ["--message-size", str(BIG)],
                                  want_json=ctx.want_json,
                                  env_extra={"CR_BENCH_ECHO_BASE": base}))
    return rows
