#!/usr/bin/env python3
"""Builds one of kb's FFI examples (Rust or Go) against the libkb of this build and runs it: on kb's
bundled rmsnorm_h4096 definition it must pass its own check of kb's output (exit 0), and on a file
that does not exist it must fail with kb's message naming the file (exit 1). Skips (exit 77) when the
language's compiler is not installed (Debian: rustc, golang-go; tools/setup.sh installs both).

usage: ffi_example_test.py rust|go SOURCE OUT_DIR LIBKB_DIR INCLUDE_DIR DEFINITION
"""
import os
import shutil
import subprocess
import sys

lang, source, out_dir, lib_dir, include_dir, definition = sys.argv[1:7]
os.makedirs(out_dir, exist_ok=True)
exe = os.path.join(out_dir, f"kb_example_rmsnorm_{lang}")
env = dict(os.environ)
if lang == "rust":
    compiler = shutil.which("rustc")
    cmd = [compiler, "--edition", "2021", "-O", source, "-L", lib_dir, "-l", "kb", "-o", exe]
else:
    compiler = shutil.which("go")
    cmd = [compiler, "build", "-o", exe, source]
    # GOPATH mode and caches inside the build folder: nothing fetched, nothing written elsewhere.
    env.update(GO111MODULE="off", GOCACHE=os.path.join(out_dir, "gocache"), GOPATH=os.path.join(out_dir, "gopath"),
               CGO_ENABLED="1", CGO_CFLAGS=f"-I{include_dir}", CGO_LDFLAGS=f"-L{lib_dir}")
if not compiler:
    print(f"skipped: no {'rustc' if lang == 'rust' else 'go'} (Debian: {'rustc' if lang == 'rust' else 'golang-go'})")
    sys.exit(77)
built = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
if built.returncode != 0:
    print(f"FAIL: building {source}:\n{built.stdout}{built.stderr}")
    sys.exit(1)
env["LD_LIBRARY_PATH"] = lib_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
failures = 0


def check(ok, what, detail):
    global failures
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    failures += 0 if ok else 1


r = subprocess.run([exe, definition], capture_output=True, text=True, env=env, timeout=120)
check(r.returncode == 0 and "rmsnorm_h4096: kb_cpu_rmsnorm on 3 x 4096 bfloat16 rows: largest difference" in r.stdout,
      f"{lang}: kb_cpu_rmsnorm through the C ABI matches the formula", r.stdout + r.stderr)
print(r.stdout.strip())
missing = os.path.join(out_dir, "no_such_definition.json")
r = subprocess.run([exe, missing], capture_output=True, text=True, env=env, timeout=120)
check(r.returncode == 1 and missing in r.stderr and "cannot load the definition" in r.stderr,
      f"{lang}: a missing file is kb's error naming it, exit 1", f"{r.returncode} {r.stderr}")
r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
check(r.returncode == 2 and "usage" in r.stderr, f"{lang}: no argument is a usage error, exit 2", f"{r.returncode} {r.stderr}")
sys.exit(1 if failures else 0)
