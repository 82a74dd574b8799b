#!/bin/bash
# Runs on the GPU machine (through the device tool, carry ['.devcarry']):
# GPU tests, kb bench on the bundled and shipped datasets, and the benchmark
# against PyTorch. Results go to $OUT (or ./gpu-out).
# usage: bash tools/gpu/on_device.sh [tests|bench|compare|goldens|all]...
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KB_SHARED_DIR="$PWD/.devcarry/shared"
out=${OUT:-gpu-out}
mkdir -p "$out"
kb=.devcarry/bin/kb
what=${*:-all}
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/device.txt"
$kb --version
$kb devices || status=1

if [[ $what == *tests* || $what == all ]]; then
  for t in .devcarry/bin/test_*; do
    echo "== $t"
    "$t"; rc=$?
    if [ $rc -eq 77 ]; then echo "skipped"; elif [ $rc -ne 0 ]; then echo "FAILED ($rc)"; status=1; fi
  done 2>&1 | tee "$out/gpu_tests.log"
fi
if [[ $what == *bench* || $what == all ]]; then
  $kb bench --device cuda --out "$out/bundled" 2>&1 | tee "$out/bench_bundled.txt"
  $kb bench .devcarry/shared/flashinfer-trace --device cuda --definitions "$(ls .devcarry/shared/flashinfer-trace/definitions/gemm .devcarry/shared/flashinfer-trace/definitions/rmsnorm | grep json | sed 's/.json//' | paste -sd,)" \
      --trials 1 --out "$out/shipped" 2>&1 | tee "$out/bench_shipped.txt"
fi
if [[ $what == *compare* || $what == all ]]; then
  python3 tools/gpu/compare_torch.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
      --bundled kernels --out "$out" 2>&1 | tail -80
fi
if [[ $what == *goldens* ]]; then
  python3 tools/goldens/make_goldens.py .devcarry/shared/flashinfer-trace/definitions "$out/goldens" 2>&1 | tail -20
fi
exit $status
