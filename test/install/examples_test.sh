#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The out-of-tree examples (doc/examples/hello, doc/examples/upper) built with their own
# Makefiles against a staged `meson install`, found through PKG_CONFIG_PATH alone, and run:
# hello says hello from every lcore; upper upper-cases what a client sends, takes its
# --listen from --config, and stops with exit status 0 at SIGTERM. .ci/run runs it too.
# Usage: examples_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
command -v "${CC:-cc}" >/dev/null 2>&1 || { echo "no C compiler: skip"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skip"; exit 77; }
command -v make >/dev/null 2>&1 || { echo "no make: skip"; exit 77; }

stage=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	rm -rf "$stage"
}
trap cleanup EXIT
meson install -C "$build" --destdir "$stage/root" --no-rebuild --quiet
pcdir=$(dirname "$(find "$stage/root" -name libcoreact.pc | head -n 1)")
PKG_CONFIG_PATH=$pcdir
LD_LIBRARY_PATH=$(dirname "$pcdir")
export PKG_CONFIG_PATH LD_LIBRARY_PATH
# XDG_RUNTIME_DIR: the apps' telemetry sockets go to a directory of this test.
mkdir -m 0700 "$stage/run"
XDG_RUNTIME_DIR=$stage/run
export XDG_RUNTIME_DIR

# Built from copies, so the source tree stays clean.
cp -r "$src/doc/examples/hello" "$src/doc/examples/upper" "$stage/"
make -s -C "$stage/hello" hello
make -s -C "$stage/upper" upper

out=$("$stage/hello/hello")
echo "$out"
echo "$out" | grep -q "^hello: [1-9][0-9]* replies$" || { echo "FAIL: hello"; exit 1; }

printf 'listen 127.0.0.1:0   # the kernel picks the port\nio-driver auto\n' >"$stage/upper.conf"
"$stage/upper/upper" --config "$stage/upper.conf" >"$stage/upper.out" 2>"$stage/upper.err" &
pid=$!
port=
for _ in $(seq 200); do
	port=$(sed -n 's/^upper: listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$stage/upper.out")
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
[ -n "$port" ] || { echo "FAIL: upper did not start"; cat "$stage/upper.out" "$stage/upper.err"; exit 1; }
reply=$(python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"hello, upper\nsecond line\npartial")
want = b"HELLO, UPPER\nSECOND LINE\n"
got = b""
while len(got) < len(want):
    d = s.recv(100)
    if not d:
        break
    got += d
print(got.decode(), end="")
PY
)
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
cat "$stage/upper.out"
[ "$reply" = "$(printf 'HELLO, UPPER\nSECOND LINE')" ] || { echo "FAIL: upper replied '$reply'"; exit 1; }
[ "$rc" = 0 ] || { echo "FAIL: upper exited $rc"; cat "$stage/upper.err"; exit 1; }
echo "PASS: hello and upper, built out of the tree against the installed library"
