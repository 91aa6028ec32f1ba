#!/bin/sh
# SPDX-License-Identifier: MIT
# build-fuzz.sh - build the libFuzzer harness fuzz/fuzz_api.c.
#
# usage: build-aux/build-fuzz.sh [BUILDDIR]   (default: _build-fuzz)
#
# Configures an out-of-tree build with clang, the library instrumented for
# the fuzzer's coverage (-fsanitize=fuzzer-no-link) and ASan + UBSan, builds
# only the static core library, and links the harness against it with
# -fsanitize=fuzzer (libFuzzer's main). Prints the harness's path. Needs
# clang with libFuzzer (Debian: clang and libclang-rt-dev).
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-_build-fuzz}
cc=${CLANG:-clang}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
flags="-g -O1 -fno-omit-frame-pointer $san"

mkdir -p "$dir"
cd "$dir"
if ! test -f config.status; then
	"$src/configure" CC="$cc" CFLAGS="$flags -fsanitize=fuzzer-no-link" \
		--disable-shared >configure.log 2>&1 ||
		{ tail -n 30 configure.log >&2; exit 1; }
fi
make lib/libtpe_core.la >make.log 2>&1 || { tail -n 30 make.log >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words
"$cc" $flags -fsanitize=fuzzer -I"$src/include" -o fuzz_api \
	"$src/fuzz/fuzz_api.c" lib/.libs/libtpe_core.a -pthread
echo "$PWD/fuzz_api"
