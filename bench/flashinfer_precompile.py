"""Builds FlashInfer's JIT modules for the kernels bench/flashinfer_side_by_side.py measures, ahead of time, on a
machine without a GPU (FLASHINFER_CUDA_ARCH_LIST picks the targets; default 9.0a, the H100 / H200), and installs
each built library where FlashInfer looks for prebuilt modules first: flashinfer/data/aot/<name>/<name>.so in the
package the import finds. A module found there is loaded as is; FlashInfer compiles one only when it is absent.

Modules (bf16 inputs and outputs, int32 indices, no positional encoding, no sliding window, no soft cap):
  decode       BatchDecodeWithPagedKVCacheWrapper's CUDA-core decode kernel, head dim 128
  prefill_fa3  the FA3 (Hopper) batch prefill, head dim 128: ragged and paged prefill, and decode with
               use_tensor_cores=True
  prefill_fa3_192_128  the FA3 ragged prefill with qk 192 / vo 128 (mla_ragged)
  mla_fa3      BatchMLAPagedAttentionWrapper's FA3 backend, ckv 512 / kpe 64
  norm         rmsnorm and fused_add_rmsnorm
  sampling     top_k / top_p / top_k_top_p sampling from probabilities

One module is built at a time with one compiler job (MAX_JOBS, default 1), and each build's wall time is printed.

usage: PYTHONPATH=SITE python3 bench/flashinfer_precompile.py [--modules a,b,...] [--headers-out FILE]
       --headers-out: the files under flashinfer/data that the compiler read (from ninja's depfiles) and the sources
       the modules name, one path a line relative to the package, for trimming the package to what the JIT needs"""
import argparse
import os
import shutil
import sys
import time

os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
os.environ.setdefault("MAX_JOBS", "1")

MODULES = ["decode", "prefill_fa3", "prefill_fa3_192_128", "mla_fa3", "norm", "sampling"]


def specs(names):
    import torch
    from flashinfer.jit.attention.modules import (gen_batch_decode_module, gen_batch_mla_module,
                                                  gen_batch_prefill_module)
    from flashinfer.jit.norm import gen_norm_module
    from flashinfer.jit.sampling import gen_sampling_module
    bf16, i32 = torch.bfloat16, torch.int32
    make = {
        "decode": lambda: gen_batch_decode_module(bf16, bf16, bf16, i32, 128, 128, 0, False, False),
        "prefill_fa3": lambda: gen_batch_prefill_module("fa3", bf16, bf16, bf16, i32, 128, 128, 0, False, False,
                                                        False),
        "prefill_fa3_192_128": lambda: gen_batch_prefill_module("fa3", bf16, bf16, bf16, i32, 192, 128, 0, False,
                                                                False, False),
        "mla_fa3": lambda: gen_batch_mla_module("fa3", bf16, bf16, bf16, i32, 512, 64, False),
        "norm": gen_norm_module,
        "sampling": gen_sampling_module,
    }
    return [(n, make[n]()) for n in names]


def ninja_binary():
    try:
        import ninja
        return os.path.join(ninja.BIN_DIR, "ninja")
    except ImportError:
        return shutil.which("ninja") or "ninja"


def depfile_paths(build_dir, package_root):
    """Files under the package that the compiler read: ninja keeps each object's depfile in its deps log
    (`ninja -t deps`), since the rules say `deps = gcc`."""
    import subprocess
    r = subprocess.run([ninja_binary(), "-C", str(build_dir), "-f", "build.ninja", "-t", "deps"],
                       capture_output=True, text=True, check=True)
    out = set()
    for line in r.stdout.splitlines():
        tok = line.strip()
        if not tok or tok.endswith(")") or ": #deps" in tok:
            continue
        p = os.path.realpath(tok)
        if p.startswith(package_root + os.sep):
            out.add(os.path.relpath(p, package_root))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--headers-out")
    args = ap.parse_args()
    names = [n for n in args.modules.split(",") if n]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; known: {MODULES}")
    import flashinfer
    from flashinfer.jit import env as jit_env
    package_root = os.path.dirname(os.path.realpath(flashinfer.__file__))
    used = set()
    failed = 0
    for name, spec in specs(names):
        aot = jit_env.FLASHINFER_AOT_DIR / spec.name / f"{spec.name}.so"
        t = time.monotonic()
        try:
            spec.build(verbose=False)
        except Exception as e:  # noqa: BLE001 (a module that does not build is reported and skipped)
            print(f"{name}: {spec.name}: build FAILED after {time.monotonic() - t:.0f} s: "
                  f"{type(e).__name__}: {str(e)[-2000:]}", flush=True)
            failed += 1
            continue
        secs = time.monotonic() - t
        so = spec.jit_library_path
        os.makedirs(aot.parent, exist_ok=True)
        shutil.copy2(so, aot)
        print(f"{name}: {spec.name}: built in {secs:.0f} s, {os.path.getsize(so)} bytes -> "
              f"{os.path.relpath(aot, package_root)}", flush=True)
        used |= depfile_paths(spec.build_dir, package_root)
        for src in spec.sources:
            p = os.path.realpath(src)
            if p.startswith(package_root + os.sep):
                used.add(os.path.relpath(p, package_root))
    if args.headers_out:
        with open(args.headers_out, "w") as f:
            f.write("".join(p + "\n" for p in sorted(used)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
