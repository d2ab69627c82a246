# SPDX-License-Identifier: BSD-3-Clause
"""cr_send vs a raw SPSC rte_ring: throughput, round trip, wake latency, start+stop, idle CPU.

The C benchmark (cr-bench-core handoff) in one process: the main lcore on --client-cpu,
the other on --server-cpu. Its report has the raw ring's figure, ours and the ratio.
"""
from . import core

PAIRING = "handoff"
PACKAGES = []


def run(ctx):
    return [core.run_core(ctx, "handoff", want_json=ctx.want_json)]
