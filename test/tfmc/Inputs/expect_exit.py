"""Runs a command and fails unless it exits with the given code.

Usage: expect_exit.py CODE COMMAND [ARGS...]. The command's stdout and stderr
are passed through (stderr into stdout) so FileCheck can read both.
"""
import subprocess
import sys

want = int(sys.argv[1])
proc = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
sys.stdout.write(proc.stdout.decode(errors="replace"))
if proc.returncode != want:
    sys.stdout.write(f"expect_exit: exit code {proc.returncode}, expected {want}\n")
    sys.exit(1)
