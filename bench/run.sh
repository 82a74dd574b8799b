#!/bin/bash
# Runs on the GPU machine (after bench/prepare.sh here; the device call carries '.devcarry'): builds kb if needed
# (bench/device_build.sh), then one family's run. Results go to $OUT (or ./bench-out); each family's table, in
# the format of bench/results/h200.md, is $OUT/FAMILY.md.
# usage: bash bench/run.sh FAMILY [PART...]
#   tests                  every GPU test: meson test --suite gpu (extra arguments go to meson test)
#   gemm [small mid large 16384]  kb_cuda_gemm against torch.matmul over the shipped gemm shapes, by M:
#                          small 1,2,4,8,16 (cuBLASLt beside the gemv), mid 256,1024,4096, large 128,512,2048,8192,
#                          16384; default all four (about 12 minutes on an H200: two parts fit one 10-minute call;
#                          join calls with bench/summary.py over their gemm-*/benchmark.json)
#   norms                  rmsnorm, fused add + rmsnorm, silu_and_mul and rope against torch, batch 1 .. 32768
#   attention              paged GQA / MLA decode and causal prefill against SDPA and the copy bandwidth
#                          (attention --grid decode: GQA decode over a generated grid of shapes instead)
#   nsight                 kb's timing against Nsight Compute's kernel duration (kernels over 20 us)
#   backendbench           kb's CUDA ATen kernels against PyTorch eager on the BackendBench trace
#   moe | linear | sampling  kb's CUDA solutions of those op types (linear: gdn, mamba_ssu, dsa_paged) judged and
#                          timed by kb bench at serving sizes (bench_kernels.py): latency, fraction of the copy
#                          bandwidth and of the bf16 tensor-core rate; moe and linear then run bench/side_by_side.py:
#                          fla (gdn), mamba-ssm's Triton selective_state_update (mamba_ssu) and torch._scaled_mm
#                          (fp8 block-scale moe) on the same definitions and axes, $OUT/FAMILY_side_by_side.md
#   serving                kb's CUDA attention solutions (gqa_paged, gqa_ragged, mla_paged, mla_ragged) judged by
#                          kb bench at serving sizes (paged decode of 64 x 4096 tokens, causal prefill of 16 x 1024
#                          and 1 x 16384): latency and each evaluation's wall time, judging included; extra
#                          arguments go to bench_kernels.py (e.g. --max-definitions 2)
#   prefill_dims           ragged causal prefill at head dims 64, 96, 128, 192, 256 (group 4) and MLA's qk 192 /
#                          vo 128, judged and timed by kb bench at the serving prefill sizes (TFLOP/s)
#   flashinfer [serving rmsnorm sampling decode_grid prefill_dims]  kb bench at serving sizes on those families
#                          (bench_kernels.py, two definitions of each kind, one for sampling: BENCH_MAX_DEFINITIONS;
#                          decode_grid and prefill_dims, not in the default parts: paged GQA decode over 48 generated
#                          shapes, ragged prefill at every head dim; every definition of theirs), then
#                          FlashInfer on the same definitions and axes (bench/flashinfer_side_by_side.py):
#                          $OUT/flashinfer_side_by_side.md.
#                          FlashInfer comes from .whl/flashinfer/ (bench/flashinfer_prepare.sh; name .whl in the
#                          device call's carry list), installed into /tmp/site with its modules precompiled
# KB_BIN names a kb program built elsewhere (carried): then nothing is built here.
# BENCH_SCALE (default 1) multiplies the time limits of the parts.
set -u
cd "$(dirname "$0")/.."
family=${1:-}; [ $# -gt 0 ] && shift
case $family in tests|gemm|norms|attention|nsight|backendbench|moe|linear|sampling|serving|prefill_dims|flashinfer) ;;
  *) echo "usage: bash bench/run.sh tests|gemm|norms|attention|nsight|backendbench|moe|linear|sampling|serving|prefill_dims|flashinfer [PART...]" >&2
     exit 2 ;;
esac
if [ -n "${KB_BIN:-}" ]; then
  . bench/devcarry_env.sh
  kb=$KB_BIN
else
  bench/device_build.sh || exit 1
  . bench/devcarry_env.sh
  kb=$build/tools/kb/kb
fi
defs=$shared/flashinfer-trace/definitions
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/device.txt" 2>&1
cat "$out/device.txt"
status=0

limit() { python3 -c "print(int($1 * ${BENCH_SCALE:-1}))"; }
compare() {  # part, seconds, compare_torch.py arguments...
  local part=$1 secs; secs=$(limit "$2"); shift 2
  timeout $((secs + 20)) python3 bench/compare_torch.py --kb "$kb" --definitions "$defs" --bundled kernels \
      --out "$out/$part" --time-limit "$secs" "$@" > "$out/$part.log" 2>&1
  local rc=$?
  echo "$part: exit $rc"; grep -E "STOPPED|stopped|families done" "$out/$part.log" | tail -3
  [ $rc -eq 0 ] || status=1
}

case $family in
  tests)
    meson test -C "$build" --suite gpu --print-errorlogs --no-rebuild "$@" || status=1
    cp "$build/meson-logs/testlog.txt" "$out/tests.log" 2>/dev/null ;;
  gemm)
    parts=${*:-small mid large 16384}
    for part in $parts; do
      case $part in
        small) compare gemm-small 230 --families gemm --values 1,2,4,8,16 ;;
        mid) compare gemm-mid 200 --families gemm --values 256,1024,4096 --torch-after ;;
        large) compare gemm-large 300 --families gemm --values 128,512,2048,8192 --torch-after ;;
        16384) compare gemm-16384 260 --families gemm --values 16384 --torch-after ;;
        *) echo "run.sh gemm: unknown part '$part' (small, mid, large, 16384)" >&2; exit 2 ;;
      esac
    done
    python3 bench/summary.py "$out"/gemm-*/benchmark.json --command "bash bench/run.sh gemm $*" \
        --out "$out/gemm.md" && cat "$out/gemm.md" ;;
  norms)
    compare norms 260 --families rmsnorm,silu_and_mul,rope --torch-after
    python3 bench/summary.py "$out/norms/benchmark.json" --command "bash bench/run.sh norms" --out "$out/norms.md" \
        && cat "$out/norms.md" ;;
  moe|linear|sampling|serving|prefill_dims)
    python3 bench/bench_kernels.py --kb "$kb" --shared "$shared" --kernels kernels --family "$family" \
        --out "$out/$family" --time-limit "$(limit 300)" "$@" > "$out/$family.log" 2>&1 || status=1
    echo "$family: exit $status"; grep -E "STOPPED|not measured|planned" "$out/$family.log"
    cp "$out/$family/$family.md" "$out/$family.md" 2>/dev/null && cat "$out/$family.md"
    if [ "$family" = moe ] || [ "$family" = linear ]; then
      # the other implementations beside kb's on the same definitions and axes (bench/side_by_side.py); the wheels
      # listed in bench/README.md travel in .whl (a missing package prints 'not compared: <why>')
      if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
      fi
      sdist=$(ls .whl/mamba_ssm-*.tar.gz 2>/dev/null | head -1)
      timeout "$(limit 240)" python3 bench/side_by_side.py --family "$family" --run "$out/$family" \
          --out-md "$out/${family}_side_by_side.md" --time-limit "$(limit 200)" ${sdist:+--mamba-sdist "$sdist"} \
          > "$out/${family}_side_by_side.log" 2>&1 || status=1
      grep -E "^not compared|check FAILED" "$out/${family}_side_by_side.log"
      cat "$out/${family}_side_by_side.md" 2>/dev/null
    fi ;;
  flashinfer)
    parts=${*:-serving rmsnorm sampling}
    runs=()
    for part in $parts; do
      case $part in
        serving) secs=150 ndefs=2 ;; rmsnorm) secs=60 ndefs=2 ;; sampling) secs=120 ndefs=1 ;;
        decode_grid) secs=240 ndefs= ;;  # its definitions are generated, one workload each: all of them run
        prefill_dims) secs=120 ndefs= ;;  # ragged causal prefill at every head dim (generated) and MLA's
        *) echo "run.sh flashinfer: unknown part '$part' (serving, rmsnorm, sampling, decode_grid, prefill_dims)" >&2
           exit 2 ;;
      esac
      ndefs=${BENCH_MAX_DEFINITIONS:-$ndefs}
      python3 bench/bench_kernels.py --kb "$kb" --shared "$shared" --kernels kernels --family "$part" \
          --out "$out/$part" --time-limit "$(limit $secs)" ${ndefs:+--max-definitions "$ndefs"} \
          > "$out/$part.log" 2>&1 || status=1
      echo "$part: exit $status"; grep -E "STOPPED|not measured|planned" "$out/$part.log"
      runs+=(--run "$out/$part")
    done
    # FlashInfer's Python package with its modules precompiled (flashinfer-min.tar.gz) and the wheels it imports
    fi_dir=.whl/flashinfer
    if [ -f "$fi_dir/flashinfer-min.tar.gz" ]; then
      mkdir -p /tmp/site && tar xzf "$fi_dir/flashinfer-min.tar.gz" -C /tmp/site \
        && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$fi_dir"/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
      export FLASHINFER_WORKSPACE_BASE=/tmp/flashinfer-ws
    fi
    timeout "$(limit 240)" python3 bench/flashinfer_side_by_side.py "${runs[@]}" \
        --out-md "$out/flashinfer_side_by_side.md" --time-limit "$(limit 200)" ${FLASHINFER_JIT:+--jit} \
        > "$out/flashinfer_side_by_side.log" 2>&1 || status=1
    grep -E "^not compared|check FAILED|^flashinfer " "$out/flashinfer_side_by_side.log"
    cat "$out/flashinfer_side_by_side.md" 2>/dev/null ;;
  attention)
    timeout "$(limit 540)" python3 bench/bench_attention.py --driver "$build/tests/gpu/kb_attention_bench" \
        --out "$out" "$@" > "$out/attention.log" 2>&1 || status=1
    echo "attention: exit $status"
    [ -f "$out/benchmark_attention.md" ] && mv "$out/benchmark_attention.md" "$out/attention.md" && cat "$out/attention.md"
    [ -f "$out/benchmark_attention_grid.md" ] && cat "$out/benchmark_attention_grid.md" ;;
  nsight)
    timeout "$(limit 300)" python3 bench/nsight_check.py --kb "$kb" --definitions "$defs" --bundled kernels \
        --out "$out/nsight" --lib "$build/capi/libkb.so.1" > "$out/nsight.log" 2>&1 || status=1
    echo "nsight: exit $status"; tail -24 "$out/nsight.log" ;;
  backendbench)
    # PyTorch eager first, then kb on the same lines, both timed by their own CUDA events (L2 warm, median of 20
    # after 3 warm-up calls); kb writes backendbench.md with each operator's speedup over the baseline
    trace=$shared/backendbench/tritonbench-op-traces.txt
    tt=$(limit 240); kbt=$(limit 330)
    timeout "$tt" python3 bench/torch_baseline.py "$trace" --ops "$($kb backendbench ops --device cuda)" \
        --time-limit $((tt - 30)) --out "$out/torch_baseline.json" > "$out/torch_baseline.log" 2>&1
    echo "torch baseline: exit $?"
    base=(); [ -s "$out/torch_baseline.json" ] && base=(--baseline "$out/torch_baseline.json")
    timeout "$kbt" "$kb" backendbench run "$trace" --device cuda ${base[@]+"${base[@]}"} --time-limit $((kbt - 40)) \
        --markdown "$out/backendbench.md" --save-lines "$out/backendbench_lines.json" "$@" > "$out/backendbench.txt" 2>&1
    rc=$?; echo "kb backendbench run --device cuda: exit $rc"; [ $rc -le 1 ] || status=1
    grep -E "^device|^score|^coverage|^fully correct|^time|not judged|not run|STOPPED" "$out/backendbench.txt" ;;
esac
exit $status
