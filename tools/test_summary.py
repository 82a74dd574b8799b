#!/usr/bin/env python3
"""Prints 'N passed, N failed' over meson's testlog.json files (meson prints
no such line itself). Skipped tests are listed, never counted as passed."""
import json
import sys

PASS = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}

passed = failed = 0
skipped = []
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except OSError as e:
        print(f"{path}: {e.strerror}", file=sys.stderr)
        failed += 1
        continue
    build = path.split("/meson-logs/")[0]
    for t in lines:
        result = t.get("result")
        if result in PASS:
            passed += 1
        elif result in SKIP:
            skipped.append(f"{build}: {t.get('name')}")
        else:
            failed += 1
            print(f"FAILED {build}: {t.get('name')} ({result})")
for s in skipped:
    print(f"skipped {s}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
