#!/bin/bash
# Issue 4's whole benchmark on one machine: the parts below, run in consecutive device calls while the
# machine stays warm (one start, one driver, one build), each into $OUT/<part>. A full compare_torch.py run
# takes longer than one 10-minute call, so it is cut by M / family here; each part stops itself before
# its time is up and keeps what it measured. Join the parts with
#   python3 tools/gpu/issue4_bars.py <files>/*/benchmark.json --nsight <files>/nsight/nsight_check.json \
#       [--interleaved <files>/interleaved/interleaved.json]
# usage (carry ['.devcarry'] from tools/gpu/prepare.sh): bash tools/gpu/bars_one_lease.sh PART [PART...]
#   part         what                                                        limit  took (H200; session 35, session 36)
#   gemm-large   gemm at M = 128, 512, 2048, 8192; torch before and after kb  300 s  226 s, 186 s
#   gemm-mid     gemm at M = 256, 1024, 4096; torch before and after kb       200 s  141 s, 110 s
#   gemm-16384   gemm at M = 16384; torch before and after kb                 260 s  220 s, 192 s
#   gemm-small   gemm at M = 1, 2, 4, 8, 16 (cuBLASLt beside the gemv)        230 s  182 s, 211 s
#   norms        rmsnorm, fused add + rmsnorm, silu_and_mul, batch 1 .. 32768 200 s  112 s, 157 s
#   nsight       kb's timing against Nsight Compute (nsight_check.py)         200 s  136 s, 194 s
#   gemm-mid-noclusters  gemm-mid with KB_CUBLASLT_CLUSTER_VARIANTS=0 (the autotuner without its cluster-shape
#                variants): run right after gemm-mid, the A/B of that switch  200 s  (session 36, then as
#                gemm-mid-clusters with =1 before that became the default: 104 s)
#   gemm-mid-notiles  gemm-mid with KB_CUBLASLT_TILE_VARIANTS=0 (without the tile variants): the A/B of that
#                switch, as gemm-mid-noclusters                              200 s
#   interleaved  kb_cuda_gemm and torch.matmul timed alternately in one      420 s  66 s at M = 128..4096
#                process (interleaved_ratio.py; INTERLEAVED_ARGS, e.g. "--values 256,1024"): not a bar, a
#                check of how much of a gemm ratio is the clock
# Three calls hold them all: "gemm-large gemm-mid", "gemm-16384 gemm-small", "norms nsight" (session 35: 1055 s
# for the three calls, about 1150 s with the start). BARS_SCALE (default 1) multiplies every part's time limit.
set -u
cd "$(dirname "$0")/../.."
. tools/gpu/devcarry_env.sh >/dev/null
kb=.devcarry/bin/kb
defs=.devcarry/shared/flashinfer-trace/definitions
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$out/device.txt"
status=0

compare() {  # part, seconds, compare_torch.py arguments...
  local part=$1 secs; secs=$(python3 -c "print(int($2 * ${BARS_SCALE:-1}))"); shift 2
  local t0=$SECONDS
  timeout $((secs + 20)) python3 tools/gpu/compare_torch.py --kb "$kb" --definitions "$defs" --bundled kernels \
      --out "$out/$part" --time-limit "$secs" "$@" > "$out/$part.log" 2>&1
  local rc=$?
  echo "$part: exit $rc in $((SECONDS - t0)) s; $(grep -c '"definition"' "$out/$part/benchmark.json" 2>/dev/null) rows"
  grep -E "STOPPED|stopped|families done" "$out/$part.log" | tail -3
  [ $rc -eq 0 ] || status=1
}

mid="--families gemm --values 256,1024,4096 --torch-after"  # gemm-mid and its A/B twin gemm-mid-noclusters
for part in "$@"; do
  case $part in
    gemm-large) KB_CUBLASLT_LOG=1 compare gemm-large 300 --families gemm --values 128,512,2048,8192 --torch-after ;;
    gemm-mid) KB_CUBLASLT_LOG=1 compare gemm-mid 200 $mid ;;
    gemm-mid-noclusters) KB_CUBLASLT_LOG=1 KB_CUBLASLT_CLUSTER_VARIANTS=0 compare gemm-mid-noclusters 200 $mid ;;
    gemm-mid-notiles) KB_CUBLASLT_LOG=1 KB_CUBLASLT_TILE_VARIANTS=0 compare gemm-mid-notiles 200 $mid ;;
    gemm-16384) KB_CUBLASLT_LOG=1 compare gemm-16384 260 --families gemm --values 16384 --torch-after ;;
    gemm-small) compare gemm-small 230 --families gemm --values 1,2,4,8,16 ;;
    norms) compare norms 200 --families rmsnorm,silu_and_mul --torch-after ;;
    nsight)
      t0=$SECONDS
      timeout 200 python3 tools/gpu/nsight_check.py --kb "$kb" --definitions "$defs" --bundled kernels \
          --out "$out/nsight" --lib .devcarry/lib/libkb.so.1 > "$out/nsight.log" 2>&1
      rc=$?; echo "nsight: exit $rc in $((SECONDS - t0)) s"; tail -12 "$out/nsight.log"; [ $rc -eq 0 ] || status=1 ;;
    interleaved)
      t0=$SECONDS
      timeout 440 python3 tools/gpu/interleaved_ratio.py --lib .devcarry/lib/libkb.so.1 --definitions "$defs" \
          --out "$out/interleaved" --time-limit 400 ${INTERLEAVED_ARGS:-} > "$out/interleaved.log" 2>&1
      rc=$?; echo "interleaved: exit $rc in $((SECONDS - t0)) s"; tail -3 "$out/interleaved.log"
      [ $rc -eq 0 ] || status=1 ;;
    *) echo "bars_one_lease.sh: unknown part '$part' (gemm-large, gemm-mid, gemm-mid-noclusters, gemm-mid-notiles, gemm-16384, gemm-small, norms, nsight, interleaved)" >&2; exit 2 ;;
  esac
done
exit $status
