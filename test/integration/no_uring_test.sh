#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# With io_uring refused by seccomp: --io-driver auto falls back to epoll with one warning
# and works (cr-hello runs, cr-echo echoes); --io-driver uring exits 2 saying io_uring was
# refused and why.
set -u
no_uring=$1 hello=$2 echo=$3
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

timeout 30 "$no_uring" "$hello" --laps 2 -q >"$out" 2>"$err" || fail "cr-hello (auto) exited $?"
grep -q "io driver epoll" "$out" || fail "auto did not fall back to epoll"
[ "$(grep -c "io_uring unavailable" "$err")" = 1 ] || fail "expected exactly one warning line"
grep -q "2 laps done, stopped cleanly" "$out" || fail "cr-hello did not run on epoll"

# cr-echo itself on epoll under the same filter: it serves, and echoes what it gets.
"$no_uring" "$echo" --listen 127.0.0.1:0 --telemetry off >"$out" 2>"$err" &
pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { kill $pid; fail "cr-echo did not start under seccomp"; }
grep -q "io driver epoll" "$out" || { kill $pid; fail "cr-echo did not fall back to epoll"; }
reply=$(python3 -c "
import socket,sys
s=socket.create_connection(('127.0.0.1',$port),timeout=5)
s.sendall(b'ping over epoll')
print(s.recv(100).decode())" 2>&1)
kill -TERM $pid
wait $pid
[ "$reply" = "ping over epoll" ] || fail "cr-echo on epoll echoed '$reply'"

timeout 30 "$no_uring" "$echo" --io-driver uring --listen 127.0.0.1:0 >"$out" 2>"$err"
rc=$?
[ $rc = 2 ] || fail "--io-driver uring under seccomp exited $rc, want 2"
grep -q "io_uring was refused" "$err" || fail "no message saying io_uring was refused"
grep -q "Operation not permitted" "$err" || fail "the message does not say why"
echo "PASS no_uring"
