#!/bin/bash
# Runs on the GPU machine (through the device tool, carry ['.devcarry']):
# GPU tests, kb bench on the bundled and shipped datasets, and the benchmark
# against PyTorch. Results go to $OUT (or ./gpu-out).
# usage: bash tools/gpu/on_device.sh [tests|bench|shipped|compare|goldens|nsight|all]...
#        bash tools/gpu/on_device.sh attn-check attention   (paged decode tests / benchmark vs SDPA; not in all)
#        bash tools/gpu/on_device.sh prefill-check          (causal prefill tests vs the CPU oracle; not in all)
#        bash tools/gpu/on_device.sh plugin-gpu             (outside CUDA solutions: faults, anti-gaming; not in all)
#        bash tools/gpu/on_device.sh multi-gpu              (two GPUs: another device than the current one, --device cuda:1,
#                                                   CUDA_VISIBLE_DEVICES=1; not in all)
#        bash tools/gpu/on_device.sh shards                 (two GPUs: the bundled dataset in one process, then two --shard
#                                                   processes one a GPU, into one folder; not in all)
#        bash tools/gpu/on_device.sh gemm-precision         (torch.matmul's split-K precision: speed and fp64 error; not in all)
#        bash tools/gpu/on_device.sh decode-gemm            (M = 1, 16 gemm shapes vs torch, kb's split rule and the earlier one; not in all)
#        bash tools/gpu/on_device.sh aten-bb                (kb's ATen CUDA kernels vs PyTorch eager on the BackendBench trace; not in all)
#        bash tools/gpu/on_device.sh gemv-balance           (the gemv's row balances side by side, test_gemm under each; not in all)
#        bash tools/gpu/on_device.sh gemv-bulk              (the gemv's bulk-kernel rule against the plain kernel, every shipped
#                                                   shape at M = 1 .. 16; test_gemm with the bulk kernel on / off; not in all)
#        bash tools/gpu/on_device.sh l2-flush               (the write and the clean L2 flush side by side: l2_flush_check, the
#                                                   gemv after each, kb vs Nsight under each; not in all)
#        bash tools/gpu/on_device.sh ceilings               (read-only / copy ceilings: gemv weights, MLA KV gather, copy variants,
#                                                   batch-1 floors, long-K gemm formulations; not in all)
#        bash tools/gpu/on_device.sh race-ab                (kb_cuda_gemm's race over every gemv form against the two-way race,
#                                                   KB_GEMM_RACE=cublaslt, side by side at M = RACE_AB_VALUES; not in all)
#        bash tools/gpu/on_device.sh long-k-ab              (kb_cuda_gemm's long-K race against the batched chunks alone,
#                                                   KB_GEMM_LONG_K=chunks, side by side at M = LKAB_VALUES; not in all)
#        bash tools/gpu/on_device.sh race-sweep             (kb_cuda_gemm's race on made-up gemm shapes: each candidate's median,
#                                                   the static rule's cost; SWEEP_K, SWEEP_N, SWEEP_M; not in all)
#        bash tools/gpu/on_device.sh long-k                 (long-K gemm: cuBLASLt chunks vs kb's wgmma kernel, fp64 check; LKV_M,
#                                                   LKV_VARIANTS; not in all)
set -u
cd "$(dirname "$0")/../.."
. tools/gpu/devcarry_env.sh  # unpacks .devcarry, sets the loader path, KB_SHARED_DIR and $out
kb=.devcarry/bin/kb
what=${*:-all}
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/device.txt"
$kb --version
$kb devices || status=1

if [[ $what == *tests* || $what == all ]]; then
  # test_cuda_attention / test_cuda_prefill run sharded in attn-check / prefill-check; test_plugin_gpu in plugin-gpu
  for t in $(ls .devcarry/bin/test_* | grep -v -e test_plugin_gpu -e test_attention_bench -e test_gemv_ab -e test_cuda_attention -e test_cuda_prefill); do
    echo "== $t"
    timeout ${TEST_TIMEOUT:-240} "$t"; rc=$?
    if [ $rc -eq 77 ]; then echo "skipped"; elif [ $rc -ne 0 ]; then echo "FAILED ($rc)"; status=1; fi
  done 2>&1 | tee "$out/gpu_tests.log"
fi
if [[ $what == *tests* || $what == all ]]; then
  # the C ABI tests (tests/capi/test_capi.c) where their CUDA branches run: device info, a CUDA benchmark
  echo "== capi_test"; timeout 240 .devcarry/bin/capi_test .devcarry/shared 2>&1 | tail -4 | tee "$out/capi_test.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  # the engine-style C++ example: a decode step (RMSNorm, gemm M = 16) captured into a CUDA graph and replayed
  timeout 120 .devcarry/bin/kb_example_engine_step kernels/rmsnorm/definitions/rmsnorm_h4096.json \
      kernels/gemm/definitions/gemm_n4096_k4096.json || status=1
  # again with the gemm dispatched from traces this GPU just recorded (kb_dispatch; M = 1, 7, 16, 32 recorded)
  $kb bench --device cuda --definitions gemm_n4096_k4096 --out "$out/dispatch" > "$out/dispatch_bench.txt" 2>&1 || status=1
  timeout 120 .devcarry/bin/kb_example_engine_step kernels/rmsnorm/definitions/rmsnorm_h4096.json \
      kernels/gemm/definitions/gemm_n4096_k4096.json "$out/dispatch" || status=1
  order=$($kb bench --list | grep -o '^kb_[a-z0-9_]*' | paste -sd,)  # kb's order, for the default tie margin
  python3 tools/gpu/dispatch_check.py .devcarry/lib/libkb.so.1 kernels/gemm/definitions/gemm_n4096_k4096.json \
      "$out/dispatch" cuda --order "$order" || status=1
  python3 tools/gpu/dispatch_check.py .devcarry/lib/libkb.so.1 kernels/gemm/definitions/gemm_n4096_k4096.json \
      "$out/dispatch" cuda || status=1  # tie margin 0: the strictly fastest
  # the Python example on PyTorch CUDA tensors (ctypes + DLPack, kb_cuda_rmsnorm on torch's current stream)
  timeout 120 python3 examples/python/rmsnorm.py .devcarry/lib/libkb.so.1 kernels/rmsnorm/definitions/rmsnorm_h4096.json \
      cuda || status=1
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
  # kb vs PyTorch; one family per call fits, e.g. COMPARE_ARGS="--families gemm --shard 1/2" (see compare_torch.py).
  # It stops itself 30 s before COMPARE_TIMEOUT and writes what it measured (exit 3: not every family finished);
  # progress lines with timestamps in compare.log show where the time went.
  # torch.matmul & co. are timed before and after each kb run and averaged (--torch-after): torch's own time moved 3-5%
  # between passes on the H200 (session 32), kb's under 1%. COMPARE_TORCH_AFTER=0: once, before kb.
  ct=${COMPARE_TIMEOUT:-300}
  after=--torch-after; [ "${COMPARE_TORCH_AFTER:-1}" = 0 ] && after=
  timeout $ct python3 tools/gpu/compare_torch.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
      --bundled kernels --out "$out" --time-limit $((ct > 60 ? ct - 30 : ct / 2)) $after ${COMPARE_ARGS:-} > "$out/compare.log" 2>&1
  echo "compare: exit $?"; grep -E "kb bench .*(exit|STOPPED|stopped)|families done" "$out/compare.log" | tail -8
  # issue 4's bars on what this call measured (merge with earlier calls' JSON by running issue4_bars.py on all of them)
  [ -f "$out/benchmark.json" ] && python3 tools/gpu/issue4_bars.py "$out/benchmark.json" --out "$out/issue4_bars.md" \
      && cat "$out/issue4_bars.md"
fi
if [[ $what == *goldens* ]]; then
  mkdir -p "$out/goldens"; timeout 120 python3 tools/goldens/make_goldens.py .devcarry/shared/flashinfer-trace/definitions "$out/goldens" > "$out/goldens.log" 2>&1
  echo "goldens: exit $?"; tail -3 "$out/goldens.log"; (cd "$out" && tar czf goldens.tgz goldens && rm -rf goldens)
fi
if [[ $what == *nsight* ]]; then
  # kb's latency vs Nsight Compute's kernel duration, kernels over 20 us (bar: within 5%): ncu on kb bench's
  # correctness calls, and on ncu_flushed_launches.py (the GPU busy up to each launch, as in kb's samples)
  timeout ${NSIGHT_TIMEOUT:-300} python3 tools/gpu/nsight_check.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
      --bundled kernels --out "$out/nsight" --lib .devcarry/lib/libkb.so.1 > "$out/nsight.log" 2>&1
  echo "nsight: exit $?"; tail -20 "$out/nsight.log"
fi
if [[ $what == *attn-check* ]]; then
  # kb_cuda_gqa_paged_decode / kb_cuda_mla_paged_decode against the CPU oracle (edge cases, every shipped decode workload)
  # in ATTN_SHARDS processes side by side (the CPU side, random inputs and the fp64 oracle, dominates)
  n=${ATTN_SHARDS:-12}; pids=()
  for ((k = 0; k < n; k++)); do
    timeout ${ATTN_CHECK_TIMEOUT:-480} .devcarry/bin/test_cuda_attention --shard $k/$n ${ATTN_CHECK_ARGS:-} \
        > "$out/attn_check.$k.log" 2>&1 & pids+=($!)
  done
  rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
  cat "$out"/attn_check.*.log > "$out/attn_check.log"; rm -f "$out"/attn_check.*.log
  echo "attn-check: $([ $rc -eq 0 ] && echo passed || echo FAILED)"
  grep -E "^(FAIL|skipped|device)" "$out/attn_check.log" | sort -u | head -40; grep -E "^(all passed|FAILED):" "$out/attn_check.log"
  [ $rc -eq 0 ] || status=1
fi
if [[ $what == *prefill-check* ]]; then
  # kb_cuda_{gqa,mla}_{paged,ragged}_prefill against the CPU oracle (edge cases, every shipped causal prefill workload,
  # oracle-heavy ones shrunk) in PREFILL_SHARDS processes side by side (the fp64 CPU oracle dominates)
  n=${PREFILL_SHARDS:-12}; pids=()
  for ((k = 0; k < n; k++)); do
    timeout ${PREFILL_CHECK_TIMEOUT:-540} .devcarry/bin/test_cuda_prefill --shard $k/$n ${PREFILL_CHECK_ARGS:-} \
        > "$out/prefill_check.$k.log" 2>&1 & pids+=($!)
  done
  rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
  cat "$out"/prefill_check.*.log > "$out/prefill_check.log"; rm -f "$out"/prefill_check.*.log
  echo "prefill-check: $([ $rc -eq 0 ] && echo passed || echo FAILED)"
  grep -E "^(FAIL|skipped|device)" "$out/prefill_check.log" | sort -u | head -40; grep -E "^(all passed|FAILED):" "$out/prefill_check.log"
  [ $rc -eq 0 ] || status=1
fi
if [[ $what == *attention* ]]; then
  # paged decode (GQA, MLA) vs PyTorch SDPA and the copy bandwidth: $out/benchmark_attention.md
  timeout ${ATTENTION_TIMEOUT:-420} python3 tools/gpu/bench_attention.py --driver .devcarry/bin/test_attention_bench \
      --out "$out" ${ATTENTION_ARGS:-} > "$out/bench_attention.log" 2>&1; echo "attention: exit $?"
  tail -70 "$out/bench_attention.log"
fi
if [[ $what == *plugin-gpu* ]]; then
  # hostile CUDA plugins and Solution JSONs in worker processes (kernel hang, illegal address, other stream, stale
  # outputs, ...), then the same through `kb bench --plugin` (tests/plugin/test_plugin_gpu.py)
  export KB_WORKER="$PWD/.devcarry/bin/kb-worker"
  command -v nvcc >/dev/null && export NVCC=$(command -v nvcc)  # Solution JSON builds: the nvcc there
  cache=$(mktemp -d)
  timeout ${PLUGIN_GPU_TIMEOUT:-300} .devcarry/bin/test_plugin_gpu "$KB_WORKER" .devcarry/lib/libkb_hostile_cuda_plugin.so \
      tests/plugin/dataset tests/plugin/cuda_solutions/cuda_good.json "$cache" > "$out/plugin_gpu.log" 2>&1
  rc=$?; echo "test_plugin_gpu: exit $rc"; tail -15 "$out/plugin_gpu.log"; [ $rc -eq 0 ] || status=1
  timeout ${PLUGIN_GPU_TIMEOUT:-300} python3 tests/plugin/test_plugin_gpu.py $kb "$KB_WORKER" tests/plugin/dataset "$cache" cuda \
      .devcarry/lib/libkb_hostile_cuda_plugin.so .devcarry/lib/libkb_example_cuda_plugin.so > "$out/plugin_gpu_cli.log" 2>&1
  rc=$?; echo "test_plugin_gpu.py: exit $rc"; tail -15 "$out/plugin_gpu_cli.log"; [ $rc -eq 0 ] || status=1
fi
if [[ $what == *multi-gpu* ]]; then
  # Two or more GPUs (kind nvidia-h100-x2): kb_solution_run on another device than the current one (test_multi_gpu),
  # then kb bench --device cuda:1 and CUDA_VISIBLE_DEVICES=1 through kb's and the worker's solutions (the device
  # section of tests/plugin/test_plugin_gpu.py, which runs the whole script).
  nvidia-smi --query-gpu=index,pci.bus_id,name --format=csv | tee "$out/gpus.txt"
  CUDA_VISIBLE_DEVICES=1 $kb devices
  timeout 120 .devcarry/bin/test_multi_gpu > "$out/multi_gpu.log" 2>&1
  rc=$?; echo "test_multi_gpu: exit $rc"; cat "$out/multi_gpu.log"; [ $rc -eq 0 ] || status=1
  # PyTorch tensors on device 1 through ctypes (examples/python/rmsnorm.py): kb on the tensors' device, torch's stream
  timeout 120 python3 examples/python/rmsnorm.py .devcarry/lib/libkb.so.1 kernels/rmsnorm/definitions/rmsnorm_h4096.json \
      cuda:1 || status=1
  export KB_WORKER="$PWD/.devcarry/bin/kb-worker"
  command -v nvcc >/dev/null && export NVCC=$(command -v nvcc)
  timeout ${PLUGIN_GPU_TIMEOUT:-300} python3 tests/plugin/test_plugin_gpu.py $kb "$KB_WORKER" tests/plugin/dataset "$(mktemp -d)" cuda \
      .devcarry/lib/libkb_hostile_cuda_plugin.so .devcarry/lib/libkb_example_cuda_plugin.so > "$out/multi_gpu_cli.log" 2>&1
  rc=$?; echo "test_plugin_gpu.py: exit $rc"; grep -E "devices:|FAIL|skipped|^ok|failures" "$out/multi_gpu_cli.log" | tail -20
  [ $rc -eq 0 ] || status=1
fi
if [[ $what == *shards* ]]; then
  # Two GPUs: kb bench on the bundled dataset in one process on one GPU, then as two shards, one a GPU, into one
  # folder; wall times, and whether the shards recorded the same evaluations with the same statuses.
  s=$(date +%s%N); $kb bench --device cuda --out "$out/one" > "$out/shard_one.txt" 2>&1; r=$?
  echo "one process on one GPU: exit $r in $(( ($(date +%s%N) - s) / 1000000 )) ms"; tail -1 "$out/shard_one.txt"
  s=$(date +%s%N)
  $kb bench --device cuda:0 --shard 1/2 --out "$out/two" > "$out/shard_1of2.txt" 2>&1 & p1=$!
  $kb bench --device cuda:1 --shard 2/2 --out "$out/two" > "$out/shard_2of2.txt" 2>&1 & p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  echo "two shards on two GPUs (1/2 on cuda:0, 2/2 on cuda:1): exits $r1 $r2 in $(( ($(date +%s%N) - s) / 1000000 )) ms"
  for f in "$out/shard_1of2.txt" "$out/shard_2of2.txt"; do head -1 "$f"; tail -1 "$f"; done
  python3 - "$out" <<'PY'
import collections, glob, json, os, sys
def records(d):
    r = {}
    for f in glob.glob(os.path.join(sys.argv[1], d, "traces", "*", "*", "*.jsonl")):
        for line in open(f):
            t = json.loads(line)
            e = t["evaluation"] or {}
            r[(t["definition"], t["workload"]["uuid"], t["solution"])] = (
                e.get("status"), (e.get("performance") or {}).get("extra", {}).get("cuda_device"))
    return r
one, two = records("one"), records("two")
print(f"records: one process {len(one)}, two shards {len(two)}; same evaluations: {set(one) == set(two)}; "
      f"same statuses: {all(one[k][0] == two[k][0] for k in one if k in two)}; "
      f"devices of the sharded records: {dict(collections.Counter(v[1] for v in two.values()))}")
PY
fi
if [[ $what == *gemm-precision* ]]; then
  # torch.matmul with and without fp16/bf16 split-K reductions, timed and judged against fp64 (gemm_precision.py)
  timeout ${GEMM_PRECISION_TIMEOUT:-240} python3 tools/gpu/gemm_precision.py --out "$out" > "$out/gemm_precision.log" 2>&1
  echo "gemm-precision: exit $?"; cat "$out/gemm_precision.log" | tail -12
fi
if [[ $what == *gemv-bulk* ]]; then
  # The gemv's kernel rule (gemv_bulk_rows) against the plain kernel on every shipped gemm shape at M = 1 .. 16, side
  # by side in alternating rounds (tools/gpu/gemv_ab.cpp: off = kb's plan, plain = the same without the bulk kernel),
  # then test_gemm with the bulk kernel forced everywhere and with it off.
  shapes=$(ls .devcarry/shared/flashinfer-trace/definitions/gemm/ | sed -n 's/^gemm_n\([0-9]*\)_k\([0-9]*\)\.json$/\1x\2/p' | paste -sd,)
  timeout ${GEMV_AB_TIMEOUT:-300} .devcarry/bin/test_gemv_ab --shapes "${GEMV_SHAPES:-$shapes}" \
      --m ${GEMV_M:-1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16} --rounds ${GEMV_ROUNDS:-2} --variants off,plain \
      > "$out/gemv_bulk_rule.md"; echo "gemv-bulk: exit $?"; tail -1 "$out/gemv_bulk_rule.md"
  for k in 0 1; do
    KB_GEMV_BULK=$k timeout ${TEST_TIMEOUT:-240} .devcarry/bin/test_gemm > "$out/test_gemm_bulk_$k.log" 2>&1
    echo "test_gemm KB_GEMV_BULK=$k: exit $? $(tail -1 "$out/test_gemm_bulk_$k.log")"
  done
fi
if [[ $what == *gemv-balance* ]]; then
  # The gemv's row balances side by side (tools/gpu/gemv_ab.cpp: off, sm, wave in alternating rounds, outputs
  # compared), then test_gemm under each balance that is not the default (every case against the CPU reference).
  GEMV_SHAPES=${GEMV_SHAPES:-7168x5120,4096x4096,4096x14336,16384x3072,8192x8192,28672x4096,5120x17408,10240x8192}
  timeout ${GEMV_AB_TIMEOUT:-240} .devcarry/bin/test_gemv_ab --shapes "$GEMV_SHAPES" --m ${GEMV_M:-1,8,16} \
      --rounds ${GEMV_ROUNDS:-2} | tee "$out/gemv_balance_ab.md"; echo "gemv-balance: exit ${PIPESTATUS[0]}"
  for b in ${GEMV_TEST_BALANCES:-off sm wave}; do
    KB_GEMV_BALANCE=$b timeout ${TEST_TIMEOUT:-240} .devcarry/bin/test_gemm > "$out/test_gemm_balance_$b.log" 2>&1 &
  done
  wait
  for b in ${GEMV_TEST_BALANCES:-off sm wave}; do echo "test_gemm KB_GEMV_BALANCE=$b: $(tail -1 "$out/test_gemm_balance_$b.log")"; done
  grep -h "^FAIL" "$out"/test_gemm_balance_*.log | head -10
fi
if [[ " $what " == *" long-k "* ]]; then
  # tools/gpu/long_k_variants.cu: kb's long-K formulations (cuBLASLt chunks, kb's wgmma kernel) side by side,
  # with an fp64 check; LKV_M: the M values, LKV_VARIANTS: name prefixes to run (the file head lists them)
  timeout ${LKV_TIMEOUT:-300} .devcarry/bin/long_k_variants ${LKV_M:-128 512 2048} > "$out/long_k_variants.txt" 2>&1
  echo "long-k: exit $?"; grep "^|" "$out/long_k_variants.txt"; tail -3 "$out/long_k_variants.txt"
fi
if [[ $what == *l2-flush* ]]; then
  # The two L2 flushes (lib/cuda/timing.hpp L2Flush) side by side: how cold each leaves the L2 (l2_flush_check), the
  # gemv's plans timed after each in alternating rounds, and kb against Nsight Compute under each
  # (benchmarks/h200-2026-12-02-s25/ ran these by hand)
  timeout 120 .devcarry/bin/l2_flush_check > "$out/l2_flush_check.md" 2>&1; echo "l2_flush_check: exit $?"
  W=7168x5120,16384x3072,4096x14336,8192x8192,5120x17408,10240x8192,28672x4096,5376x21504,34816x5120,8192x28672
  timeout 300 .devcarry/bin/test_gemv_ab --shapes $W,21504x5376,37888x3584 --m 1,8,16 --rounds 2 \
      --variants off+write,off+clean > "$out/gemv_flush_ab.md" 2>&1 || status=1
  for f in write clean; do
    KB_L2_FLUSH=$f timeout ${NSIGHT_TIMEOUT:-300} python3 tools/gpu/nsight_check.py --kb "$kb" \
        --definitions .devcarry/shared/flashinfer-trace/definitions --bundled kernels --out "$out/nsight-$f" \
        > "$out/nsight-$f.log" 2>&1; echo "nsight ($f flush): exit $?"
  done
fi
if [[ $what == *ceilings* ]]; then
  # tools/gpu/{gemv_read_ceiling,mla_gather_ceiling,copy_variants,batch1_floor,long_k_variants,l2_flush_check}.cu,
  # built by prepare.sh (the file heads say what each times)
  for t in gemv_read_ceiling mla_gather_ceiling copy_variants batch1_floor long_k_variants l2_flush_check; do
    if [ -x .devcarry/bin/$t ]; then timeout 240 .devcarry/bin/$t > "$out/$t.txt" 2>&1; echo "$t: exit $?"
    else echo "$t: not built (prepare.sh found no nvcc)"; status=1; fi
  done
fi
if [[ $what == *decode-gemm* ]]; then
  # The decode (M = 1, 16) gemm definitions whose weight is >= 64 MB (issue 4's copy-bandwidth bar) and three
  # smaller ones, vs torch.matmul: with kb's gemv split rule (decode-gemm/kb) and with KB_GEMV_SPLIT=wave, the
  # rule before (decode-gemm/wave), one after the other in this call. kb/torch ratios and % copy per file.
  D=gemm_n10240_k8192,gemm_n16384_k3072,gemm_n21504_k5376,gemm_n28672_k4096,gemm_n34816_k5120,gemm_n37888_k3584
  D=$D,gemm_n4096_k14336,gemm_n5120_k17408,gemm_n5376_k21504,gemm_n7168_k5120,gemm_n8192_k28672,gemm_n8192_k8192
  D=$D,gemm_n4096_k4096,gemm_n128_k2048,gemm_n256_k7168
  for rule in kb wave; do
    mkdir -p "$out/decode-gemm/$rule"
    ( [ $rule = wave ] && export KB_GEMV_SPLIT=wave
      timeout 200 python3 tools/gpu/compare_torch.py --kb "$kb" --definitions .devcarry/shared/flashinfer-trace/definitions \
          --bundled kernels --out "$out/decode-gemm/$rule" --families gemm --only $D --values 1,16 \
          > "$out/decode-gemm/$rule/compare.log" 2>&1 ); echo "decode-gemm $rule: exit $?"
    rm -rf "$out/decode-gemm/$rule/compare-kb"
    grep -E "^\| gemm" "$out/decode-gemm/$rule/benchmark.md" | grep kb_cuda_gemm | awk -F'|' '{print $2,$3,$6,$7,$9,$10}'
  done
fi
# gemm_ab NAME SECONDS "A-NAME,B-NAME" A-ENV -- COMPARE_ARGS...: compare_torch.py twice in one call on the same
# gemm shapes, first with A-ENV (VAR=value) set, then without; NAME.md from tools/gpu/ab_runs.py, B's race lines
# (KB_CUBLASLT_LOG) in NAME_notes_b.txt. Each run stops 15 s before SECONDS and writes what it measured.
gemm_ab() {
  local name=$1 rt=$2 names=$3 a_env=$4; shift 5
  for side in a b; do
    local env_side=(); [ $side = a ] && env_side=("$a_env")
    env "${env_side[@]}" KB_CUBLASLT_LOG=1 timeout "$rt" python3 tools/gpu/compare_torch.py --kb "$kb" \
        --definitions .devcarry/shared/flashinfer-trace/definitions --bundled kernels --families gemm \
        --out "$out/${name}_$side" --time-limit $((rt - 15)) "$@" > "$out/${name}_$side.log" 2>&1
    echo "$name $side: exit $?"
    grep "kb gemm race: " "$out/${name}_$side.log" | sed 's/.*kb gemm race: //' > "$out/${name}_notes_$side.txt"
  done
  python3 tools/gpu/ab_runs.py "$out/${name}_a/benchmark.json" "$out/${name}_b/benchmark.json" \
      --names "$names" --notes "$out/${name}_notes_b.txt" > "$out/$name.md" || status=1
  sed -n 5,8p "$out/$name.md"
}
if [[ $what == *race-ab* ]]; then
  # KB_GEMM_RACE=cublaslt (the rule plan against cuBLASLt) against kb's race over every gemv form
  # (gemv_or_cublaslt.hpp), at M = RACE_AB_VALUES; each run within RACE_AB_TIMEOUT.
  gemm_ab race_ab "${RACE_AB_TIMEOUT:-215}" "rule vs cuBLASLt,all plans" KB_GEMM_RACE=cublaslt -- \
      --values "${RACE_AB_VALUES:-1,2,4,8,16}"
fi
if [[ $what == *long-k-ab* ]]; then
  # The two shipped long-K shapes: KB_GEMM_LONG_K=chunks (kb's default before the race) against kb's race over the
  # long-K forms (long_k_race.hpp), at M = LKAB_VALUES; each run within LKAB_TIMEOUT.
  gemm_ab long_k_ab "${LKAB_TIMEOUT:-200}" "batched chunks,race" KB_GEMM_LONG_K=chunks -- \
      --only gemm_n5376_k21504,gemm_n8192_k28672 --values "${LKAB_VALUES:-128,512,1024,2048,4096,8192}"
fi
if [[ $what == *race-sweep* ]]; then
  # kb_cuda_gemm's race on made-up shapes (tools/gpu/race_sweep.py): every candidate's median per problem, and
  # the static rule's form over the fastest; K in SWEEP_K (float16 and bfloat16 alternate), N in SWEEP_N, M in SWEEP_M.
  # Then kb_cublaslt_gemm (the static rule, no race) timed with SWEEP_AB set and without (empty SWEEP_AB: not).
  dt=float16 ab=${SWEEP_AB-KB_GEMM_LONG_K=chunks} ab_args=()
  [ -n "$ab" ] && ab_args=(--ab "$ab")
  for k in ${SWEEP_K:-28672 21504}; do
    python3 tools/gpu/race_sweep.py --kb "$kb" --k "$k" --dtype $dt --n "${SWEEP_N:-32,96,256,1024,2048,4096,8192}" \
        --m "${SWEEP_M:-17,64,128,512,2048}" --out "$out/race_sweep_k$k" "${ab_args[@]}" > "$out/race_sweep_k$k.txt"
    [ $? = 0 ] || status=1
    tail -2 "$out/race_sweep_k$k.txt"
    [ $dt = float16 ] && dt=bfloat16 || dt=float16
  done
fi
if [[ $what == *aten-bb* ]]; then
  # kb's CUDA ATen kernels on the BackendBench trace and PyTorch eager on the same lines in this session; writes
  # backendbench.md (device, per-operator speedup, geomean, coverage) and backendbench_lines.json (every line's
  # outcome). Both time each call between its own CUDA events, L2 warm, median of 20 after 3 warm-up calls.
  #   aten-bb:      lines within the CPU oracle budget, judged against the CPU oracles (the rest not judged)
  #   aten-bb-full: every line; those over the budget judged against kb's GPU fp64 reference (on the device)
  # A run cut by its time limit continues in the next call: copy its backendbench_lines.json to
  # .devcarry/bb_saved.json before the call (kb takes those lines as they are; torch skips them).
  bb=.devcarry/shared/backendbench/tritonbench-op-traces.txt
  bbops=$($kb backendbench ops --device cuda)
  kb_args=(); torch_args=(); saved=()
  if [[ $what == *aten-bb-full* ]]; then kb_args=(--gpu-reference); torch_args=(--max-elements 0 --max-flops 0); fi
  [ -s .devcarry/bb_saved.json ] && saved=(.devcarry/bb_saved.json)
  tt=${BB_TORCH_TIMEOUT:-240}
  timeout $tt python3 tools/backendbench/torch_baseline.py "$bb" --ops "$bbops" --time-limit $((tt - 30)) \
      --out "$out/torch_baseline.json" "${torch_args[@]}" ${saved[@]+--skip-saved "${saved[@]}"} ${BB_TORCH_ARGS:-} \
      > "$out/torch_baseline.log" 2>&1
  echo "torch baseline: exit $?"; tail -2 "$out/torch_baseline.log"
  kbt=${BB_KB_TIMEOUT:-330}; base=()
  [ -s "$out/torch_baseline.json" ] && base=(--baseline "$out/torch_baseline.json")
  timeout $kbt $kb backendbench run "$bb" --device cuda ${base[@]+"${base[@]}"} --time-limit $((kbt - 40)) \
      --markdown "$out/backendbench.md" --save-lines "$out/backendbench_lines.json" "${kb_args[@]}" \
      ${saved[@]+--resume "${saved[@]}"} ${BB_KB_ARGS:-} > "$out/backendbench.txt" 2>&1
  rc=$?; echo "kb backendbench run --device cuda: exit $rc"
  grep -E "^device|^score|^coverage|^fully correct|^time|^resumed|not judged|not run|GPU fp64 reference|STOPPED" "$out/backendbench.txt"
  [ $rc -le 1 ] || status=1
fi
exit $status
