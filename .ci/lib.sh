# SPDX-License-Identifier: MIT
# .ci/lib.sh - helpers for the extra CI phases (.ci/phase-*.sh).
#
# A phase script is run by .ci/run from the top of the source tree, after
# the five built-in phases, with autoreconf already done (./configure
# exists) and the source tree distclean. It builds out of tree in its own
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
