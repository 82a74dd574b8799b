"""Builds FlashInfer's JIT modules for the kernels bench/flashinfer_side_by_side.py measures, ahead of time, on a
machine without a GPU (FLASHINFER_CUDA_ARCH_LIST picks the targets; default 9.0a, the H100 / H200), and installs
each built library where FlashInfer looks for prebuilt modules first: flashinfer/data/aot/<name>/<name>.so in the
package the import finds. A module found there is loaded as is; FlashInfer compiles one only when it is absent.

Modules (bf16 inputs and outputs, int32 indices, no positional encoding, no sliding window, no soft cap):
  decode_dD    BatchDecodeWithPagedKVCacheWrapper's CUDA-core decode kernel, head dim D for each D in
               DECODE_HEAD_DIMS (kb's GQA decode head dims): FlashInfer names its module by the head dim and
               dispatches the group size (1, 2, 3, 4, 6, 8 and 16 only) inside it
  prefill_fa3  the FA3 (Hopper) batch prefill, head dim 128: ragged and paged prefill, and decode with
               use_tensor_cores=True
  prefill_fa3_192_128  the FA3 ragged prefill with qk 192 / vo 128 (mla_ragged)
  prefill_fa3_d256  the FA3 batch prefill, head dim 256
  mla_fa3      BatchMLAPagedAttentionWrapper's FA3 backend, ckv 512 / kpe 64
  norm         rmsnorm and fused_add_rmsnorm
  sampling     top_k / top_p / top_k_top_p sampling from probabilities

One module is built at a time with one compiler job (MAX_JOBS, default 1), and each build's wall time is printed.

usage: PYTHONPATH=SITE python3 bench/flashinfer_precompile.py [--modules a,b,...] [--headers-out FILE] [--pack TAR]
       --headers-out: the files under flashinfer/data that the compiler read (from ninja's depfiles) and the sources
       the modules name, one path a line relative to the package
       --pack: a .tar.gz of the package trimmed to what these kernels need (below), rooted at flashinfer/
       --check-aot: load each module's prebuilt library with FLASHINFER_DISABLE_JIT=1 (no compiler run; no GPU
       needed), against the package the import finds (e.g. the unpacked tarball)

The trimmed package keeps: the Python modules that `import flashinfer` and the APIs above import, with every .py
file beside them except in the large families these kernels do not use (experimental, moe_ep, fused_moe, cute_dsl,
gemm, comm: only what the import needs there); flashinfer/data/aot (the libraries built here); data/include and
data/csrc's top-level files (the sources and Jinja templates the module generators read); and of data/cccl,
data/cutlass, data/spdlog and data/csrc's folders the headers the compiler read, so that FlashInfer can still
rebuild these modules from the carried files on a machine where a prebuilt one does not load."""
import argparse
import os
import shutil
import sys
import time

os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
os.environ.setdefault("MAX_JOBS", "1")

LARGE_FAMILIES = ("experimental", "moe_ep", "fused_moe", "cute_dsl", "gemm", "comm")
DECODE_HEAD_DIMS = (64, 96, 128, 192, 256)  # kernels/attention/launch.hpp's kGqaHeadDims
MODULES = [f"decode_d{d}" for d in DECODE_HEAD_DIMS] + ["prefill_fa3", "prefill_fa3_192_128", "prefill_fa3_d256",
                                                         "mla_fa3", "norm", "sampling"]


def specs(names):
    import torch
    from flashinfer.jit.attention.modules import (gen_batch_decode_module, gen_batch_mla_module,
                                                  gen_batch_prefill_module)
    from flashinfer.jit.norm import gen_norm_module
    from flashinfer.jit.sampling import gen_sampling_module
    bf16, i32 = torch.bfloat16, torch.int32
    make = {
        **{f"decode_d{d}": (lambda d=d: gen_batch_decode_module(bf16, bf16, bf16, i32, d, d, 0, False, False))
           for d in DECODE_HEAD_DIMS},
        "prefill_fa3": lambda: gen_batch_prefill_module("fa3", bf16, bf16, bf16, i32, 128, 128, 0, False, False,
                                                        False),
        "prefill_fa3_192_128": lambda: gen_batch_prefill_module("fa3", bf16, bf16, bf16, i32, 192, 128, 0, False,
                                                                False, False),
        "prefill_fa3_d256": lambda: gen_batch_prefill_module("fa3", bf16, bf16, bf16, i32, 256, 256, 0, False, False,
                                                             False),
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


def imported_python_files(package_root):
    """The package's .py files that the import of the APIs measured loads, and their siblings (module docstring)."""
    import importlib
    for m in ("flashinfer", "flashinfer.decode", "flashinfer.prefill", "flashinfer.mla", "flashinfer.norm",
              "flashinfer.sampling", "flashinfer.mla._batch_mla._backends.fa3_backend",
              "flashinfer.mla._batch_mla._backends.fa2_backend", "flashinfer.mla._batch_mla._auto_policy"):
        importlib.import_module(m)
    files = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and os.path.realpath(f).startswith(package_root + os.sep):
            files.add(os.path.relpath(os.path.realpath(f), package_root))
    for d in {os.path.dirname(f) for f in files}:
        if d.split(os.sep)[0] in LARGE_FAMILIES:
            continue
        for f in os.listdir(os.path.join(package_root, d)):
            if f.endswith(".py"):
                files.add(os.path.join(d, f))
    return files


def pack(tar_path, package_root, compiled_headers):
    import tarfile
    keep = imported_python_files(package_root) | set(compiled_headers)
    data = os.path.join(package_root, "data")
    for sub in ("aot", "include"):
        for dirpath, _, names in os.walk(os.path.join(data, sub)):
            keep |= {os.path.relpath(os.path.join(dirpath, n), package_root) for n in names}
    csrc = os.path.join(data, "csrc")
    keep |= {os.path.join("data", "csrc", n) for n in os.listdir(csrc) if os.path.isfile(os.path.join(csrc, n))}
    keep = sorted(p for p in keep if os.path.isfile(os.path.join(package_root, p)) and "__pycache__" not in p)
    with tarfile.open(tar_path, "w:gz", compresslevel=9) as tar:
        for p in keep:
            tar.add(os.path.join(package_root, p), arcname=os.path.join("flashinfer", p), recursive=False)
    size = sum(os.path.getsize(os.path.join(package_root, p)) for p in keep)
    print(f"packed {len(keep)} files ({size} bytes) into {tar_path} ({os.path.getsize(tar_path)} bytes)")


def check_aot(names):
    """Each module's prebuilt library found and loaded without compiling."""
    os.environ["FLASHINFER_DISABLE_JIT"] = "1"
    failed = 0
    for name, spec in specs(names):
        try:
            if not spec.is_aot:
                raise RuntimeError(f"no prebuilt library at {spec.aot_path}")
            spec.build_and_load()
            print(f"{name}: {spec.name}: prebuilt library loads ({spec.aot_path})")
        except Exception as e:  # noqa: BLE001
            print(f"{name}: {spec.name}: FAILED: {type(e).__name__}: {str(e)[:500]}")
            failed += 1
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--headers-out")
    ap.add_argument("--pack")
    ap.add_argument("--check-aot", action="store_true")
    args = ap.parse_args()
    names = [n for n in args.modules.split(",") if n]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; known: {MODULES}")
    if args.check_aot:
        return 1 if check_aot(names) else 0
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
        print(f"{name}: {spec.name}: built in {secs:.0f} s (0 s: already built), {os.path.getsize(so)} bytes -> "
              f"{os.path.relpath(aot, package_root)}", flush=True)
        used |= depfile_paths(spec.build_dir, package_root)
        for src in spec.sources:
            p = os.path.realpath(src)
            if p.startswith(package_root + os.sep):
                used.add(os.path.relpath(p, package_root))
    if args.headers_out:
        with open(args.headers_out, "w") as f:
            f.write("".join(p + "\n" for p in sorted(used)))
    if args.pack:
        pack(args.pack, package_root, used)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
