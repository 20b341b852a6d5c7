#!/usr/bin/env python3
"""Regenerates the command outputs in docs/scenarios.md.

Every block of the form

    <!-- lathe ARGS [| head -N] -->
    ```text
    ...
    ```

is replaced by the output of running `lathe ARGS` (its first N lines with a head),
so the document shows what the commands print, not what someone typed.
Usage: scripts/update_scenarios_doc.py [path/to/lathe] [docs/scenarios.md]
"""
import re
import shlex
import subprocess
import sys

lathe = sys.argv[1] if len(sys.argv) > 1 else "build/cli/lathe"
path = sys.argv[2] if len(sys.argv) > 2 else "docs/scenarios.md"
text = open(path).read()
pattern = re.compile(r"(<!-- lathe (.*?) -->\n```text\n)(.*?)(```)", re.S)


def run(match):
    args = match.group(2)
    head = None
    if "| head -" in args:
        args, n = args.split("| head -")
        head = int(n)
    out = subprocess.run([lathe] + shlex.split(args), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"lathe {args} failed ({out.returncode}):\n{out.stderr}")
    lines = out.stdout.rstrip("\n").split("\n")
    if head:
        lines = lines[:head] + ["..."]
    print(f"ran: lathe {args}", file=sys.stderr)
    return match.group(1) + "\n".join(lines) + "\n" + match.group(4)


new = pattern.sub(run, text)
open(path, "w").write(new)
