#!/bin/bash
# Runs on the GPU machine (device tool, carry ['.devcarry'], after prepare.sh):
# one Nsight Compute profile per attention kernel named below, with the
# sections that say what bounds a kernel (speed of light, memory, warp stall
# reasons, scheduler issue rate). Text reports go to $OUT/ncu_<name>.txt.
# usage: bash tools/gpu/ncu_attention.sh [mla-decode] [gqa-decode] [prefill-b8] [prefill-b1]
set -u
cd "$(dirname "$0")/../.."
. tools/gpu/devcarry_env.sh  # unpacks .devcarry, sets the loader path and $out
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
bench=.devcarry/bin/test_attention_bench
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats
          --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis)
profile() {  # name, kernel regex, bench arguments...
  local name=$1 regex=$2; shift 2
  timeout 240 "$ncu" --launch-skip 3 --launch-count 1 -k "regex:$regex" "${sections[@]}" \
      "$bench" "$@" --max-time 0.02 > "$out/ncu_$name.txt" 2>&1
  echo "ncu $name: exit $?"
}
for what in "${@:-mla-decode}"; do
  case $what in
    mla-decode) profile mla_decode decode_kernel --kind mla --hq 16 --batches 64 --keys 8192 --page-sizes 64 ;;
    mla-decode-ps1) profile mla_decode_ps1 decode_kernel --kind mla --hq 16 --batches 64 --keys 8192 --page-sizes 1 ;;
    gqa-decode) profile gqa_decode decode_kernel --kind gqa --batches 64 --keys 8192 --page-sizes 64 ;;
    prefill-b8) profile prefill_b8 "prefill_(wgmma_)?kernel" --kind prefill-gqa --batches 8 --keys 8192 --page-sizes 64 ;;
    prefill-b1) profile prefill_b1 "prefill_(wgmma_)?kernel" --kind prefill-gqa --batches 1 --keys 8192 --page-sizes 64 ;;
    *) echo "unknown: $what"; exit 2 ;;
  esac
done
