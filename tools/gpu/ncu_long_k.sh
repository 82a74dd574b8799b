#!/bin/bash
# Runs on the GPU machine (device tool, carry ['.devcarry'], after prepare.sh):
# Nsight Compute profiles of kb's long-K wgmma gemm (kernels/gemm/cuda/
# wgmma_gemm.cu) as tools/gpu/long_k_variants.cu launches it, one per variant
# named below (LKV_VARIANTS names, exact), at M = ${NCU_M:-2048} on 8192 x 28672 (LKV_SHAPES=NxK: another shape).
# Per variant: the sections that say what bounds it ($OUT/ncu_lk_<n>.txt) and
# the per-SASS-instruction warp stall samples ($OUT/ncu_lk_<n>_sass.csv.gz),
# which say which wait (the consumers' on a full stage, the producer's on an
# empty one) the warps sit in.
# usage: bash tools/gpu/ncu_long_k.sh ["variant$" ...]
set -u
cd "$(dirname "$0")/../.."
. tools/gpu/devcarry_env.sh  # unpacks .devcarry, sets the loader path and $out
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats
          --section SourceCounters --section LaunchStats)
n=0
for v in "${@:-wgmma p0 g4\$}"; do
  n=$((n + 1))
  echo "ncu_lk_$n: $v" | tee -a "$out/ncu_lk_index.txt"
  # launch 1: the precision check; skip it and two warm-ups (the first shape, 8192 x 28672)
  LKV_VARIANTS="$v" timeout 300 "$ncu" --launch-skip 3 --launch-count 1 -k regex:wgmma_gemm_kernel "${sections[@]}" \
      -o "$out/ncu_lk_$n" -f .devcarry/bin/long_k_variants ${NCU_M:-2048} > "$out/ncu_lk_${n}_run.txt" 2>&1
  echo "  profile: exit $?"
  "$ncu" -i "$out/ncu_lk_$n.ncu-rep" --print-details all > "$out/ncu_lk_$n.txt" 2>&1
  "$ncu" -i "$out/ncu_lk_$n.ncu-rep" --page source --print-source sass --csv 2> /dev/null | gzip > "$out/ncu_lk_${n}_sass.csv.gz"
  rm -f "$out/ncu_lk_$n.ncu-rep"
  grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Stall" "$out/ncu_lk_$n.txt" | head -20
done
