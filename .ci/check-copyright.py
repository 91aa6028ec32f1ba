#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# .ci/check-copyright.py - compare debian/copyright with what licensecheck(1)
# finds in an unpacked source tree (the make dist tarball, the .orig.tar.gz).
#
#   .ci/check-copyright.py DEBIAN_COPYRIGHT TREE
#
# For each file of TREE, the last "Files:" paragraph that matches it (the
# machine-readable format's rule) declares a licence expression; every
# licence and exception licensecheck names for the file must appear in it
# (licensecheck cannot see every licence of a file that has several, so the
# declaration may name more). Files licensecheck cannot classify (UNKNOWN:
# prose, data) are counted, not judged. Each "Files:" paragraph other than
# "*" and "debian/*" must match a file. Prints one line a mismatch and a
# summary; exits 1 on any mismatch.
import fnmatch
import os
import re
import subprocess
import sys

# licensecheck's reading that is known to be wrong, with the reason.
OVERRIDES = {
    # "either version 2 of of the License, or (at your option) any later
    # version": the doubled "of" hides the "or later" from licensecheck.
    ("m4/libtool.m4", "GPL-2"): "GPL-2+",
}
EQUIVALENT = {"MIT": "Expat"}
WORDS = {"and", "or", "and/or", "with", "exception"}


def atoms(expr):
    out = set()
    for w in re.findall(r"[A-Za-z0-9.+~_-]+(?:/or)?", expr):
        if w.lower() in WORDS:
            continue
        out.add(EQUIVALENT.get(w, w))
    return out


def paragraphs(path):
    paras, cur, key = [], {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur:
                    paras.append(cur)
                cur, key = {}, None
            elif line[0] in " \t":
                if key:
                    cur[key] += "\n" + line.strip()
            else:
                key, _, val = line.partition(":")
                cur[key] = val.strip()
    if cur:
        paras.append(cur)
    return paras


def main():
    copyright_file, tree = sys.argv[1], sys.argv[2]
    stanzas = []
    for p in paragraphs(copyright_file):
        if "Files" in p:
            pats = p["Files"].split()
            lic = p.get("License", "").split("\n")[0]
            stanzas.append((pats, lic, p["Files"].split("\n")[0]))
    out = subprocess.run(
        ["licensecheck", "-r", "--shortname-scheme=debian,spdx", "."],
        cwd=tree, check=True, capture_output=True, text=True).stdout
    used = set()
    bad = unknown = good = 0
    for line in sorted(out.splitlines()):
        path, _, found = line.partition(": ")
        path = os.path.normpath(path)
        found = found.replace("*No copyright*", "").strip()
        declared, which = None, None
        for i, (pats, lic, _) in enumerate(stanzas):
            if any(fnmatch.fnmatchcase(path, pat) for pat in pats):
                declared, which = lic, i
        if which is not None:
            used.add(which)
        if found == "UNKNOWN":
            unknown += 1
            continue
        if declared is None:
            print(f"MISMATCH {path}: licensecheck says {found}; "
                  "no Files paragraph matches it")
            bad += 1
            continue
        got = {OVERRIDES.get((path, a), a) for a in atoms(found)}
        missing = got - atoms(declared)
        if missing:
            print(f"MISMATCH {path}: licensecheck says {found}; "
                  f"debian/copyright says {declared} "
                  f"(missing {', '.join(sorted(missing))})")
            bad += 1
        else:
            good += 1
    for i, (pats, lic, first) in enumerate(stanzas):
        if i not in used and pats not in (["*"], ["debian/*"]):
            print(f"STALE Files: {' '.join(pats)} ({lic}) matches no file")
            bad += 1
    print(f"check-copyright: {good} files agree, {unknown} files "
          f"licensecheck cannot classify (UNKNOWN), {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
