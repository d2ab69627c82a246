# SPDX-License-Identifier: BSD-3-Clause
"""cr_io_relay (splice through pooled pipes) vs a copying relay (cr_io_recv + cr_io_send),
CPU seconds per GB of a one-way relay.

The C benchmark (cr-bench-core relay): the relay on the server CPU's lcore, the sender and
the sink threads on --client-cpu, over 127.0.0.1; --duration is the seconds per round
(3 rounds each way, taking turns). The relay's CPU includes io_uring's worker threads.
"""
from . import core

PAIRING = "relay"
PACKAGES = []


def run(ctx):
    return [core.run_core(ctx, "relay", ["--seconds", str(ctx.duration)],
                          want_json=ctx.want_json)]
