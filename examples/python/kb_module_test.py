#!/usr/bin/env python3
"""Tests of examples/python/kb.py, the `kb` module, against the libkb of this build: bfloat16
conversion (exact values, round to nearest even, NaN, infinities; PyTorch's own conversion where
torch is installed; numpy's path equal to the plain one), definitions loaded from a file and by name
(with the near matches of a typo), tensors checked and refused, and kb_cpu_rmsnorm run through
kb_solution_run on rows of several sizes, its output checked against the formula computed here.
Runs itself a second time with numpy hidden, so the module is proven to work without it.

usage: kb_module_test.py LIBKB BUNDLED_DIR SCRATCH_DIR [--no-numpy]
Exit 0 on success, 1 on a failure, 77 (skipped) when libkb cannot be loaded here.
"""
import json
import math
import os
import random
import subprocess
import sys

if "--no-numpy" in sys.argv:
    sys.modules["numpy"] = None  # `import numpy` now fails, as where numpy is not installed
    sys.argv.remove("--no-numpy")
    hidden_numpy = True
else:
    hidden_numpy = False
if len(sys.argv) != 4:
    print(__doc__, file=sys.stderr)
    sys.exit(2)
libkb, bundled, scratch = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

failures = 0
label = "(numpy hidden) " if hidden_numpy else ""


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + label + name + ("" if cond else f": {detail}"))
    failures += 0 if cond else 1


try:
    lib = kb.Library(libkb)
except OSError as e:
    print(f"skipped: cannot load {libkb}: {e}")
    sys.exit(77)
check("numpy is hidden" if hidden_numpy else "numpy state", (kb._np is None) == hidden_numpy, str(kb._np))

# ---- bfloat16 ----
cases = [(1.0, 0x3F80), (-2.0, 0xC000), (0.0, 0x0000), (-0.0, 0x8000), (1.0 + 2 ** -8, 0x3F80),  # halfway: to even
         (1.0 + 3 * 2 ** -8, 0x3F82), (1.0 + 2 ** -8 + 2 ** -20, 0x3F81), (float("inf"), 0x7F80),
         (float("-inf"), 0xFF80), (3.4e38, 0x7F80), (1e39, 0x7F80), (-1e39, 0xFF80), (1e-40, 0x0001)]
for value, bits in cases:
    check(f"bf16_bits({value!r}) == {bits:#06x}", kb.bf16_bits(value) == bits, f"{kb.bf16_bits(value):#06x}")
check("bf16 NaN is the quiet NaN", kb.bf16_bits(float("nan")) & 0x7FFF == 0x7FC0, f"{kb.bf16_bits(float('nan')):#06x}")
check("bf16_value(0x3f80) == 1.0", kb.bf16_value(0x3F80) == 1.0)
check("bf16_value(0xc0490000 >> 16) == -3.140625", kb.bf16_value(0xC049) == -3.140625)
check("every finite bf16 round-trips", all(kb.bf16_bits(kb.bf16_value(b)) == b for b in range(0x10000)
                                           if (b & 0x7F80) != 0x7F80))
rng = random.Random(7)
values = [rng.uniform(-4, 4) for _ in range(2000)] + [rng.uniform(-1e-38, 1e-38) for _ in range(200)] + \
         [rng.choice([-1, 1]) * 10 ** rng.uniform(-30, 38) for _ in range(500)]
plain = [kb.bf16_bits(v) for v in values]
if not hidden_numpy:
    try:
        import torch
        want = torch.tensor(values, dtype=torch.float64).to(torch.float32).to(torch.bfloat16).view(torch.int16)
        want = [w & 0xFFFF for w in want.tolist()]
        bad = [(v, p, w) for v, p, w in zip(values, plain, want) if p != w]
        check(f"bf16_bits equals PyTorch's conversion on {len(values)} values", not bad, bad[:5])
    except ImportError:
        print("skip bf16 against PyTorch: no torch")
    if kb._np is not None:
        t = kb.Tensor.from_values("bfloat16", [len(values)], kb._np.array(values))
        check("numpy's bf16 path equals the plain one", t.tobytes() == kb.Tensor.from_values(
            "bfloat16", [len(values)], values).tobytes())
        check("Tensor.numpy() decodes bf16", t.numpy().tolist() == [kb.bf16_value(b) for b in plain])

# ---- definitions ----
with lib.context() as ctx:
    path = os.path.join(bundled, "rmsnorm", "definitions", "rmsnorm_h4096.json")
    d = ctx.load_definition(path)
    check("load_definition", d.name == "rmsnorm_h4096" and d.op_type == "rmsnorm" and
          d.axes == [("batch_size", "var", None), ("hidden_size", "const", 4096)] and
          d.inputs == [("hidden_states", "bfloat16", ["batch_size", "hidden_size"]),
                       ("weight", "bfloat16", ["hidden_size"])], (d.axes, d.inputs))
    d2 = ctx.load_definition_by_name(bundled, "rmsnorm_h4096")
    check("load_definition_by_name in the bundled tree", d2.name == "rmsnorm_h4096" and d2.json == d.json)
    try:
        ctx.load_definition_by_name(bundled, "rmsnorm_h4069")
        check("a typo is not found", False, "no error")
    except kb.Error as e:
        check("a typo is not found, with the near match", e.status == 5 and "did you mean rmsnorm_h4096" in e.message,
              str(e))
    try:
        ctx.load_definition(os.path.join(scratch, "no_such.json"))
        check("a missing file is an error", False, "no error")
    except kb.Error as e:
        check("a missing file is kb's error naming it", e.status == 4 and "no_such.json" in e.message, str(e))

    # rmsnorm of several widths, written here and found by name; rows of several counts.
    os.makedirs(scratch, exist_ok=True)
    with open(path) as f:
        base = json.load(f)
    for hidden in (64, 200, 4096):
        doc = dict(base, name=f"rmsnorm_h{hidden}")
        doc["axes"] = {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": hidden}}
        with open(os.path.join(scratch, f"rmsnorm_h{hidden}.json"), "w") as f:
            json.dump(doc, f)
    for hidden, rows in ((64, 1), (200, 3), (4096, 2), (64, 0)):
        d = ctx.load_definition_by_name(scratch, f"rmsnorm_h{hidden}")
        x_vals = [rng.uniform(-2, 2) for _ in range(rows * hidden)]
        w_vals = [rng.uniform(0.5, 1.5) for _ in range(hidden)]
        x = kb.Tensor.from_values("bfloat16", [rows, hidden], x_vals)
        w = kb.Tensor.from_values("bfloat16", [hidden], w_vals)
        y = kb.Tensor.empty("bfloat16", [rows, hidden])
        axes = d.check([x, w], [y])
        check(f"check binds the axes ({rows} x {hidden})", axes == {"batch_size": rows, "hidden_size": hidden}, axes)
        ctx.run(d, "kb_cpu_rmsnorm", [x, w], [y])
        xs, ws, got = x.tolist(), w.tolist(), y.tolist()
        worst = 0.0
        ok = True
        for r in range(rows):
            row = xs[r * hidden:(r + 1) * hidden]
            inv = 1.0 / math.sqrt(sum(v * v for v in row) / hidden + 1e-5)
            for c in range(hidden):
                want = kb.bf16_value(kb.bf16_bits(row[c] * inv * ws[c]))
                diff = abs(got[r * hidden + c] - want)
                worst = max(worst, diff)
                ok = ok and diff <= 0.01 + 0.01 * abs(want)
        check(f"kb_cpu_rmsnorm {rows} x {hidden} matches the formula", ok, f"largest difference {worst}")
        d.close()

    # A tensor that does not fit: kb's message names it and the dimension.
    d = ctx.load_definition_by_name(scratch, "rmsnorm_h64")
    x = kb.Tensor.from_values("bfloat16", [2, 32], [0.5] * 64)
    w = kb.Tensor.from_values("bfloat16", [64], [1.0] * 64)
    y = kb.Tensor.empty("bfloat16", [2, 64])
    try:
        d.check([x, w], [y])
        check("a wrong shape is refused", False, "no error")
    except kb.Error as e:
        check("a wrong shape is refused, naming the tensor", e.status == 1 and 'input "hidden_states"' in e.message and
              "hidden_size" in e.message, str(e))
    try:
        ctx.run(d, "kb_cpu_rmsnorm", [kb.Tensor.from_values("float32", [2, 64], [0.5] * 128), w], [y])
        check("a wrong dtype is refused by run", False, "no error")
    except kb.Error as e:
        check("a wrong dtype is refused by run", e.status == 1 and 'input "hidden_states"' in e.message, str(e))
    try:
        ctx.run(d, "kb_cpu_no_such", [kb.Tensor.from_values("bfloat16", [2, 64], [0.5] * 128), w], [y])
        check("an unknown solution is not found", False, "no error")
    except kb.Error as e:
        check("an unknown solution is not found", e.status == 5, str(e))
    d.close()

if not hidden_numpy:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), libkb, bundled, scratch + "-no-numpy",
                        "--no-numpy"], capture_output=True, text=True, timeout=300)
    print(r.stdout, end="")
    check("the module works without numpy", r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:])
print(f"{failures} failure{'s' if failures != 1 else ''}")
sys.exit(1 if failures else 0)
