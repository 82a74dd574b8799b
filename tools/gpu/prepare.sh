#!/bin/sh
# Builds kb for the GPU machine here (release, CUDA, sm_90a) and gathers what
# a run there needs into .devcarry/ (ignored by git, carried by the device
# tool): binaries, the two shared libraries the GPU machine lacks (simdjson,
# fmt), and a copy of ../shared/flashinfer-trace.
# usage: tools/gpu/prepare.sh      then run tools/gpu/on_device.sh there with carry ['.devcarry']
#        BUILD=build tools/gpu/prepare.sh   reuse an existing CUDA build (debugoptimized) instead of build-gpu
#        PARTS=tests tools/gpu/prepare.sh   only what `on_device.sh tests` runs (the full bundle is near the device
#                                           tool's 64 MiB limit, working tree included); PARTS=bench: no test binaries
set -eu
cd "$(dirname "$0")/../.."
tools/setup.sh
b=${BUILD:-build-gpu}
if [ -f "$b/build.ninja" ]; then :; else
  meson setup "$b" -Dbuildtype=release -Dcuda=enabled -Dfuzz=disabled -Dtests=true >/dev/null
fi
ninja -C "$b" >/dev/null
rm -rf .devcarry
mkdir -p .devcarry/bin .devcarry/lib .devcarry/shared
cp "$b/tools/kb/kb" "$b/lib/kb-worker" .devcarry/bin/
cp -P "$b"/capi/libkb.so.1 "$b"/capi/libkb.so.0.1.0 .devcarry/lib/  # C ABI tests (test_multi_gpu, the examples)
[ -x "$b/examples/cpp/kb_example_engine_step" ] && cp "$b/examples/cpp/kb_example_engine_step" .devcarry/bin/
cp "$b/tests/capi/test_capi" .devcarry/bin/capi_test  # the C ABI tests with a device (on_device.sh tests)
parts=${PARTS:-all}
for t in "$b"/tests/gpu/test_* "$b/tests/plugin/test_plugin_gpu"; do
  [ -f "$t" ] && [ -x "$t" ] || continue
  [ "$parts" = bench ] && continue
  # the tests that run in attn-check, prefill-check, plugin-gpu and gemv-balance, not in `tests`
  [ "$parts" = tests ] && case $(basename "$t") in test_plugin_gpu|test_attention_bench|test_gemv_ab|test_cuda_attention|test_cuda_prefill) continue;; esac
  cp "$t" .devcarry/bin/
done
# outside-solution GPU cases (on_device.sh plugin-gpu): the hostile and example CUDA plugins
cp "$b/tests/plugin/libkb_hostile_cuda_plugin.so" "$b/examples/plugin/libkb_example_cuda_plugin.so" .devcarry/lib/
# the one-file ceiling microbenchmarks (on_device.sh ceilings), rebuilt only when their source changed
if command -v nvcc >/dev/null && [ "$parts" != tests ]; then
  mkdir -p "$b/gpu-tools"
  for t in gemv_read_ceiling mla_gather_ceiling copy_variants batch1_floor long_k_variants l2_flush_check gemm_candidates; do
    srcs="tools/gpu/$t.cu"; libs=""
    # long_k_variants times kb's own long-K kernel beside cuBLASLt's formulations
    [ $t = long_k_variants ] && libs=-lcublasLt && srcs="$srcs kernels/gemm/cuda/wgmma_gemm.cu"
    # gemm_candidates: cuBLASLt's configurations beside cublasGemmEx, what torch.matmul calls (--sweep: all of them)
    [ $t = gemm_candidates ] && libs="-lcublasLt -lcublas"
    stale=0; [ -x "$b/gpu-tools/$t" ] || stale=1
    for f in $srcs tools/gpu/standalone_cuda.cuh kernels/gemm/cuda/wgmma_gemm.hpp kernels/common/hopper_ptx.cuh; do
      [ "$f" -nt "$b/gpu-tools/$t" ] && stale=1
    done
    if [ $stale = 1 ]; then
      nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -o "$b/gpu-tools/$t" $srcs $libs
    fi
    cp "$b/gpu-tools/$t" .devcarry/bin/
  done
fi
# kb's clock sampler as a library for tools/gpu/torch_timing.py (ctypes), so torch's batches are checked the same way
if command -v nvcc >/dev/null; then
  if [ ! -f "$b/gpu-tools/libkb_clock_sampler.so" ] || [ lib/cuda/clock_sampler.cu -nt "$b/gpu-tools/libkb_clock_sampler.so" ] \
      || [ lib/cuda/clock_sampler.hpp -nt "$b/gpu-tools/libkb_clock_sampler.so" ]; then
    mkdir -p "$b/gpu-tools"
    nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC -DKB_CLOCK_SAMPLER_C_API -Ilib \
      -o "$b/gpu-tools/libkb_clock_sampler.so" lib/cuda/clock_sampler.cu
  fi
  cp "$b/gpu-tools/libkb_clock_sampler.so" .devcarry/lib/
fi
strip .devcarry/bin/* .devcarry/lib/libkb.so.0.1.0 2>/dev/null || true
for lib in libsimdjson.so.14 libfmt.so.9; do cp -L "/usr/lib/x86_64-linux-gnu/$lib" .devcarry/lib/; done
# CUPTI (kb bench --cupti, test_cupti_timing), in case the GPU machine's loader path lacks it
for f in /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13; do
  if [ -f "$f" ]; then cp -L "$f" .devcarry/lib/; break; fi
done
cp -r ../shared/flashinfer-trace .devcarry/shared/
cp -r ../shared/backendbench .devcarry/shared/  # the BackendBench trace (on_device.sh backendbench)
# one xz bundle (the device tool carries 64 MiB at most, the working tree included; xz: about 34 MB where gzip
# made 49); on_device.sh unpacks it
(cd .devcarry && tar cf - bin lib shared | xz -T2 -6 > bundle.txz && rm -rf bin lib shared)
du -sh .devcarry
