#!/bin/sh
# Checks that FlashInfer-Bench's own pydantic models accept what kb writes:
# every shipped definition and workload line passed through `kb format`, and
# evaluated traces of every status shape. Needs network access to PyPI (it is
# a manual check, not part of CI): it downloads the flashinfer-bench wheel
# (without its torch dependency) and pydantic into a scratch venv.
# usage: tools/compat/check_flashinfer_bench.sh [VERSION]   (default 0.1.2)
set -eu
version=${1:-0.1.2}
top=$(cd "$(dirname "$0")/../.." && pwd)
kb="$top/build/tools/kb/kb"
shared="$top/../shared/flashinfer-trace"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q pydantic
"$work/venv/bin/pip" download -q --no-deps -d "$work/wheel" "flashinfer-bench==$version"
(cd "$work/wheel" && python3 -m zipfile -e ./*.whl x)
mkdir -p "$work/defs"
for f in "$shared"/definitions/*/*.json "$top"/kernels/*/definitions/*.json; do
  "$kb" format "$f" > "$work/defs/$(basename "$f")"
done
python3 "$top/tools/compat/evaluated_traces.py" > "$work/evaluated.jsonl"
for f in "$shared"/workloads/*/*.jsonl "$work/evaluated.jsonl"; do "$kb" format "$f"; done > "$work/traces.jsonl"
"$kb" format "$top/tests/fuzz/corpus/schema/solution.json" > "$work/solution.json"
"$work/venv/bin/python" "$top/tools/compat/validate_with_pydantic.py" "$work/wheel/x/flashinfer_bench" "$work"
