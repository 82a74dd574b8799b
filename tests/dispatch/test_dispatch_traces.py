#!/usr/bin/env python3
"""kb_dispatch on traces `kb bench` just wrote on this machine's CPU, checked by
bench/dispatch_check.py (which works the choices out from the trace files
itself).

usage: test_dispatch_traces.py KB LIBKB DATASET DEFINITION.json DISPATCH_CHECK.py
"""
import os
import subprocess
import sys
import tempfile


def main():
    kb, libkb, dataset, definition, check = sys.argv[1:6]
    name = os.path.basename(definition)[: -len(".json")]
    with tempfile.TemporaryDirectory() as out:
        bench = subprocess.run([kb, "bench", dataset, "--device", "cpu", "--definitions", name, "--trials", "1",
                                "--out", out], capture_output=True, text=True)
        print(bench.stdout[-2000:], bench.stderr[-2000:])
        if bench.returncode != 0:
            print("FAIL: kb bench exited", bench.returncode)
            return 1
        # kb's order of solutions, for the dispatch's default tie margin
        listing = subprocess.run([kb, "bench", "--list"], capture_output=True, text=True).stdout
        order = ",".join(l.split()[0] for l in listing.splitlines() if l.startswith("kb_"))
        return subprocess.run([sys.executable, check, libkb, definition, out, "cpu", "--order", order]).returncode


if __name__ == "__main__":
    sys.exit(main())
