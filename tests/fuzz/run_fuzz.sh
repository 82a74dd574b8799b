#!/bin/sh
# Runs one libFuzzer target for a bounded time: new inputs go to a scratch
# corpus in the build tree, the committed seeds are only read.
# usage: run_fuzz.sh FUZZER SEED_DIR SECONDS SCRATCH_DIR
set -eu
fuzzer=$1 seeds=$2 seconds=$3 scratch=$4
mkdir -p "$scratch/corpus" "$scratch/artifacts"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$scratch/artifacts/" "$scratch/corpus" "$seeds"
