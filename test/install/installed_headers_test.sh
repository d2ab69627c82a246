#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The installed library as a user outside this tree sees it: `meson install` into a staging
# directory, then a strict C11 program that includes every installed header and nothing
# else, compiled with only `pkg-config --cflags libcoreact` (found through PKG_CONFIG_PATH
# alone: the .pc is relocatable), linked with `pkg-config --libs libcoreact`, and run.
# Usage: installed_headers_test.sh BUILD_DIR PROGRAM.c
set -eu
build=$1
body=$2
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "no C compiler ($cc): skip"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skip"; exit 77; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet
pc=$(find "$stage" -name libcoreact.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no libcoreact.pc installed"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags libcoreact)
libs=$(pkg-config --libs libcoreact)
echo "cflags: $cflags"
echo "libs: $libs"
case "$cflags" in
*-include*|*_GNU_SOURCE*|*dpdk*|*RTE_*)
	echo "FAIL: pkg-config --cflags carries DPDK or feature-macro flags: $cflags"; exit 1;;
esac
inc=$(echo "$cflags" | sed -n 's/.*-I\([^ ]*\).*/\1/p')
[ -d "$inc" ] || { echo "FAIL: include directory $inc (from the .pc) is missing"; exit 1; }
# Internal headers stay in the tree.
bad=$(cd "$inc" && ls | grep -E '_internal\.h$|^cr_ring\.h$|^cr_mailbox\.h$|^reactor_|^io_fault' || true)
[ -z "$bad" ] || { echo "FAIL: internal headers installed: $bad"; exit 1; }

prog="$stage/prog.c"
for h in $(cd "$inc" && ls *.h); do
	# _pvt headers refuse to be included on their own (their public header includes them).
	case "$h" in *_pvt.h) continue;; esac
	echo "#include \"$h\""
done >"$prog"
cat "$body" >>"$prog"
n=$(grep -c '^#include' "$prog")
echo "compiling a C11 program with the $n installed headers"
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror -o "$stage/prog" "$prog" $cflags $libs
LD_LIBRARY_PATH=$(echo "$libs" | sed -n 's/.*-L\([^ ]*\).*/\1/p') "$stage/prog"
