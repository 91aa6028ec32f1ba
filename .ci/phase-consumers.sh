#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-consumers.sh - programs that build against the installed libtpe
# the way CMake and Meson projects do (tests/consumers/). Contract:
# .ci/lib.sh.
#
# Installs libtpe (a release build, no tests) under _build-consumers/prefix,
# then checks: 1. the CMake package is installed (lib/cmake/tpe); 2. a CMake
# project finds it with find_package(tpe 0.1) and links tpe::tpe and
# tpe::thpool; 3. its two programs run; 4. a Meson project finds tpe and
# tpe-thpool through pkg-config; 5. its two programs run; 6. a
# find_package(tpe 99) request is refused (the version file answers).
# Each step bounded (a quiet machine takes about a minute for all).

set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

ci_need cmake meson ninja-build pkg-config

dir=$PWD/_build-consumers
prefix=$dir/prefix
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; ((fail == 0)); exit; }
# run SECONDS LOG CMD...: CMD bounded, its output in LOG (shown on failure).
run() {
	local s=$1 log=$2
	shift 2
	if timeout -k 5 "$s" "$@" >"$log" 2>&1; then
		return 0
	fi
	tail -n 30 "$log"
	return 1
}

src=$(ci_srcdir consumers) || { not_ok "bootstrap a source tree"; finish; }
rm -rf "$dir"
mkdir -p "$dir/lib"
if (cd "$dir/lib" && run 300 "$dir/configure.log" "$src/configure" \
	--prefix="$prefix" --disable-static) &&
    run 600 "$dir/make.log" make -C "$dir/lib" -j2 install; then
	echo "installed libtpe in $prefix (a precondition, not a pass)"
else
	not_ok "configure, build and install libtpe"
	finish
fi
libdir=$(sed -n 's/^libdir=//p' "$dir/lib/tpe.pc")
libdir=${libdir/\$\{exec_prefix\}/$prefix}
if [[ -f $libdir/cmake/tpe/tpeConfig.cmake &&
    -f $libdir/cmake/tpe/tpeConfigVersion.cmake ]]; then
	ok "the CMake package is installed in ${libdir#"$prefix"/}/cmake/tpe"
else
	not_ok "no tpeConfig.cmake / tpeConfigVersion.cmake under $libdir/cmake/tpe"
fi

# The probes of the installed library (tpe(7), "Tracing"), where configure
# found <sys/sdt.h> (.ci/run installs systemtap-sdt-dev).
if grep -q '^#define HAVE_SYS_SDT_H 1' "$dir/lib/config.h"; then
	n=$(readelf -n "$libdir/libtpe.so.0" 2>/dev/null |
		grep -c 'Provider: tpe')
	if ((n >= 10)); then
		ok "readelf -n lists $n USDT probes in the installed libtpe.so.0"
	else
		not_ok "readelf -n lists $n USDT probes in the installed libtpe.so.0"
	fi
else
	echo "no <sys/sdt.h>: no probes built in (not counted)"
fi

consumers=$PWD/tests/consumers
# No LD_LIBRARY_PATH: CMake and Meson record the prefix's library
# directory in the binaries of their build trees (doc/porting.md says so).
if run 120 "$dir/cmake.log" cmake -S "$consumers" -B "$dir/cmake" \
	-DCMAKE_PREFIX_PATH="$prefix" &&
    run 120 "$dir/cmake-build.log" cmake --build "$dir/cmake"; then
	ok "CMake: find_package(tpe 0.1), tpe::tpe and tpe::thpool link"
	if run 30 "$dir/cmake-run.log" "$dir/cmake/consumer" &&
	    run 30 "$dir/cmake-run2.log" "$dir/cmake/thpool_consumer"; then
		ok "CMake: the programs run ($(cat "$dir/cmake-run.log"))"
	else
		not_ok "CMake: the programs run"
	fi
else
	not_ok "CMake: find_package(tpe 0.1), tpe::tpe and tpe::thpool link"
fi

if PKG_CONFIG_PATH=$libdir/pkgconfig run 120 "$dir/meson.log" \
	meson setup "$dir/meson" "$consumers" &&
    run 120 "$dir/meson-build.log" meson compile -C "$dir/meson"; then
	ok "Meson: dependency('tpe') and dependency('tpe-thpool') link"
	if run 30 "$dir/meson-run.log" "$dir/meson/consumer" &&
	    run 30 "$dir/meson-run2.log" "$dir/meson/thpool_consumer"; then
		ok "Meson: the programs run ($(cat "$dir/meson-run2.log"))"
	else
		not_ok "Meson: the programs run"
	fi
	# doc/porting.md's check that a ported program uses libtpe.
	if ! nm "$dir/meson/thpool_consumer" | grep -q ' T thpool_' &&
	    nm -D "$dir/meson/thpool_consumer" | grep -q ' U thpool_add_work' &&
	    ldd "$dir/meson/thpool_consumer" | grep -q "$libdir/libtpe.so.0"; then
		ok "Meson: thpool_consumer calls thpool_* in $libdir/libtpe.so.0"
	else
		not_ok "Meson: thpool_consumer does not use the installed libtpe"
	fi
else
	not_ok "Meson: dependency('tpe') and dependency('tpe-thpool') link"
fi

# The version file must refuse what this release cannot give.
mkdir -p "$dir/too-new"
cat >"$dir/too-new/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.10)
project(too_new C)
find_package(tpe 99 REQUIRED)
CMAKE
if timeout 60 cmake -S "$dir/too-new" -B "$dir/too-new/b" \
	-DCMAKE_PREFIX_PATH="$prefix" >"$dir/too-new.log" 2>&1; then
	not_ok "CMake: find_package(tpe 99) was accepted"
else
	if grep -q 'tpeConfigVersion.cmake\|version: 0\.\|not compatible\|unsuitable' \
	    "$dir/too-new.log"; then
		ok "CMake: find_package(tpe 99) is refused by the version file"
	else
		tail -n 20 "$dir/too-new.log"
		not_ok "CMake: find_package(tpe 99) failed, but not on the version"
	fi
fi
finish
