#!/bin/sh
# Run on the GPU machine (after bench/prepare.sh here; the device call carries '.devcarry'): a release CUDA build
# of kb for sm_90a in $KB_BUILD (default build-bench) against the packages in .devcarry/debs, unpacked into a
# private prefix (bench/devcarry_env.sh), with the tests reading the shared data from .devcarry/shared, then
# kb's clock sampler as a library for bench/torch_timing.py. Reconfigures nothing that is already configured.
# usage: [KB_TARGETS="tools/kb/kb tests/gpu/test_cuda_moe"] bench/device_build.sh
set -eu
cd "$(dirname "$0")/.."
. bench/devcarry_env.sh
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dbuildtype=release -Dcuda=enabled -Dgpu_arch=sm_90a -Dfuzz=disabled -Dtests=true \
      -Dshared_dir="$shared" --wrap-mode=nodownload
fi
ninja -C "$build" -j "${KB_JOBS:-16}" ${KB_TARGETS:-}  # KB_TARGETS: only these ninja targets (default all)
# the sampler kb's timer reads the SM clock with, as a C library (lib/cuda/clock_sampler.cu's C API)
mkdir -p "$build/bench"
so="$build/bench/libkb_clock_sampler.so"
if [ ! -f "$so" ] || [ lib/cuda/clock_sampler.cu -nt "$so" ] || [ lib/cuda/clock_sampler.hpp -nt "$so" ]; then
  nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC -DKB_CLOCK_SAMPLER_C_API -Ilib \
      -o "$so" lib/cuda/clock_sampler.cu
fi
