#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# With io_uring refused by seccomp: --io-driver auto falls back to epoll with one warning
# and works; --io-driver uring exits 2 saying io_uring was refused and why.
set -u
no_uring=$1 hello=$2 echo=$3
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

timeout 30 "$no_uring" "$hello" --laps 2 -q >"$out" 2>"$err" || fail "cr-hello (auto) exited $?"
grep -q "io driver epoll" "$out" || fail "auto did not fall back to epoll"
[ "$(grep -c "io_uring unavailable" "$err")" = 1 ] || fail "expected exactly one warning line"
grep -q "2 laps done, stopped cleanly" "$out" || fail "cr-hello did not run on epoll"

timeout 30 "$no_uring" "$echo" --io-driver uring --listen 127.0.0.1:0 >"$out" 2>"$err"
rc=$?
[ $rc = 2 ] || fail "--io-driver uring under seccomp exited $rc, want 2"
grep -q "io_uring was refused" "$err" || fail "no message saying io_uring was refused"
grep -q "Operation not permitted" "$err" || fail "the message does not say why"
echo "PASS no_uring"
