#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build and run every libFuzzer target under test/fuzz/ for a bounded time.
#
#   CR_FUZZ_SECONDS=60 test/fuzz/run.sh [NAME...]
#
# Each directory test/fuzz/<name>/ holds target.txt — repo-relative C sources, one per
# line (blank lines and '#' comments ignored), the first defining LLVMFuzzerTestOneInput;
# a line that begins with '-' is a flag for the compiler and linker instead (-Ilib/eal,
# -lssl) — and a seed corpus in corpus/. Each target is compiled with clang, libFuzzer,
# ASan and UBSan (every directory of a listed source is an include directory, and so is
# one holding a cr_config.h made from meson_options.txt's defaults), then run for
# CR_FUZZ_SECONDS seconds (default 60) on a temporary copy of its corpus. Any crash, leak,
# sanitizer report or timeout fails the run (exit 1); the reproducer is kept and named.
# Installs clang and libfuzzer-14-dev with apt-get when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${CR_FUZZ_SECONDS:-60}
if ! [[ $secs =~ ^[0-9]+$ ]] || (( secs == 0 )); then
	echo "fuzz: CR_FUZZ_SECONDS=$secs: not a whole number of seconds above 0" >&2
	exit 2
fi

find_clang() {
	local c
	for c in clang clang-14; do
		if command -v "$c" >/dev/null; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

have_libfuzzer() {
	local f
	f=$("$1" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
	[[ -n $f && -e $f ]] || dpkg-query -W -f='${Status}' libfuzzer-14-dev 2>/dev/null |
		grep -q "install ok installed"
}

cc=$(find_clang || true)
if [[ -z $cc ]] || ! have_libfuzzer "$cc"; then
	if (( EUID != 0 )); then
		echo "fuzz: clang with libFuzzer is missing; as root: apt-get install clang libfuzzer-14-dev" >&2
		exit 1
	fi
	echo "== fuzz: installing clang libfuzzer-14-dev"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends clang libfuzzer-14-dev ||
		{ apt-get update -q && apt-get install -y -q --no-install-recommends clang libfuzzer-14-dev; }
	cc=$(find_clang)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# config/meson.build's cr_config.h, with every integer option at its default.
mkdir -p "$work/gen"
{
	echo "/* made by test/fuzz/run.sh from meson_options.txt */"
	tr -d '\n' <meson_options.txt | grep -o "option('[a-z_]*', type: 'integer'[^)]*value: [0-9]*" |
		sed -E "s/option\('([a-z_]*)'.*value: ([0-9]*)/\1 \2/" |
		while read -r opt val; do
			echo "#define CR_${opt^^} $val"
		done
	echo "#define CR_SEND_FLUSH 16"
	echo "#define CR_DEFER_CAP 4096"
	echo "#define CR_VERSION \"fuzz\""
} >"$work/gen/cr_config.h"
if (( $# > 0 )); then
	names=("$@")
else
	names=()
	for d in test/fuzz/*/; do
		[[ -f $d/target.txt ]] && names+=("$(basename "$d")")
	done
fi
if (( ${#names[@]} == 0 )); then
	echo "fuzz: no targets under test/fuzz/" >&2
	exit 1
fi

status=0
for name in "${names[@]}"; do
	dir=test/fuzz/$name
	if [[ ! -f $dir/target.txt ]]; then
		echo "fuzz: $dir/target.txt: missing" >&2
		exit 2
	fi
	srcs=()
	incs=("-I$work/gen")
	flags=()
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line%%#*}
		line=$(echo "$line" | xargs)
		[[ -z $line ]] && continue
		if [[ $line == -* ]]; then
			flags+=("$line")
			continue
		fi
		if [[ ! -f $line ]]; then
			echo "fuzz: $dir/target.txt: $line: no such file" >&2
			exit 2
		fi
		srcs+=("$line")
		inc="-I$(dirname "$line")"
		[[ " ${incs[*]-} " == *" $inc "* ]] || incs+=("$inc")
	done <"$dir/target.txt"
	bin=$work/fuzz-$name
	echo "== fuzz $name: $cc ${srcs[*]} ${flags[*]-}"
	"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-D_GNU_SOURCE -std=c11 "${incs[@]}" "${srcs[@]}" ${flags[@]+"${flags[@]}"} -o "$bin"
	mkdir -p "$work/corpus-$name" "$work/artifacts-$name"
	if [[ -d $dir/corpus ]]; then
		cp -r "$dir/corpus/." "$work/corpus-$name/"
	fi
	echo "== fuzz $name: ${secs}s on $(ls "$work/corpus-$name" | wc -l) seeds"
	if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts-$name/" "$work/corpus-$name" \
		>"$work/log-$name" 2>&1; then
		tail -n 60 "$work/log-$name" >&2
		keep=$(mktemp -d /tmp/cr-fuzz-"$name"-XXXXXX)
		cp -r "$work/artifacts-$name/." "$keep/"
		echo "fuzz $name: FAILED; reproducer(s) kept in $keep: build with the command above" \
			"(-O0 for a readable trace) and run the binary on the file" >&2
		status=1
		continue
	fi
	grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$work/log-$name" || true
	echo "== fuzz $name: OK"
done
exit $status
