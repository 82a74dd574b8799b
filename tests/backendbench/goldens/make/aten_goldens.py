"""What the ATen golden makers (aten_*.py beside this file) share: the storage a strided view spans, and the goldens
file they write (format kb-aten-goldens-1, read by tests/backendbench/test_aten_*.cpp)."""
import json
import os

import torch


def strides_and_span(shape, stride=None):
    """The view's strides (row-major when not given) and how many storage elements it spans (0 when empty)."""
    if stride is None:
        stride = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            stride[d] = stride[d + 1] * shape[d + 1]
    span = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    return stride, span


def write(file_name, cases):
    """Writes the cases to tests/backendbench/goldens/FILE_NAME with the torch version that made them."""
    path = os.path.join(os.path.dirname(__file__), "..", file_name)
    with open(path, "w") as f:
        json.dump({"format": "kb-aten-goldens-1", "torch": torch.__version__, "cases": cases}, f, indent=None)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(path)}")
