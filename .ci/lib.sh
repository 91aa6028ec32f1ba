# SPDX-License-Identifier: MIT
# .ci/lib.sh - helpers for the extra CI phases (.ci/phase-*.sh).
#
# A phase script is run by .ci/run from the top of the source tree, after
# the five built-in phases, with autoreconf already done (./configure
# exists) and the source tree distclean; by hand (bash .ci/phase-NAME.sh)
# from any state of a checkout: ci_srcdir below gives it a tree to
# configure from. It builds out of tree in its own
# _build-<name> directory, bounds its own time (timeout(1)), and prints as
# its last line "N passed, N failed" over the checks it ran, or
# "N passed, N failed, N skipped" when it skipped some; its exit status is
# non-zero when anything failed. .ci/run adds those counts to the total; a
# phase that prints no such line counts as failed. One check is one thing
# that could fail on its own: a precondition (a baseline read back, each
# file of a corpus run in one go) is not a pass of its own.
#
# Source this file:  . "$(dirname "$0")/lib.sh"

export DEBIAN_FRONTEND=noninteractive

# ci_need PACKAGE...: install the Debian packages that are missing.
ci_need() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "install ok installed" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	echo "== installing: ${missing[*]}"
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null >/dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -q \
		--no-install-recommends "${missing[@]}" </dev/null >/dev/null
}

# ci_counts FILE: print "PASS FAIL SKIP" from an automake test summary in
# FILE.
ci_counts() {
	if [[ -f $1 ]]; then
		awk '/^# (PASS|XFAIL):/ { p += $3 }
		     /^# (FAIL|XPASS|ERROR):/ { f += $3 }
		     /^# SKIP:/ { s += $3 }
		     END { print p + 0, f + 0, s + 0 }' "$1"
	else
		echo 0 0 0
	fi
}

# ci_srcdir NAME: print a source directory an out-of-tree build can
# configure from, whatever the state of the checkout, so that a phase runs
# by hand as well as from .ci/run: this tree when it is bootstrapped and not
# configured in place; this tree after autoreconf -fi when ./configure is
# missing (what the README's quick start does); and when the tree is
# configured in place (quickstart.sh: configure then refuses an
# out-of-tree build, "source directory already configured"), a copy of its
# tracked files in _build-NAME-src, bootstrapped there. Run from the top.
ci_srcdir() {
	local src=$PWD/_build-$1-src
	if [[ ! -f config.status ]]; then
		if [[ ! -x configure ]]; then
			echo "== bootstrapping: autoreconf -fi" >&2
			ci_autoreconf . || return 1
		fi
		echo "$PWD"
		return 0
	fi
	echo "== the tree is configured in place: building from a copy," \
		"${src#"$PWD"/}" >&2
	rm -rf "$src"
	mkdir -p "$src"
	if git rev-parse --git-dir >/dev/null 2>&1; then
		git ls-files -z | xargs -0 cp --parents -P -t "$src" || return 1
	else
		tar --exclude='./_*' --exclude=./.git -cf - . |
			tar -C "$src" -xf - || return 1
		(cd "$src" && make distclean) >/dev/null 2>&1
	fi
	ci_autoreconf "$src" || return 1
	echo "$src"
}

# ci_autoreconf DIR: autoreconf -fi in DIR; its output only when it fails.
ci_autoreconf() {
	local log
	log=$(mktemp)
	if ! (cd "$1" && autoreconf -fi) >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

# ci_dist DIR: make the release tarball ("make dist") from any state of the
# checkout, configured in DIR from ci_srcdir's tree, and print its path.
ci_dist() {
	local dir=$1 src
	src=$(ci_srcdir "$(basename "$dir")") || return 1
	mkdir -p "$dir"
	if ! (cd "$dir" && "$src/configure" && make dist) >"$dir/dist.log" 2>&1; then
		tail -n 30 "$dir/dist.log" >&2
		return 1
	fi
	ls "$dir"/*.tar.gz
}

# ci_check DESCRIPTION STATUS: count one check of the phase named
# $ci_phase (passed when STATUS is 0) and say so; ci_finish: print the
# phase's time and its last line, "N passed, N failed", and exit (non-zero
# when a check failed).
ci_pass=0
ci_fail=0
ci_start=$(date +%s)
ci_check() {
	if (($2 == 0)); then
		ci_pass=$((ci_pass + 1))
		echo "== ${ci_phase:-phase}: PASS: $1"
	else
		ci_fail=$((ci_fail + 1))
		echo "== ${ci_phase:-phase}: FAIL: $1 (status $2)"
	fi
}
ci_finish() {
	echo "== ${ci_phase:-phase}: phase took $(($(date +%s) - ci_start)) s"
	echo "$ci_pass passed, $ci_fail failed"
	((ci_fail == 0))
	exit
}
