#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cross-check.sh - libtpe built and tested for Debian's other release
# architectures (under qemu-user) and for musl.
#
# usage: build-aux/cross-check.sh [--quick] [--budget SECONDS]
#                                 [--tests "PROGRAM..."] [TARGET...]
#
# TARGETs: arm64 armhf i386 s390x ppc64el riscv64 (cross compilers of
# Debian, gcc-TRIPLET) and musl (musl-gcc); all seven by default. Run it
# from any directory of a bootstrapped checkout (./configure exists), as
# root where packages are missing: it installs them (Debian: the cross
# compiler and C library, cmocka of the target through dpkg
# --add-architecture, qemu-user). doc/RELEASING.md runs it before each
# release; the CI's cross phase (.ci/phase-cross.sh) runs --quick on two,
# with a part of the unit tests.
#
# Each target is configured with --host=TRIPLET in _build-cross-TARGET at
# the top of the tree and built, then:
#   default   -O2, the whole "make check": every test program, example and
#             script, the foreign programs run by qemu-user through the
#             kernel's binfmt_misc (registered here from qemu-user-binfmt's
#             /usr/lib/binfmt.d when missing). Where binfmt_misc cannot be
#             used, the unit tests only, as in --quick, and it says so.
#   --quick   -O1, static library only, the cmocka unit tests only, each
#             run by "qemu-ARCH" put in front of it through make's
#             LOG_COMPILER (no binfmt_misc needed).
#   musl      the library and the examples (cmocka is not built for musl):
#             build-aux/check-examples.sh runs the examples.
# i386 runs natively where the kernel runs 32-bit x86 programs, else
# under qemu-i386 as the others.
# --tests: only these unit test programs (names as in TPE_UNIT_TESTS,
# e.g. "tests/test_base tests/test_ring") are built and run, in the unit
# test modes (--quick, or where binfmt_misc cannot be used).
# TPE_TEST_TIME_SCALE (tests/helpers.h) is 10 under emulation, unless set.
# --budget: a target starts only while fewer than SECONDS have passed
# since the script started; the others are reported as not run (skipped),
# so that a loaded machine tests fewer targets instead of overrunning a
# CI phase's time. The first target always runs.
#
# Under qemu-user some cases cannot pass, whatever the library does; their
# failures count as skipped, each with its reason printed (EMULATED below),
# and only on an emulated target: every other run of them (make check on
# amd64, the other CI phases) still asserts. qemu-user runs the guest's
# threads on the host's x86 memory order: it finds no missing barrier
# (tpe(7), PORTABILITY).
#
# Output: per target its counts, the failed cases with the end of their
# logs; last line "N passed, N failed, N skipped" over all targets. Exit
# status non-zero when a case, a build or an install failed.

set -uo pipefail

quick=no
budget=0
unit_tests='$(TPE_UNIT_TESTS)'
targets=()
while (($#)); do
	a=$1
	shift
	case $a in
	--quick) quick=yes ;;
	--budget)
		budget=${1:-}
		shift
		[[ $budget =~ ^[0-9]+$ ]] || {
			echo "cross-check.sh: --budget takes seconds" >&2
			exit 2
		}
		;;
	--tests)
		unit_tests=${1:-}
		shift
		[[ $unit_tests =~ ^(tests/[a-z0-9_]+ ?)+$ ]] || {
			echo "cross-check.sh: --tests takes tests/PROGRAM names" >&2
			exit 2
		}
		;;
	-h | --help)
		sed -n '3,/^$/s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	-*)
		echo "cross-check.sh: unknown option $a" >&2
		exit 2
		;;
	*) targets+=("$a") ;;
	esac
done
((${#targets[@]})) || targets=(arm64 armhf i386 s390x ppc64el riscv64 musl)

top=$(cd "$(dirname "$0")/.." && pwd)
if [[ ! -x $top/configure ]]; then
	echo "cross-check.sh: $top/configure is missing: run ./bootstrap" \
		"(autoreconf -fi) first" >&2
	exit 2
fi
export DEBIAN_FRONTEND=noninteractive
export AM_COLOR_TESTS=no
jobs=-j2

# Target -> GNU triplet, Debian architecture, qemu-user name.
declare -A triplet=([arm64]=aarch64-linux-gnu [armhf]=arm-linux-gnueabihf
	[i386]=i686-linux-gnu [s390x]=s390x-linux-gnu
	[ppc64el]=powerpc64le-linux-gnu [riscv64]=riscv64-linux-gnu)
declare -A qemu=([arm64]=aarch64 [armhf]=arm [i386]=i386 [s390x]=s390x
	[ppc64el]=ppc64le [riscv64]=riscv64)

# Cases that cannot pass under qemu-user 7.2, by reason: a failure of one of
# them on an emulated target counts as skipped.
#  - wait kind: tu_thread_wait_kind (tests/helpers.h) reads
#    /proc/self/task/TID/syscall, which qemu-user fills with the host's
#    system calls (x86-64 numbers, its own futexes), never the guest's.
#  - signals: qemu-user keeps the guest's last real-time signals
#    (SIGRTMAX-1 and SIGRTMAX) for itself; a guest thread cannot block
#    them.
#  - fork: qemu-user aborts (assertion cpu == current_cpu, or in
#    qemu_plugin_vcpu_init_hook) in the child of a threaded process that
#    starts a thread.
#  - threads: /proc/self/task lists qemu-user's own threads beside the
#    guest's, and they come and go (s390x: the count fell from 4 to 2
#    between two reads with no guest thread started or ended), so a case
#    that counts the process's threads against a baseline cannot hold.
waitkind='wait kind: /proc/self/task/TID/syscall shows host system calls'
signals='signals: qemu-user keeps SIGRTMAX-1 and SIGRTMAX for itself'
forked='fork: qemu-user aborted in a forked child that starts threads'
threads='threads: qemu-user threads of its own come and go in /proc/self/task'
EMULATED=(
	"test_attr_allow_core_timeout_false|$waitkind"
	"test_resize_*core*|$waitkind"
	"test_thpool_pause_*|$waitkind"
	"test_reserved_time_out_against_claim|$waitkind"
	"test_sched_shutdown_waits_for_timer_hand_back|$waitkind"
	"test_execute_pool_threads_block_every_async_signal|$signals"
	"test_sched_no_thread_no_wakeups|$threads"
	"Bail out! ERROR:../../*|$forked"
)

total_pass=0 total_fail=0 total_skip=0
report=()

# ---- installing --------------------------------------------------------

# need PACKAGE...: install the missing ones (apt-get update once).
updated=no
need() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "install ok installed" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	if ((EUID != 0)); then
		echo "== missing packages (install them as root):" \
			"${missing[*]}" >&2
		return 1
	fi
	echo "== installing: ${missing[*]}"
	if [[ $updated == no ]]; then
		apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null \
			>/dev/null
		updated=yes
	fi
	apt-get -o DPkg::Lock::Timeout=600 install -y -q \
		--no-install-recommends "${missing[@]}" </dev/null >/dev/null
}

# foreign DEBARCH: dpkg accepts packages of DEBARCH (multiarch).
foreign() {
	dpkg --print-foreign-architectures | grep -qx "$1" && return 0
	((EUID == 0)) || return 1
	dpkg --add-architecture "$1" && updated=no
}

# cmocka_from_source T DIR: cmocka for T built from Debian's source package
# into DIR (riscv64 on Debian 12, whose archive has no riscv64 packages).
# The source comes through a deb-src list of its own, written from the
# system's deb lines, so the system's apt configuration is not changed.
cmocka_from_source() {
	local t=$1 dir=$2 apt=$2/apt src
	[[ -f $dir/lib/libcmocka-static.a ]] && return 0
	need cmake dpkg-dev || return 1
	mkdir -p "$apt/parts" "$apt/lists/partial" "$dir/src"
	cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		sed 's/^Types: deb$/Types: deb-src/' >"$apt/parts/src.sources"
	grep -h '^deb ' /etc/apt/sources.list 2>/dev/null |
		sed 's/^deb /deb-src /' >"$apt/parts/src.list"
	local opts=(-o Dir::Etc::SourceList=/dev/null
		-o Dir::Etc::SourceParts="$apt/parts"
		-o Dir::State::Lists="$apt/lists")
	(cd "$dir/src" && apt-get -q "${opts[@]}" update &&
		apt-get -q "${opts[@]}" source cmocka) >"$dir/src.log" 2>&1 ||
		{ tail -n 5 "$dir/src.log"; return 1; }
	src=$(find "$dir/src" -maxdepth 2 -name CMakeLists.txt -printf '%h\n' |
		head -n 1)
	mkdir -p "$dir/build"
	(cd "$dir/build" &&
		cmake -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR="$t" \
			-DCMAKE_C_COMPILER="${triplet[$t]}-gcc" \
			-DCMAKE_INSTALL_PREFIX="$dir" -DWITH_STATIC_LIB=ON \
			-DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF "$src" &&
		make $jobs install) >"$dir/build.log" 2>&1 ||
		{ tail -n 20 "$dir/build.log"; return 1; }
}

# ---- running foreign programs ------------------------------------------

# native T DIR: this machine runs T's programs itself, without
# binfmt_misc (i386 on x86-64): only i386 is tried.
native() {
	[[ $1 == i386 ]] || return 1
	# Our own binfmt line would make qemu-i386 look native.
	[[ -e /proc/sys/fs/binfmt_misc/qemu-i386 ]] && return 1
	case $(uname -m) in x86_64 | i?86) ;; *) return 1 ;; esac
	printf 'int main(void) { return 0; }\n' >"$2/native.c"
	"${triplet[$1]}-gcc" -o "$2/native" "$2/native.c" 2>/dev/null &&
		"$2/native" 2>/dev/null
}

# make_var DIR NAME: the value of make variable NAME in DIR's Makefile.
# shellcheck disable=SC2016 # make expands it
make_var() {
	printf 'print-var:\n\t@echo $(%s)\n' "$2" |
		make -s -C "$1" -f Makefile -f - print-var
}

# binfmt T: the kernel hands T's programs to qemu-user (binfmt_misc),
# registered here when it is not.
binfmt() {
	local name=qemu-${qemu[$1]} m=/proc/sys/fs/binfmt_misc
	[[ -e $m/$name ]] && return 0
	((EUID == 0)) || return 1
	need qemu-user-binfmt || return 1
	[[ -e $m/register ]] ||
		mount -t binfmt_misc binfmt_misc "$m" 2>/dev/null || return 1
	if [[ -f /usr/lib/binfmt.d/$name.conf ]]; then
		cat "/usr/lib/binfmt.d/$name.conf" >"$m/register" 2>/dev/null
	elif [[ $1 == i386 ]]; then
		# Not shipped for an x86-64 host (qemu's qemu-binfmt-conf.sh).
		local magic mask
		magic='\x7fELF\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00'
		magic+='\x02\x00\x03\x00'
		mask='\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff'
		mask+='\xff\xff\xfe\xff\xff\xff'
		echo ":$name:M::$magic:$mask:/usr/bin/qemu-i386:" \
			>"$m/register" 2>/dev/null
	fi
	[[ -e $m/$name ]]
}

# ---- counting ----------------------------------------------------------

# emulated_reason LINE: the reason a FAIL or ERROR line of an emulated run
# is no failure of the library, or nothing.
emulated_reason() {
	local e pat what=$1
	what=${what#*: }            # "tests/test_x N - name" or "... - Bail.."
	for e in "${EMULATED[@]}"; do
		pat=${e%%|*}
		# shellcheck disable=SC2053 # a glob on purpose
		if [[ ${what##* - } == $pat ]]; then
			echo "${e#*|}"
			return
		fi
	done
}

# count T DIR EMULATED: the results of the .log files of automake's test
# driver under DIR; a failure of an EMULATED case counts as skipped. An
# ERROR line "exited with status" of a program whose failed cases all were
# emulated is no failure of its own.
count() {
	local t=$1 dir=$2 emu=$3 f name line reason p=0 x=0 s=0
	local -A bad=() real=()
	while IFS= read -r f; do
		# The driver's lines name the test; a program's own output
		# ("ERROR: ..." of cmocka) does not.
		name=${f#"$dir"/}
		name=${name%.log}
		while IFS= read -r line; do
			case $line in
			PASS:* | XFAIL:*) p=$((p + 1)) ;;
			SKIP:*) s=$((s + 1)) ;;
			FAIL:* | XPASS:* | ERROR:*)
				reason=
				[[ $emu == yes ]] && reason=$(emulated_reason "$line")
				if [[ -n $reason ]]; then
					s=$((s + 1))
					bad[$f]=1
					echo "   skipped (emulated): ${line#*: }"
					echo "      ($reason)"
				elif [[ $line == ERROR:*"exited with status"* ]]; then
					real[$f]=${real[$f]:-0}
				else
					real[$f]=1
					x=$((x + 1))
					echo "   FAILED: ${line#*: }"
				fi
				;;
			esac
		done < <(grep -E \
			"^(PASS|XFAIL|SKIP|FAIL|XPASS|ERROR): $name(\\.sh)?( |\$)" "$f")
	done < <(find "$dir" -name '*.log' -newer "$dir/.check-start" \
		! -name test-suite.log ! -name config.log ! -path '*/cmocka/*')
	# A program that exited non-zero with no failed case behind it.
	for f in "${!real[@]}"; do
		if [[ ${real[$f]} == 0 && -z ${bad[$f]:-} ]]; then
			x=$((x + 1))
			echo "   FAILED: $f exited non-zero"
		fi
	done
	for f in "${!real[@]}"; do
		[[ ${real[$f]} == 1 ]] || continue
		echo "   --- ${f#"$top"/} (end)"
		tail -n 15 "$f" | sed 's/^/   | /'
	done
	echo "$p $x $s"
}

# result T PASS FAIL SKIP NOTE: one target's line.
result() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	total_skip=$((total_skip + $4))
	report+=("$(printf '%-8s %4d passed, %d failed, %d skipped%s' \
		"$1" "$2" "$3" "$4" "${5:+ ($5)}")")
	echo "== $1: $2 passed, $3 failed, $4 skipped${5:+ ($5)}"
}

# ---- one target --------------------------------------------------------

cross() {
	local t=$1 host=${triplet[$1]:-} dir=$top/_build-cross-$1
	local cflags=(-O2 -g) conf=() mode=full emu=no note='' start
	local cmocka_cflags='' cmocka_libs=-lcmocka run=() out
	start=$(date +%s)
	if [[ -z $host ]]; then
		echo "== $t: unknown target" >&2
		result "$t" 0 1 0 "unknown target"
		return
	fi
	echo "== $t ($host)"
	need "gcc-$host" "libc6-dev-$t-cross" || {
		result "$t" 0 1 0 "cross compiler missing"
		return
	}
	rm -rf "$dir"
	mkdir -p "$dir"
	if [[ $t == riscv64 ]] &&
	    ! apt-cache show libcmocka-dev:riscv64 >/dev/null 2>&1; then
		# No riscv64 in the archive (Debian 12): cmocka from source.
		cmocka_from_source "$t" "$top/_build-cross-cmocka-$t" || {
			result "$t" 0 1 0 "cmocka from source failed"
			return
		}
		cmocka_cflags="-I$top/_build-cross-cmocka-$t/include"
		cmocka_libs=$top/_build-cross-cmocka-$t/lib/libcmocka-static.a
	else
		{ foreign "$t" && need "libcmocka-dev:$t"; } || {
			result "$t" 0 1 0 "libcmocka-dev:$t missing"
			return
		}
	fi
	if native "$t" "$dir"; then
		:
	else
		need qemu-user || { result "$t" 0 1 0 "qemu-user missing"; return; }
		emu=yes
		# The guest's C library: the target's own (libc6:ARCH, which
		# its libcmocka0 brought), else the cross one it was linked
		# with. Never both: the cross ld.so with the multiarch
		# libc.so.6, which ld.so.cache names, crashes in libc.
		dpkg-query -W -f='${Status}' "libc6:$t" 2>/dev/null |
			grep -q "install ok installed" ||
			export QEMU_LD_PREFIX=/usr/$host
		export TPE_TEST_TIME_SCALE=${TPE_TEST_TIME_SCALE_CROSS:-10}
		if [[ $quick == yes ]] || ! binfmt "$t"; then
			[[ $quick == yes ]] ||
				note="binfmt_misc not usable: unit tests only"
			mode=unit
			run=("qemu-${qemu[$t]}")
		fi
	fi
	if [[ $quick == yes ]]; then
		mode=unit
		cflags=(-O1)
		conf=(--disable-shared)
	fi
	echo "== $t: configure, build ($mode tests$([[ $emu == yes ]] &&
		echo ", under qemu-${qemu[$t]}"))"
	if ! (cd "$dir" && "$top/configure" --host="$host" "${conf[@]}" \
		CFLAGS="${cflags[*]}" CMOCKA_CFLAGS="$cmocka_cflags" \
		CMOCKA_LIBS="$cmocka_libs") >"$dir/configure.out" 2>&1; then
		tail -n 30 "$dir/configure.out"
		result "$t" 0 1 0 "configure failed"
		return
	fi
	grep -E '^  (futex|64-bit atomics|HTTP example)' "$dir/configure.out"
	local margs=()
	if [[ $mode == unit ]]; then
		# shellcheck disable=SC2016 # make expands them
		margs=(TESTS="$unit_tests"
			check_PROGRAMS="$unit_tests"
			LOG_COMPILER="\$(SHELL) \$(top_srcdir)/build-aux/run-test.sh ${run[*]}")
	fi
	if ! make -C "$dir" $jobs "${margs[@]}" all >"$dir/make.out" 2>&1; then
		grep -E 'error|warning' "$dir/make.out" | head -n 40
		result "$t" 0 1 0 "build failed"
		return
	fi
	if grep -E 'warning:' "$dir/make.out"; then
		note="${note:+$note; }compiler warnings"
	fi
	touch "$dir/.check-start"
	make -C "$dir" $jobs "${margs[@]}" check >"$dir/check.out" 2>&1
	out=$(count "$t" "$dir" "$emu")
	sed '$d' <<<"$out"
	read -r p x s <<<"$(tail -n 1 <<<"$out")"
	if ((p + x == 0)); then
		tail -n 30 "$dir/check.out"
		x=1
	fi
	note="${note:+$note, }$(($(date +%s) - start)) s"
	unset QEMU_LD_PREFIX TPE_TEST_TIME_SCALE
	result "$t" "$p" "$x" "$s" "$note"
}

# musl: the library (shared and static) and the examples, run.
musl() {
	local dir=$top/_build-cross-musl start out p x examples
	start=$(date +%s)
	echo "== musl (musl-gcc)"
	need musl-tools || { result musl 0 1 0 "musl-tools missing"; return; }
	rm -rf "$dir"
	mkdir -p "$dir"
	if ! (cd "$dir" && "$top/configure" CC=musl-gcc CFLAGS="-O2 -g") \
		>"$dir/configure.out" 2>&1; then
		tail -n 30 "$dir/configure.out"
		result musl 0 1 0 "configure failed"
		return
	fi
	grep -E '^  (futex|64-bit atomics|HTTP example|unit tests)' \
		"$dir/configure.out"
	examples=$(make_var "$dir" TPE_EXAMPLES)
	# shellcheck disable=SC2086 # a list of programs
	if ! make -C "$dir" $jobs all $examples >"$dir/make.out" 2>&1; then
		grep -E 'error|warning' "$dir/make.out" | head -n 40
		result musl 0 1 0 "build failed"
		return
	fi
	out=$(cd "$dir" && TPE_EXAMPLES=$examples top_builddir=. \
		sh "$top/build-aux/check-examples.sh" 2>examples.log)
	echo "$out" | grep -v '^1\.\.' | sed 's/^/   /'
	p=$(grep -c '^ok ' <<<"$out")
	x=$(grep -c '^not ok ' <<<"$out")
	((p + x == 0)) && x=1
	result musl "$p" "$x" 0 "the examples; $(($(date +%s) - start)) s"
}

begin=$(date +%s)
for t in "${targets[@]}"; do
	if ((budget > 0 && ${#report[@]} > 0 &&
	    $(date +%s) - begin >= budget)); then
		echo "== $t: not run: the time budget (${budget} s) is spent"
		result "$t" 0 0 1 "not run: time budget spent"
		continue
	fi
	if [[ $t == musl ]]; then
		musl
	else
		cross "$t"
	fi
done

echo "== cross-check summary"
printf '%s\n' "${report[@]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
((total_fail == 0))
