#!/bin/bash
# Runs on the GPU machine (through the device tool, carry ['.devcarry']):
# GPU tests, kb bench on the bundled and shipped datasets, and the benchmark
# against PyTorch. Results go to $OUT (or ./gpu-out).
# usage: bash tools/gpu/on_device.sh [tests|bench|shipped|compare|goldens|nsight|all]...
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
  $kb bench --device cuda --out "$out/bundled" > "$out/bench_bundled.txt" 2>&1; tail -5 "$out/bench_bundled.txt"
fi
if [[ $what == *shipped* || $what == all ]]; then
  # every shipped gemm and rmsnorm workload through kb's default CUDA solutions (correctness)
  defs=$(ls .devcarry/shared/flashinfer-trace/definitions/gemm .devcarry/shared/flashinfer-trace/definitions/rmsnorm | grep json | sed 's/.json//' | paste -sd,)
  timeout ${SHIPPED_TIMEOUT:-240} $kb bench .devcarry/shared/flashinfer-trace --device cuda --definitions "$defs" \
      --solutions kb_cuda_gemm,kb_cuda_rmsnorm --trials 1 --no-time --out "$out/shipped" > "$out/bench_shipped.txt" 2>&1
  echo "shipped: exit $?"; tail -4 "$out/bench_shipped.txt"
fi
if [[ $what == *compare* || $what == all ]]; then
  timeout ${COMPARE_TIMEOUT:-300} python3 tools/gpu/compare_torch.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
      --bundled kernels --out "$out" ${COMPARE_ARGS:-} > "$out/compare.log" 2>&1; echo "compare: exit $?"; tail -3 "$out/compare.log"
fi
if [[ $what == *goldens* ]]; then
  mkdir -p "$out/goldens"; timeout 120 python3 tools/goldens/make_goldens.py .devcarry/shared/flashinfer-trace/definitions "$out/goldens" > "$out/goldens.log" 2>&1
  echo "goldens: exit $?"; tail -3 "$out/goldens.log"; (cd "$out" && tar czf goldens.tgz goldens && rm -rf goldens)
fi
if [[ $what == *nsight* ]]; then
  # kb's latency vs Nsight Compute's kernel duration, kernels over 20 us (bar: within 5%)
  timeout ${NSIGHT_TIMEOUT:-300} python3 tools/gpu/nsight_check.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
      --bundled kernels --out "$out/nsight" > "$out/nsight.log" 2>&1; echo "nsight: exit $?"; tail -8 "$out/nsight.log"
fi
exit $status
