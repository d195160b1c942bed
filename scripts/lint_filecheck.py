#!/usr/bin/env python3
"""Fails on FileCheck directives that check nothing because they are
misspelled or use a prefix no RUN line declares (e.g. `CHECk:`, `CHEK-NEXT:`,
`DISABLED-CHECK:`). Usage: lint_filecheck.py DIR..."""
import os
import re
import sys

SUFFIXES = (".mlir", ".test")
DIRECTIVE = re.compile(r"^\s*(?://|#)?\s*([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*?)"
                       r"(-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY|-COUNT-\d+)?:\s")
LIT_KEYWORDS = {"RUN", "REQUIRES", "UNSUPPORTED", "XFAIL", "COM", "ALLOW_RETRIES", "END"}


def check(path):
    text = open(path, encoding="utf-8").read()
    prefixes = {"CHECK"}
    for m in re.finditer(r"--check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)", text):
        prefixes.update(m.group(1).split(","))
    bad = []
    for n, line in enumerate(text.splitlines(), 1):
        m = DIRECTIVE.match(line)
        if not m:
            continue
        word = m.group(1)
        looks_like_check = "CHECK" in word.upper() or word.isupper()
        if word in LIT_KEYWORDS or word in prefixes or not looks_like_check:
            continue
        if word.startswith("expected"):
            continue
        bad.append(f"{path}:{n}: '{word}{m.group(2) or ''}:' is not a declared FileCheck prefix")
    return bad


def main():
    bad = []
    for root in sys.argv[1:]:
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f.endswith(SUFFIXES) and "Inputs" not in dirpath.split(os.sep):
                    bad += check(os.path.join(dirpath, f))
    print("\n".join(bad) if bad else "FileCheck prefixes: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
