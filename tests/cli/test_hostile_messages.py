#!/usr/bin/env python3
"""Hostile text in inputs and what kb prints about it: index blobs judged by
one rule in kb validate and kb bench, messages per file capped, long names
cut, control characters escaped. The big inputs are generated here.

usage: test_hostile_messages.py KB SHARED_DIR
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

kb, shared = sys.argv[1:3]
failures = 0
TIMEOUT_S = 600 * float(os.environ.get("KB_TEST_TIMEOUT_SCALE", "1"))


def run(*args, cwd=None):
    p = subprocess.run([kb, *args], capture_output=True, timeout=TIMEOUT_S, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global failures
    if cond:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {str(detail)[:3000]}")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w", encoding=None if isinstance(data, bytes) else "utf-8") as f:
        f.write(data)


def safetensors_bytes(tensors):
    header, data = {}, b""
    for name, code, shape, raw in tensors:
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def small_def(name, **extra):
    d = {"name": name, "op_type": "gemm", "axes": {"M": {"type": "var"}, "K": {"type": "const", "value": 4}},
         "inputs": {"x": {"shape": ["M", "K"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["M", "K"], "dtype": "float32"}},
         "reference": "def run(x):\n    return x\n"}
    d.update(extra)
    return d


ESC, RLO, LRI = "\x1b", "\u202e", "\u2066"

with tempfile.TemporaryDirectory() as tmp:
    # ---- 10^6 problems in one file: at most 50 lines of them, then one count line.
    n = 10**6
    d = small_def("many_unknown_inputs")
    d["inputs"].update({f"in{i}": {"shape": ["M", "no_such_axis"], "dtype": "float32"} for i in range(n)})
    many = os.path.join(tmp, "many.json")
    write(many, json.dumps(d))
    rc, out, err = run("validate", many)
    lines = err.decode().splitlines()
    check("10^6 problems of one definition: exit 1", rc == 1, err[-500:])
    check("10^6 problems: at most 51 lines of them", len(lines) <= 51 and len(err) < 64 * 1024,
          f"{len(lines)} lines, {len(err)} bytes")
    check("10^6 problems: one line counts the rest",
          any(l.startswith("... and ") and l.endswith(f"more problems in {many}") for l in lines), lines[-3:])
    check("10^6 problems: the summary counts every one", f": {n} errors" in out.decode(), out)

    # The same in a workload line naming 10^6 inputs its definition lacks.
    ds = os.path.join(tmp, "ds_many")
    write(os.path.join(ds, "definitions", "gemm", "small.json"), json.dumps(small_def("small")))
    wl = {"uuid": "u1", "axes": {"M": 2}, "inputs": {"x": {"type": "random"}}}
    wl["inputs"].update({f"extra{i}": {"type": "random"} for i in range(n)})
    write(os.path.join(ds, "workloads", "gemm", "small.jsonl"),
          json.dumps({"definition": "small", "solution": None, "workload": wl, "evaluation": None}) + "\n")
    rc, out, err = run("validate", ds)
    check("10^6 unknown workload inputs: bounded output", rc == 1 and len(err) < 64 * 1024 and
          b"more problems in" in err, f"rc={rc} {len(err)} bytes {err[-300:]}")

    # ---- A 1 MB name is cut, not echoed whole.
    big = "N" * (1 << 20)
    ds = os.path.join(tmp, "ds_big")
    write(os.path.join(ds, "definitions", "gemm", "small.json"), json.dumps(small_def("small")))
    lines = [{"uuid": "u1", "axes": {"M": 2, big: 1}, "inputs": {"x": {"type": "random"}}},
             {"uuid": "u2", "axes": {"M": 2}, "inputs": {"x": {"type": "random"}, big: {"type": "random"}}}]
    text = "".join(json.dumps({"definition": "small", "solution": None, "workload": w, "evaluation": None}) + "\n"
                   for w in lines)
    text += json.dumps({"definition": big, "solution": None,
                        "workload": {"uuid": "u3", "axes": {"M": 2}, "inputs": {"x": {"type": "random"}}},
                        "evaluation": None}) + "\n"
    write(os.path.join(ds, "workloads", "gemm", "small.jsonl"), text)
    rc, out, err = run("validate", ds)
    check("1 MB names: exit 1 with the three problems", rc == 1 and b": 3 errors" in out, out + err[-500:])
    check("1 MB names: quoted names cut with their size", err.count(b'...(1048576 bytes)"') == 3, err[:3000])
    check("1 MB names: never echoed whole", len(err) < 16 * 1024 and b"N" * 1000 not in err, f"{len(err)} bytes")

    # ---- ESC and bidi controls reach no terminal raw.
    esc = os.path.join(tmp, "esc.json")
    write(esc, json.dumps(small_def(f"esc{ESC}[2Jname{RLO}",
                                    description=f"red {ESC}[31mtext{RLO} and {LRI}isolate\x7f\x07"),
                          ensure_ascii=False))
    rc, out, err = run("validate", esc)
    both = out + err
    check("control characters in a name: reported", rc == 1 and b"esc\\x1b[2Jname\\u{202e}" in err, err)
    check("control characters in a name: no raw ESC or RLO",
          b"\x1b" not in both and RLO.encode() not in both, both)
    desc = os.path.join(tmp, "desc.json")
    write(desc, json.dumps(small_def("desc", description=f"red {ESC}[31mtext{RLO} and {LRI}isolate\x7f\x07"),
                           ensure_ascii=False))
    rc, out, err = run("show", desc)
    both = out + err
    check("kb show escapes a description's controls", rc == 0 and
          b"red \\x1b[31mtext\\u{202e} and \\u{2066}isolate\\x7f\\x07" in out, both)
    check("kb show prints no raw control", all(c.encode() not in both for c in (ESC, RLO, LRI, "\x7f", "\x07")), both)
    # A workload file with a control character in a uuid, through a dataset walk.
    ds = os.path.join(tmp, "ds_esc")
    write(os.path.join(ds, "definitions", "gemm", "small.json"), json.dumps(small_def("small")))
    w = {"uuid": f"u{ESC}]0;title\x07", "axes": {"M": 2, "Q": 1}, "inputs": {"x": {"type": "random"}}}
    write(os.path.join(ds, "workloads", "gemm", "small.jsonl"),
          json.dumps({"definition": "small", "solution": None, "workload": w, "evaluation": None}) + "\n")
    rc, out, err = run("validate", ds)
    check("workload problems print no raw control", rc == 1 and b"\x1b" not in out + err and b"\x07" not in out + err,
          out + err)

    # A BackendBench line quoting control characters back in its parse error.
    bb = os.path.join(tmp, "bb.txt")
    write(bb, f"Operator: aten.add.Tensor\ncnt: 1, ((T([2], f16), {ESC}[31m{RLO}bad), {{}})\n")
    rc, out, err = run("backendbench", "parse", bb)
    check("kb backendbench parse: the bad line is named, no raw control", rc == 1 and b"bb.txt:2" in err and
          b"\x1b" not in out + err and RLO.encode() not in out + err, out + err)

    # ---- Index blobs: kb validate and kb bench refuse the same entry with the same words.
    src = os.path.join(shared, "flashinfer-trace", "definitions", "gqa_paged", "gqa_paged_decode_h16_kv2_d128_ps1.json")
    if not os.path.exists(src):
        print("skip index blobs: no shipped gqa_paged definition")
    else:
        name = "gqa_paged_decode_h16_kv2_d128_ps1"
        cases = {
            "page out of range": ([0, 1, 3], [5, 9, 2], "kv_indices[1] = 9 is outside [0, 8) (num_pages)"),
            "negative page": ([0, 1, 3], [5, -1, 2], "kv_indices[1] = -1 is outside [0, 8) (num_pages)"),
            "decreasing indptr": ([0, 2, 1, 3], [5, 1, 2],
                                  "kv_indptr[2] = 1 is less than kv_indptr[1] = 2 (an indptr never decreases)"),
            "indptr not from 0": ([1, 2, 3], [5, 1, 2], "kv_indptr[0] = 1, expected 0 (an indptr starts at 0)"),
        }
        for what, (indptr, indices, want) in cases.items():
            ds = os.path.join(tmp, "idx_" + what.replace(" ", "_"))
            with open(src) as f:
                write(os.path.join(ds, "definitions", "gqa_paged", name + ".json"), f.read())
            blob = "blob/workloads/gqa_paged/w.safetensors"
            write(os.path.join(ds, blob), safetensors_bytes([
                ("kv_indptr", "I32", [len(indptr)], struct.pack(f"<{len(indptr)}i", *indptr)),
                ("kv_indices", "I32", [len(indices)], struct.pack(f"<{len(indices)}i", *indices))]))
            w = {"uuid": "idx-1", "axes": {"batch_size": len(indptr) - 1, "num_pages": 8, "len_indptr": len(indptr),
                                            "num_kv_indices": len(indices)},
                 "inputs": {"q": {"type": "random"}, "k_cache": {"type": "random"}, "v_cache": {"type": "random"},
                            "kv_indptr": {"type": "safetensors", "path": blob, "tensor_key": "kv_indptr"},
                            "kv_indices": {"type": "safetensors", "path": blob, "tensor_key": "kv_indices"},
                            "sm_scale": {"type": "scalar", "value": 0.08}}}
            write(os.path.join(ds, "workloads", "gqa_paged", name + ".jsonl"),
                  json.dumps({"definition": name, "solution": None, "workload": w, "evaluation": None}) + "\n")
            rc, out, err = run("validate", ds)
            check(f"index blob, {what}: kb validate names file, workload, tensor and entry",
                  rc == 1 and f"{name}.jsonl:1: workload.inputs.".encode() in err and b"workload idx-1: blob " in err
                  and want.encode() in err, err)
            rc, out, err = run("bench", ds, "--device", "cpu", "--no-time", "--out", os.path.join(ds, "out"))
            check(f"index blob, {what}: kb bench refuses it by the same rule",
                  rc != 0 and want.encode() in out + err, out + err)

sys.exit(1 if failures else 0)
