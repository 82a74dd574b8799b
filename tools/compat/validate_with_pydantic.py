#!/usr/bin/env python3
"""Validates kb-written files with FlashInfer-Bench's data models.
usage: validate_with_pydantic.py FLASHINFER_BENCH_PACKAGE_DIR WORK_DIR"""
import glob
import sys
import types

root, work = sys.argv[1:3]
# Import flashinfer_bench.data's model modules without the package __init__
# files, which pull in torch and safetensors.
for name, path in [("flashinfer_bench", root), ("flashinfer_bench.data", root + "/data")]:
    m = types.ModuleType(name)
    m.__path__ = [path]
    sys.modules[name] = m
utils = types.ModuleType("flashinfer_bench.utils")
utils.dtype_str_to_torch_dtype = lambda s: s
sys.modules["flashinfer_bench.utils"] = utils

from flashinfer_bench.data.definition import Definition  # noqa: E402
from flashinfer_bench.data.solution import Solution  # noqa: E402
from flashinfer_bench.data.trace import Trace  # noqa: E402

n = 0
for f in sorted(glob.glob(work + "/defs/*.json")):
    with open(f) as fh:
        Definition.model_validate_json(fh.read())
    n += 1
t = 0
with open(work + "/traces.jsonl") as fh:
    for line in fh:
        Trace.model_validate_json(line)
        t += 1
with open(work + "/solution.json") as fh:
    Solution.model_validate_json(fh.read())
print(f"FlashInfer-Bench's models accepted {n} kb-written definitions, {t} trace lines and 1 solution")
