# SPDX-License-Identifier: BSD-3-Clause
"""The pool resized 2 -> 1 -> 2 lcores under load: what it costs the clients.

Modes (rows):
  echo   the C benchmark (cr-bench-core resize): cr-echo on both CPUs under ping-pong
         load from the same two; times to OFFLINE and RUNNING, the dips, reconnects
         (cr-echo's connections do not move: a retire closes them at their boundary)
  http, kv, proxy   cr-http, cr-kv, cr-proxy on both CPUs, this process's own load client
         (crbench/resize_load.py, not wrk) on the client CPU: keep-alive connections, one
         request in flight each; per round the completed requests in 10 ms windows around
         each transition, the connections (and shards) moved, the time from the retire
         request to OFFLINE and from the last connection leaving the lcore to OFFLINE,
         and every client error (disconnects, resets, timeouts, wrong answers such as
         cr-kv's unavailable shard), never hidden. --connections the client's, --runs the
         rounds of each.
"""
from . import core, resize_load

PAIRING = "resize"
PACKAGES = []
MODE_NAMES = ["echo", "http", "kv", "proxy"]
APPS = {"http": "cr-http", "kv": "cr-kv", "proxy": "cr-proxy"}


def run(ctx):
    rows = []
    if ctx.want("echo"):
        args = ["--connections", str(ctx.connections)]
        rows.append(core.run_core(ctx, "resize", args, want_json=ctx.want_json))
    for mode in [m for m in MODE_NAMES[1:] if ctx.want(m)]:
        try:
            path = ctx.app(APPS[mode])
            echo = ctx.app("cr-echo") if mode == "proxy" else None
        except core.NotBuilt as e:
            ctx.log("resize %s: %s (skipped)" % (mode, e))
            continue
        rounds = []
        for k in range(ctx.runs):
            try:
                rounds.append(resize_load.run_round(ctx, mode, path, echo, ctx.connections))
            except (resize_load.ResizeError, OSError) as e:
                raise core.BenchError("resize %s, round %d: %s" % (mode, k + 1, e)) from None
        text = "%s on lcores %d,%d, %d keep-alive connections from this process on CPU %d, " \
               "/pool/resize 2 -> 1 -> 2; %d round(s)\n" % (
                   APPS[mode], ctx.server_cpu, ctx.client_cpu, ctx.connections,
                   ctx.client_cpu, len(rounds))
        for k, r in enumerate(rounds):
            text += "round %d:\n%s" % (k + 1, resize_load.report(r))
        rows.append(core.core_row("resize " + mode, None if ctx.want_json else text,
                                  {"mode": "resize", "app": APPS[mode], "rounds": rounds}
                                  if ctx.want_json else None))
    return rows
