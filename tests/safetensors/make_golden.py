#!/usr/bin/env python3
"""Writes golden.safetensors with the reference implementation (the `safetensors`
package from PyPI), so the C++ tests can check kb against it.

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install safetensors numpy
    /tmp/stvenv/bin/python make_golden.py                  # writes golden.safetensors here
    /tmp/stvenv/bin/python make_golden.py check FILE...    # reference reader on kb output

Produced with safetensors 0.8.0 and numpy 2.4.6. The values are pinned in
test_safetensors.cpp ("golden file from the reference writer"); change both
together. dtypes numpy lacks (bfloat16, float8, float4) are given as raw bytes.
The reference writer orders tensors by dtype alignment then name, and
`__metadata__` entries in hash order, so regenerating may reorder the header;
the C++ test takes both orders from the file it reads.
"""
import os
import sys

import numpy as np
import safetensors
from safetensors import TensorSpec


def tensors():
    u8 = lambda xs: np.array(xs, dtype=np.uint8)
    return {
        # name: (TensorSpec dtype, storage shape, contiguous numpy array of the bytes)
        "f32": ("float32", [2, 3], np.array([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=np.float32)),
        "f16": ("float16", [4], np.array([1.0, -2.0, 0.5, 65504.0], dtype=np.float16)),
        # bfloat16 bit patterns of 1.0, -2.0, 0.5
        "bf16": ("bfloat16", [3], np.array([0x3F80, 0xC000, 0x3F00], dtype=np.uint16)),
        "i64": ("int64", [2], np.array([-1, 2**40 + 7], dtype=np.int64)),
        "i32": ("int32", [2, 2], np.array([[1, -2], [3, -4]], dtype=np.int32)),
        "i16": ("int16", [3], np.array([-32768, 0, 32767], dtype=np.int16)),
        "i8": ("int8", [4], np.array([-128, -1, 0, 127], dtype=np.int8)),
        "mask": ("bool", [3], np.array([True, False, True], dtype=np.bool_)),
        # float8_e4m3fn bit patterns of 1.0, -2.0, 0.5, 448
        "f8e4m3": ("float8_e4m3fn", [4], u8([0x38, 0xC0, 0x30, 0x7E])),
        # float8_e5m2 bit patterns of 1.0, -2.0
        "f8e5m2": ("float8_e5m2", [2], u8([0x3C, 0xC0])),
        # float4_e2m1 packed two a byte: storage shape [2, 2] is logical shape [2, 4]
        "f4": ("float4_e2m1fn_x2", [2, 2], u8([0x21, 0x43, 0x65, 0xF7])),
        "scalar": ("float32", [], np.array(3.5, dtype=np.float32)),
        "empty": ("int32", [0, 3], np.zeros((0, 3), dtype=np.int32)),
    }


METADATA = {"format": "pt", "note": 'kb golden "quoted"\n\u00e9 \\ /'}


def make(path):
    arrays = tensors()
    specs = {}
    for name, (dtype, shape, arr) in arrays.items():
        arr = np.ascontiguousarray(arr)
        arrays[name] = (dtype, shape, arr)  # keep alive while serializing
        specs[name] = TensorSpec(dtype=dtype, shape=shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    blob = safetensors.serialize(specs, metadata=METADATA)
    with open(path, "wb") as f:
        f.write(bytes(blob))
    print(f"wrote {path}: {len(blob)} bytes (safetensors {safetensors.__version__})")


def check(paths):
    for path in paths:
        with open(path, "rb") as f:
            items = safetensors.deserialize(f.read())
        for name, t in items:
            print(f"{path}: {name} {t['dtype']} {t['shape']} {len(t['data'])} bytes")
        with safetensors.safe_open(path, framework="numpy") as f:
            print(f"{path}: metadata {f.metadata()}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        make(os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.safetensors"))
