#!/usr/bin/env python3
"""Prints trace lines with an evaluation of each field shape FlashInfer-Bench's status rules allow."""
import json

for status, corr, perf in [("PASSED", 1, 1), ("INCORRECT_NUMERICAL", 1, 0), ("RUNTIME_ERROR", 0, 0),
                           ("COMPILE_ERROR", 0, 0), ("INCORRECT_SHAPE", 0, 0), ("TIMEOUT", 0, 0)]:
    ev = {"status": status, "environment": {"hardware": "NVIDIA H100", "libs": {"cuda": "13.0"}},
          "timestamp": "2026-11-22T10:00:00Z", "log": "x"}
    if corr:
        ev["correctness"] = {"max_relative_error": 0.5, "max_absolute_error": 0.25, "extra": {"k": 1}}
    if perf:
        ev["performance"] = {"latency_ms": 0.1, "reference_latency_ms": 0.2, "speedup_factor": 2.0}
    print(json.dumps({"definition": "d", "solution": "s", "evaluation": ev,
                      "workload": {"uuid": "u", "axes": {"M": 1},
                                   "inputs": {"a": {"type": "scalar", "value": 1.0},
                                              "b": {"type": "safetensors", "path": "blob/x.safetensors",
                                                    "tensor_key": "b"}}}}))
