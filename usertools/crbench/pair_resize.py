# SPDX-License-Identifier: BSD-3-Clause
"""cr-echo resized 2 -> 1 -> 2 lcores under ping-pong load: time to OFFLINE and RUNNING, dips.

The C benchmark (cr-bench-core resize): cr-echo on both CPUs, the client on the same two;
/pool/resize,1 then /pool/resize,2 on its telemetry socket; --connections the client's.
"""
from . import core

PAIRING = "resize"
PACKAGES = []


def run(ctx):
    args = ["--connections", str(ctx.connections)]
    return [core.run_core(ctx, "resize", args, want_json=ctx.want_json)]
