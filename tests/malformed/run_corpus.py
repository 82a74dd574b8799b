#!/usr/bin/env python3
"""Runs `kb validate` over the malformed-input corpus.

usage: run_corpus.py KB CASES_DIR EXPECTED_FILE [GOOD_DIR]

EXPECTED_FILE has one line per check: `<path relative to CASES_DIR>\t<substring>`
(blank lines and lines starting with '#' are ignored; a path may appear more
than once, and then every substring must appear). For each case path, kb runs
from CASES_DIR as `kb validate <path>` and must:
  - finish within the timeout and exit with status exactly 1,
  - print each expected substring on stderr,
  - print the summary `validated ...: N error(s)` on stdout with N >= 1,
  - print nothing from a sanitizer.
Every file under CASES_DIR must belong to some case path (no unchecked
inputs), and every case path must exist.

Each top-level entry of GOOD_DIR is a valid input: kb must exit 0 with
`: 0 errors` in its summary, so the runner is shown to tell good from bad.
"""
import os
import re
import subprocess
import sys

TIMEOUT_S = 10
SANITIZER_MARKERS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "UndefinedBehaviorSanitizer")
SUMMARY = re.compile(r"^validated \d+ definitions?, \d+ workloads?, \d+ solutions?, \d+ traces?: (\d+) errors?$",
                     re.M)


def read_expected(path):
    """Returns [(case path, substring)] in file order; raises on malformed lines."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if "\t" not in line:
                raise ValueError(f"{path}:{n}: expected `<path>\\t<substring>`")
            case, want = line.split("\t", 1)
            case = case.strip().rstrip("/")
            if not case or not want:
                raise ValueError(f"{path}:{n}: empty path or substring")
            out.append((case, want))
    return out


def all_files(root):
    """Every file (and empty directory) under root, relative, with '/' separators."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if not dirs and not files and rel_dir != ".":
            out.append(rel_dir.replace(os.sep, "/"))
        for f in files:
            out.append(os.path.normpath(os.path.join(rel_dir, f)).replace(os.sep, "/"))
    return sorted(out)


def covered(path, case_paths):
    return any(path == c or path.startswith(c + "/") for c in case_paths)


def run_kb(kb, cwd, target):
    """Returns (returncode or None on timeout, stdout, stderr)."""
    try:
        p = subprocess.run([kb, "validate", target], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode("utf-8", "replace")
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def excerpt(text, limit=600):
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + "..."
    return text.replace("\n", "\n      | ")


def check_common(rc, out, err, want_rc):
    """Problems shared by bad and good runs."""
    problems = []
    if rc is None:
        return [f"timed out after {TIMEOUT_S} s"]
    for m in SANITIZER_MARKERS:
        if m in err or m in out:
            problems.append(f"sanitizer report ({m})")
            break
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    elif rc != want_rc:
        problems.append(f"exit status {rc}, want {want_rc}")
    return problems


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    kb = os.path.abspath(argv[1])
    cases_dir = os.path.abspath(argv[2])
    expected_file = argv[3]
    good_dir = os.path.abspath(argv[4]) if len(argv) == 5 else None
    if not os.access(kb, os.X_OK):
        print(f"run_corpus: {kb} is not an executable", file=sys.stderr)
        return 2

    try:
        expected = read_expected(expected_file)
    except (OSError, ValueError) as e:
        print(f"run_corpus: {e}", file=sys.stderr)
        return 2

    wants = {}
    for case, want in expected:
        wants.setdefault(case, []).append(want)
    failures = 0

    # Corpus and expectations must match one to one.
    for case in wants:
        if not os.path.lexists(os.path.join(cases_dir, case)):
            print(f"FAIL {case}: listed in {os.path.basename(expected_file)} but not in the corpus")
            failures += 1
    for f in all_files(cases_dir):
        if not covered(f, wants):
            print(f"FAIL {f}: in the corpus but no expected line covers it")
            failures += 1

    checked = 0
    for case, subs in wants.items():
        if not os.path.lexists(os.path.join(cases_dir, case)):
            continue
        checked += 1
        rc, out, err = run_kb(kb, cases_dir, case)
        problems = check_common(rc, out, err, 1)
        if rc is not None:
            for s in subs:
                if s not in err:
                    problems.append(f"stderr lacks: {s}")
            m = SUMMARY.search(out)
            if not m:
                problems.append("no `validated ...: N errors` summary on stdout")
            elif int(m.group(1)) < 1:
                problems.append(f"summary counts {m.group(1)} errors")
        if problems:
            failures += 1
            print(f"FAIL {case}: " + "; ".join(problems))
            print(f"      | stderr: {excerpt(err)}")
        else:
            print(f"ok   {case}")

    good_checked = 0
    if good_dir:
        for entry in sorted(os.listdir(good_dir)):
            good_checked += 1
            rc, out, err = run_kb(kb, good_dir, entry)
            problems = check_common(rc, out, err, 0)
            if rc is not None:
                m = SUMMARY.search(out)
                if not m or int(m.group(1)) != 0:
                    problems.append("summary does not say 0 errors")
            if problems:
                failures += 1
                print(f"FAIL good/{entry}: " + "; ".join(problems))
                print(f"      | stderr: {excerpt(err)}")
            else:
                print(f"ok   good/{entry}")

    print(f"\n{checked} malformed cases ({len(expected)} expected messages), {good_checked} good controls: "
          f"{failures} failure{'s' if failures != 1 else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
