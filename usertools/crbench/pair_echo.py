# SPDX-License-Identifier: BSD-3-Clause
"""cr-echo vs a minimal liburing loop (the limit) and an epoll loop, messages per server CPU-s.

The C benchmark (cr-bench-core echo): each server a process alone on --server-cpu, the
client (one message in flight per connection over 127.0.0.1) on --client-cpu; --duration
is the measured seconds per server per round, --connections the client connections.
"""
from . import core

PAIRING = "echo"
PACKAGES = []


def run(ctx):
    args = ["--seconds", str(ctx.duration), "--connections", str(ctx.connections)]
    return [core.run_core(ctx, "echo", args, want_json=ctx.want_json)]
