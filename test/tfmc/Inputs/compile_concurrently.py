#!/usr/bin/env python3
"""Runs N `tfmc compile MODEL -o OUT` at once to one output: every compile
must succeed and OUT must be a whole library that runs.

usage: compile_concurrently.py TFMC MODEL OUT N"""
import subprocess
import sys


def main():
    tfmc, model, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    procs = [subprocess.Popen([tfmc, "compile", model, "-o", out],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    failed = 0
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            failed += 1
            print(f"compile failed ({p.returncode}): {err.strip()}")
    r = subprocess.run([tfmc, "run", out], capture_output=True, text=True)
    print(f"{n} concurrent compiles: {failed} failed; the library "
          f"{'runs' if r.returncode == 0 else 'does not run: ' + r.stderr.strip()}")
    return 1 if failed or r.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
