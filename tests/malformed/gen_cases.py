#!/usr/bin/env python3
"""Writes the malformed-input corpus (cases/) and the good controls (good/).

Run from anywhere: `python3 tests/malformed/gen_cases.py`. It rebuilds
tests/malformed/cases and tests/malformed/good from scratch. Expected messages
live in expected.txt (kept by hand: they are kb's exact current wording).

Every case is one top-level entry of cases/: a loose .json/.jsonl file, or a
small dataset directory (definitions/ + workloads/ ...) for checks that need a
definition to compare against. Each case holds exactly one problem.
"""
import copy
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
GOOD = os.path.join(HERE, "good")


def write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)


def dumps(obj):
    return json.dumps(obj, indent=2) + "\n"


def line(obj):
    return json.dumps(obj, separators=(", ", ": "))


# ---------------------------------------------------------------------------
# A small valid definition for the loose definition cases.

def base_def(name):
    return {
        "name": name,
        "op_type": "rmsnorm",
        "description": "Tiny RMSNorm used by the malformed-input corpus.",
        "tags": ["status:verified", "fused"],
        "axes": {
            "batch_size": {"type": "var"},
            "hidden_size": {"type": "const", "value": 8},
        },
        "inputs": {
            "x": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
            "weight": {"shape": ["hidden_size"], "dtype": "float32"},
        },
        "outputs": {
            "y": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
        },
        "constraints": ["hidden_size % 4 == 0"],
        "reference": "import torch\n\n\ndef run(x, weight):\n    return x * weight\n",
    }


def def_case(name, mutate):
    d = base_def(name)
    mutate(d)
    write(CASES, name + ".json", dumps(d))


def setter(*keys_and_value):
    *keys, value = keys_and_value

    def f(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return f


def deleter(*keys):
    def f(d):
        for k in keys[:-1]:
            d = d[k]
        del d[keys[-1]]
    return f


# ---------------------------------------------------------------------------
# A richer definition for dataset (workload / trace / blob) cases.

OP_DEF = {
    "name": "mini_op",
    "op_type": "mini",
    "description": "Definition for workload cases: var M and N (N == M + 1), const K.",
    "axes": {
        "M": {"type": "var"},
        "N": {"type": "var"},
        "K": {"type": "const", "value": 8},
    },
    "inputs": {
        "A": {"shape": ["M", "K"], "dtype": "float32"},
        "indptr": {"shape": ["N"], "dtype": "int32"},
        "eps": {"shape": None, "dtype": "float32"},
        "flag": {"shape": None, "dtype": "bool"},
        "count": {"shape": None, "dtype": "int32"},
    },
    "outputs": {
        "out": {"shape": ["M", "K"], "dtype": "float32"},
    },
    "constraints": ["N == M + 1", "indptr.shape[0] == M + 1"],
    "reference": "def run(A, indptr, eps, flag, count):\n    return A\n",
}


def good_workload(uuid="00000000-0000-0000-0000-000000000001", m=2):
    return {
        "uuid": uuid,
        "axes": {"M": m, "N": m + 1},
        "inputs": {
            "A": {"type": "random"},
            "indptr": {"type": "random"},
            "eps": {"type": "scalar", "value": 1e-5},
            "flag": {"type": "scalar", "value": True},
            "count": {"type": "scalar", "value": 3},
        },
    }


def wl_line(wl, definition="mini_op"):
    return {"definition": definition, "solution": None, "workload": wl, "evaluation": None}


def dataset_case(root, name, lines=None, raw_jsonl=None, extra=None, definition=OP_DEF):
    """A dataset directory: definitions/mini/mini_op.json + workloads/mini/mini_op.jsonl."""
    base = os.path.join(root, name)
    if definition is not None:
        write(base, "definitions/mini/mini_op.json", dumps(definition))
    if raw_jsonl is not None:
        write(base, "workloads/mini/mini_op.jsonl", raw_jsonl)
    elif lines is not None:
        write(base, "workloads/mini/mini_op.jsonl", "".join(line(x) + "\n" for x in lines))
    for rel, data in (extra or {}).items():
        write(base, rel, data)


def wl_case(name, mutate, extra=None):
    wl = good_workload()
    mutate(wl)
    dataset_case(CASES, name, lines=[wl_line(wl)], extra=extra)


def safetensors_bytes(tensors):
    """tensors: list of (name, code, shape, raw bytes)."""
    header = {}
    data = b""
    for name, code, shape, raw in tensors:
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


BLOB = "blob/workloads/mini/mini_op/mini_op_00000000-0000-0000-0000-000000000001.safetensors"


def blob_case(name, blob):
    wl = good_workload()
    wl["inputs"]["indptr"] = {"type": "safetensors", "path": BLOB, "tensor_key": "indptr"}
    dataset_case(CASES, name, lines=[wl_line(wl)], extra={BLOB: blob})


# A paged definition for index blobs: kb validate applies the rule kb bench
# applies to index inputs (pages in range, indptr from 0 and non-decreasing).

PAGED_DEF = {
    "name": "mini_paged",
    "op_type": "mini_paged",
    "description": "Definition for index-blob cases: a paged cache of num_pages pages of 4 tokens.",
    "axes": {
        "batch_size": {"type": "var"},
        "len_indptr": {"type": "var"},
        "num_kv_indices": {"type": "var"},
        "num_pages": {"type": "var"},
        "page_size": {"type": "const", "value": 4},
        "D": {"type": "const", "value": 4},
    },
    "inputs": {
        "q": {"shape": ["batch_size", "D"], "dtype": "float32"},
        "k_cache": {"shape": ["num_pages", "page_size", "D"], "dtype": "float32"},
        "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
        "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
        "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"},
    },
    "outputs": {"out": {"shape": ["batch_size", "D"], "dtype": "float32"}},
    "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
    "reference": "def run(q, k_cache, kv_indptr, kv_indices, kv_last_page_len):\n    return q\n",
}
PAGED_BLOB = "blob/workloads/mini_paged/mini_paged/mini_paged_00000000-0000-0000-0000-000000000001.safetensors"


def paged_dataset(root, name, indptr, indices, last, num_pages=4):
    """A dataset whose one workload gives kv_indptr, kv_indices and kv_last_page_len as one blob."""
    base = os.path.join(root, name)
    write(base, "definitions/mini_paged/mini_paged.json", dumps(PAGED_DEF))
    wl = {
        "uuid": "00000000-0000-0000-0000-000000000001",
        "axes": {"batch_size": len(last), "len_indptr": len(indptr), "num_kv_indices": len(indices),
                 "num_pages": num_pages},
        "inputs": {"q": {"type": "random"}, "k_cache": {"type": "random"}},
    }
    blob = []
    for key, values in (("kv_indptr", indptr), ("kv_indices", indices), ("kv_last_page_len", last)):
        wl["inputs"][key] = {"type": "safetensors", "path": PAGED_BLOB, "tensor_key": key}
        blob.append((key, "I32", [len(values)], struct.pack(f"<{len(values)}i", *values)))
    write(base, "workloads/mini_paged/mini_paged.jsonl", line(wl_line(wl, "mini_paged")) + "\n")
    write(base, PAGED_BLOB, safetensors_bytes(blob))


# ---------------------------------------------------------------------------
# Traces and solutions.

def good_evaluation(status="PASSED"):
    ev = {
        "status": status,
        "environment": {"hardware": "NVIDIA H100", "libs": {"torch": "2.8.0"}},
        "timestamp": "2025-01-01T00:00:00Z",
        "log": "",
    }
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {"max_relative_error": 0.001, "max_absolute_error": 0.0001}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": 0.5, "reference_latency_ms": 1.0, "speedup_factor": 2.0}
    return ev


def good_trace():
    return {"definition": "mini_op", "workload": good_workload(), "solution": "mini_op_python",
            "evaluation": good_evaluation()}


def trace_case(name, mutate, n_good_before=1):
    lines = [good_trace() for _ in range(n_good_before)]
    t = good_trace()
    mutate(t)
    lines.append(t)
    write(CASES, name + ".jsonl", "".join(line(x) + "\n" for x in lines))


def good_solution(name="mini_op_python"):
    return {
        "name": name,
        "definition": "mini_op",
        "author": "corpus",
        "description": "Python solution for mini_op.",
        "spec": {
            "language": "python",
            "target_hardware": ["NVIDIA H100"],
            "entry_point": "main.py::run",
            "dependencies": ["torch"],
            "destination_passing_style": True,
        },
        "sources": [{"path": "main.py", "content": "def run(A, indptr, eps, flag, count, out):\n    out.copy_(A)\n"}],
    }


def sol_case(name, mutate):
    s = good_solution(name)
    mutate(s)
    write(CASES, name + ".json", dumps(s))


# ---------------------------------------------------------------------------

def make_cases():
    d = lambda name, f: def_case(name, f)

    # Wrong JSON kinds, one per major field.
    d("def_name_not_string", setter("name", 42))
    d("def_op_type_not_string", setter("op_type", ["rmsnorm"]))
    d("def_axes_not_object", setter("axes", ["batch_size", "hidden_size"]))
    d("def_axis_not_object", setter("axes", "batch_size", "var"))
    d("def_axis_type_not_string", setter("axes", "batch_size", "type", 1))
    d("def_axis_value_string", setter("axes", "hidden_size", "value", "8"))
    d("def_axis_value_float", setter("axes", "hidden_size", "value", 8.5))
    d("def_axis_value_negative", setter("axes", "hidden_size", "value", -8))
    d("def_inputs_not_object", setter("inputs", [{"name": "x"}]))
    d("def_outputs_not_object", setter("outputs", "y"))
    d("def_tensor_spec_not_object", setter("inputs", "weight", ["hidden_size"]))
    d("def_shape_not_list", setter("inputs", "x", "shape", "batch_size"))
    d("def_shape_item_not_string", setter("inputs", "x", "shape", ["batch_size", 8]))
    d("def_dtype_not_string", setter("inputs", "weight", "dtype", 32))
    d("def_reference_not_string", setter("reference", ["def run(x, weight):", "    return x"]))
    d("def_tags_not_list", setter("tags", "fused"))
    d("def_tag_not_string", setter("tags", ["status:verified", 7]))
    d("def_constraints_not_list", setter("constraints", "hidden_size % 4 == 0"))
    d("def_constraint_not_string", setter("constraints", [True]))
    d("def_description_not_string", setter("description", {"text": "x"}))
    d("def_optional_not_bool", setter("inputs", "weight", "optional", "yes"))
    write(CASES, "def_root_is_array.json", dumps([base_def("def_root_is_array")]))

    # Missing required fields.
    d("def_missing_name", deleter("name"))
    d("def_missing_op_type", deleter("op_type"))
    d("def_missing_axes", deleter("axes"))
    d("def_missing_inputs", deleter("inputs"))
    d("def_missing_outputs", deleter("outputs"))
    d("def_missing_reference", deleter("reference"))
    d("def_missing_dtype", deleter("inputs", "x", "dtype"))
    d("def_missing_shape", deleter("outputs", "y", "shape"))
    d("def_missing_axis_type", deleter("axes", "batch_size", "type"))
    d("def_empty_name", setter("name", ""))
    d("def_no_outputs", setter("outputs", {}))

    # Names that become file names (OUT/traces/<author>/<op_type>/<definition>.jsonl).
    d("def_name_absolute_path", setter("name", "/tmp/kb_escape/abs_def"))
    d("def_name_escapes_out", setter("name", "../../../../../../tmp/kb_escape/escaped_def"))
    d("def_name_control_character", setter("name", "rms\x1bnorm"))
    d("def_op_type_dotdot", setter("op_type", ".."))

    # Semantic definition rules.
    d("def_unknown_shape_axis", setter("inputs", "x", "shape", ["batch_size", "hidden_dim"]))
    d("def_bad_dtype", setter("inputs", "x", "dtype", "float17"))
    d("def_bad_dtype_torch_name", setter("inputs", "x", "dtype", "torch.float32"))
    d("def_bad_dtype_case", setter("inputs", "weight", "dtype", "Float32"))
    d("def_const_axis_without_value", deleter("axes", "hidden_size", "value"))
    d("def_var_axis_with_value", setter("axes", "batch_size", "value", 4))
    d("def_bad_axis_type", setter("axes", "batch_size", "type", "dynamic"))
    d("def_io_name_overlap", setter("outputs", "x", {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}))
    d("def_reference_no_run", setter("reference", "import torch\n\ndef forward(x, weight):\n    return x * weight\n"))
    d("def_reference_nested_run",
      setter("reference", "class Op:\n    def run(self, x, weight):\n        return x * weight\n"))
    d("def_rank_over_limit",
      setter("inputs", "x", "shape", ["batch_size"] + ["hidden_size"] * 16))
    d("def_const_tensor_too_large",
      lambda x: (x["axes"].__setitem__("hidden_size", {"type": "const", "value": 2097152}),
                 x["inputs"].__setitem__("w2", {"shape": ["hidden_size", "hidden_size"], "dtype": "float32"})))

    # Constraints.
    d("def_constraint_incomplete", setter("constraints", ["hidden_size >"]))
    d("def_constraint_unclosed_paren", setter("constraints", ["(hidden_size + 1 == batch_size"]))
    d("def_constraint_bad_character", setter("constraints", ["hidden_size $ 4 == 0"]))
    d("def_constraint_assignment", setter("constraints", ["hidden_size = 8"]))
    d("def_constraint_leading_zero", setter("constraints", ["hidden_size == 08"]))
    d("def_constraint_literal_too_big", setter("constraints", ["hidden_size < 99999999999999999999"]))
    d("def_constraint_empty", setter("constraints", [""]))
    d("def_constraint_python_statement", setter("constraints", ["import os"]))
    d("def_constraint_unknown_axis", setter("constraints", ["hidden_size % num_heads == 0"]))
    d("def_constraint_unknown_tensor", setter("constraints", ["z.shape[0] == batch_size"]))
    d("def_constraint_violated_const", setter("constraints", ["hidden_size % 3 == 0"]))

    d("def_constraint_too_deep", setter("constraints", ["(" * 100 + "hidden_size" + ")" * 100 + " == 8"]))
    d("def_constraint_too_long", setter("constraints", ["hidden_size == " + " + ".join(["1"] * 2100)]))
    d("def_constraint_division_by_zero", setter("constraints", ["hidden_size // 0 == 1"]))
    d("def_constraint_unknown_attribute", setter("constraints", ["x.dtype == 1"]))
    d("def_constraint_string_literal", setter("constraints", ["'a' == 'a'"]))

    # Other definition rules.
    d("def_empty_op_type", setter("op_type", ""))
    d("def_empty_tag", setter("tags", ["status:verified", ""]))
    d("def_empty_tensor_name", lambda x: x["inputs"].__setitem__("", x["inputs"].pop("weight")))
    d("def_axis_parent_unknown", setter("axes", "batch_size", "parent", "num_seqs"))
    d("def_axis_parent_self", setter("axes", "batch_size", "parent", "batch_size"))
    d("def_axis_parent_const", setter("axes", "batch_size", "parent", "hidden_size"))
    d("def_axis_parent_cycle",
      lambda x: (x["axes"]["batch_size"].__setitem__("parent", "num_seqs"),
                 x["axes"].__setitem__("num_seqs", {"type": "var", "parent": "batch_size"})))

    # The seed-001 dialect (id, reference_code, assumptions): a constraint's problem is named where the
    # document wrote it, assumptions[i].
    def seed(x):
        x["id"] = x.pop("name")
        x["reference_code"] = x.pop("reference")
        x["assumptions"] = x.pop("constraints")
        del x["op_type"]

    def seed_assumptions(assumptions):
        return lambda x: (seed(x), x.__setitem__("assumptions", assumptions))
    d("seed_assumption_unknown_axis", seed_assumptions(["hidden_size % 4 == 0", "hidden_size % num_heads == 0"]))
    d("seed_assumption_violated", seed_assumptions(["hidden_size > 0", "hidden_size % 3 == 0"]))
    d("seed_assumption_incomplete", seed_assumptions(["hidden_size >"]))
    d("seed_assumption_not_string", seed_assumptions(["hidden_size > 0", 7]))
    d("def_two_references", setter("reference_code", "def run(x, weight):\n    return x\n"))
    d("def_constraints_and_assumptions", setter("assumptions", ["hidden_size > 0"]))
    d("def_id_differs_from_name", setter("id", "rmsnorm_h8"))

    # Broken JSON text.
    good = dumps(base_def("def_truncated"))
    write(CASES, "def_truncated.json", good[: len(good) // 2])
    write(CASES, "def_empty.json", "")
    write(CASES, "def_whitespace_only.json", " \n\t\n")
    write(CASES, "def_trailing_garbage.json", dumps(base_def("def_trailing_garbage")) + "}\n")
    write(CASES, "def_two_documents.json", dumps(base_def("def_two_documents")) * 2)
    write(CASES, "def_trailing_comma.json", dumps(base_def("def_trailing_comma")).replace('"fused"\n', '"fused",\n'))
    write(CASES, "def_single_quotes.json", dumps(base_def("def_single_quotes")).replace('"op_type": "rmsnorm"', "'op_type': 'rmsnorm'"))
    write(CASES, "def_nan_literal.json", dumps(base_def("def_nan_literal")).replace('"value": 8', '"value": NaN'))
    write(CASES, "def_invalid_utf8.json",
          dumps(base_def("def_invalid_utf8")).encode().replace(b"Tiny RMSNorm", b"Tiny \xff\xfe RMSNorm"))
    deep = base_def("def_deep_nesting")
    text = dumps(deep).replace('"description": "Tiny RMSNorm used by the malformed-input corpus."',
                               '"description": ' + "[" * 10000 + "]" * 10000)
    write(CASES, "def_deep_nesting.json", text)
    write(CASES, "def_integer_above_int64.json",
          dumps(base_def("def_integer_above_int64")).replace('"value": 8', '"value": 18446744073709551616'))
    write(CASES, "def_integer_above_int64_fits_u64.json",
          dumps(base_def("def_integer_above_int64_fits_u64")).replace('"value": 8', '"value": 9223372036854775808'))

    # Duplicate keys.
    text = dumps(base_def("def_duplicate_key"))
    write(CASES, "def_duplicate_key.json", text.replace('"op_type": "rmsnorm",', '"op_type": "rmsnorm",\n  "op_type": "norm",'))
    text = dumps(base_def("def_duplicate_input"))
    write(CASES, "def_duplicate_input.json",
          text.replace('"inputs": {', '"inputs": {\n    "weight": {"shape": ["hidden_size"], "dtype": "float16"},'))
    text = dumps(base_def("def_duplicate_axis"))
    write(CASES, "def_duplicate_axis.json",
          text.replace('"axes": {', '"axes": {\n    "hidden_size": {"type": "const", "value": 16},'))
    text = dumps(base_def("def_duplicate_key_in_spec"))
    write(CASES, "def_duplicate_key_in_spec.json",
          text.replace('"dtype": "float32"\n    },\n    "weight"', '"dtype": "float32",\n      "dtype": "int8"\n    },\n    "weight"', 1))

    # Not a JSON file at all.
    write(CASES, "not_json.txt", "name: rmsnorm\n")

    # ---- dataset directories ----

    # Two definition files with the same name.
    a = copy.deepcopy(OP_DEF)
    write(CASES, "ds_duplicate_definition/definitions/mini/mini_op.json", dumps(a))
    write(CASES, "ds_duplicate_definition/definitions/mini/mini_op_copy.json", dumps(a))

    # JSONL with one bad line in the middle.
    lines = [line(wl_line(good_workload(f"00000000-0000-0000-0000-00000000000{i}", m=i))) for i in range(1, 6)]
    lines[2] = lines[2][: len(lines[2]) // 2]
    dataset_case(CASES, "ds_jsonl_bad_middle_line", raw_jsonl="\n".join(lines) + "\n")
    lines = [line(wl_line(good_workload(f"00000000-0000-0000-0000-00000000000{i}", m=i))) for i in range(1, 4)]
    lines[1] = '{"definition": "mini_op", "workload": ' + "[" * 10000 + "]" * 10000 + "}"
    dataset_case(CASES, "ds_jsonl_deep_line", raw_jsonl="\n".join(lines) + "\n")
    lines = [line(wl_line(good_workload(f"00000000-0000-0000-0000-00000000000{i}", m=i))) for i in range(1, 4)]
    lines[1] = line(wl_line(good_workload("00000000-0000-0000-0000-000000000001", m=7)))
    dataset_case(CASES, "ds_jsonl_duplicate_uuid", raw_jsonl="\n".join(lines) + "\n")

    # Workload axes.
    wl_case("ds_wl_axis_negative", setter("axes", "M", -2))
    wl_case("ds_wl_axis_float", setter("axes", "M", 2.0))
    wl_case("ds_wl_axis_string", setter("axes", "M", "2"))
    wl_case("ds_wl_axis_binds_const", setter("axes", "K", 8))
    wl_case("ds_wl_axis_unknown", setter("axes", "L", 4))
    wl_case("ds_wl_axis_missing_var", deleter("axes", "N"))
    wl_case("ds_wl_axis_huge", lambda w: w["axes"].update({"M": 10**15, "N": 10**15 + 1}))
    wl_case("ds_wl_axis_overflow_int64", lambda w: w["axes"].update({"M": 2**62, "N": 2**62 + 1}))
    wl_case("ds_wl_axis_above_int64", setter("axes", "M", 2**64))
    wl_case("ds_wl_constraint_violated", setter("axes", "N", 5))
    wl_case("ds_wl_missing_uuid", deleter("uuid"))

    wl_case("ds_wl_empty_uuid", setter("uuid", ""))
    wl_case("ds_wl_axes_not_object", setter("axes", [2, 3]))
    wl_case("ds_wl_inputs_not_object", setter("inputs", None))
    t = line(wl_line(good_workload())).replace('"axes": {"M": 2,', '"axes": {"M": 2, "M": 4,')
    dataset_case(CASES, "ds_wl_duplicate_axis_key", raw_jsonl=t + "\n")

    # Workload inputs.
    wl_case("ds_wl_input_missing", deleter("inputs", "indptr"))
    wl_case("ds_wl_input_is_output", setter("inputs", "out", {"type": "random"}))
    wl_case("ds_wl_input_unknown_type", setter("inputs", "A", {"type": "zeros"}))
    wl_case("ds_wl_input_not_object", setter("inputs", "A", "random"))
    wl_case("ds_wl_scalar_float_for_int", setter("inputs", "count", {"type": "scalar", "value": 2.5}))
    wl_case("ds_wl_scalar_int_for_bool", setter("inputs", "flag", {"type": "scalar", "value": 1}))
    wl_case("ds_wl_scalar_bool_for_float", setter("inputs", "eps", {"type": "scalar", "value": False}))
    wl_case("ds_wl_scalar_string", setter("inputs", "eps", {"type": "scalar", "value": "1e-5"}))
    wl_case("ds_wl_scalar_missing_value", setter("inputs", "eps", {"type": "scalar"}))
    wl_case("ds_wl_scalar_for_tensor", setter("inputs", "A", {"type": "scalar", "value": 1.0}))
    wl_case("ds_wl_random_for_scalar", setter("inputs", "eps", {"type": "random"}))
    wl_case("ds_wl_safetensors_absolute_path",
            setter("inputs", "indptr", {"type": "safetensors", "path": "/etc/passwd", "tensor_key": "indptr"}))
    wl_case("ds_wl_safetensors_dotdot_path",
            setter("inputs", "indptr", {"type": "safetensors", "path": "blob/../../../outside.safetensors",
                                        "tensor_key": "indptr"}))
    wl_case("ds_wl_safetensors_missing_key",
            setter("inputs", "indptr", {"type": "safetensors", "path": BLOB}))

    wl_case("ds_wl_safetensors_empty_path",
            setter("inputs", "indptr", {"type": "safetensors", "path": "", "tensor_key": "indptr"}))
    wl_case("ds_wl_safetensors_path_is_directory",
            setter("inputs", "indptr", {"type": "safetensors", "path": "definitions", "tensor_key": "indptr"}))
    wl_case("ds_wl_safetensors_path_not_safetensors",
            setter("inputs", "indptr", {"type": "safetensors", "path": "definitions/mini/mini_op.json",
                                        "tensor_key": "indptr"}))

    # Workload naming a definition the dataset lacks; workload line with a solution.
    dataset_case(CASES, "ds_wl_missing_definition", lines=[wl_line(good_workload(), definition="mini_opp")])
    t = wl_line(good_workload())
    t["solution"] = "mini_op_python"
    dataset_case(CASES, "ds_wl_line_with_solution", lines=[t])

    # Blobs.
    good_blob = safetensors_bytes([("indptr", "I32", [3], struct.pack("<3i", 0, 1, 2))])
    blob_case("ds_blob_corrupt_header", struct.pack("<Q", 40) + b'{"indptr": {"dtype": "I32", "shape": [3')
    blob_case("ds_blob_truncated_data", good_blob[:-4])
    blob_case("ds_blob_length_huge", struct.pack("<Q", 2**63) + b"{}")
    blob_case("ds_blob_wrong_dtype", safetensors_bytes([("indptr", "I64", [3], struct.pack("<3q", 0, 1, 2))]))
    blob_case("ds_blob_wrong_shape", safetensors_bytes([("indptr", "I32", [4], struct.pack("<4i", 0, 1, 2, 3))]))
    blob_case("ds_blob_missing_tensor", safetensors_bytes([("offsets", "I32", [3], struct.pack("<3i", 0, 1, 2))]))

    header = b'{"indptr": not json at all}'
    header += b" " * (-len(header) % 8)
    blob_case("ds_blob_header_not_json", struct.pack("<Q", len(header)) + header + b"\0" * 12)
    blob_case("ds_blob_unknown_dtype_code", safetensors_bytes([("indptr", "I33", [3], struct.pack("<3i", 0, 1, 2))]))
    blob_case("ds_blob_absurd_shape", safetensors_bytes([("indptr", "I32", [2**20, 2**20, 2], b"")]))
    blob_case("ds_blob_empty_file", b"")

    # Index blobs that kb bench refuses before a run.
    paged_dataset(CASES, "ds_index_kv_indices_out_of_range", [0, 1, 3], [3, 4, 2], [4, 1])
    paged_dataset(CASES, "ds_index_kv_indices_negative", [0, 1, 3], [-1, 0, -5], [4, 1])
    paged_dataset(CASES, "ds_index_indptr_decreasing", [0, 2, 1, 3], [0, 1, 2], [4, 1, 2])
    paged_dataset(CASES, "ds_index_indptr_not_from_zero", [1, 2, 3], [0, 1, 2], [4, 1])
    paged_dataset(CASES, "ds_index_indptr_end_short", [0, 1, 2], [0, 1, 2], [4, 1])
    paged_dataset(CASES, "ds_index_last_page_len_over_page_size", [0, 1, 3], [3, 0, 2], [5, 1])
    paged_dataset(CASES, "ds_index_many_bad_entries", [0, 50, 100], [99] * 100, [4, 4])

    # Solutions in a dataset: unknown definition, duplicate names; traces naming a missing solution.
    base = os.path.join(CASES, "ds_solution_unknown_definition")
    write(base, "definitions/mini/mini_op.json", dumps(OP_DEF))
    s = good_solution()
    s["definition"] = "mini_opp"
    write(base, "solutions/corpus/mini/mini_opp/mini_op_python.json", dumps(s))
    base = os.path.join(CASES, "ds_duplicate_solution")
    write(base, "definitions/mini/mini_op.json", dumps(OP_DEF))
    write(base, "solutions/corpus/mini/mini_op/a.json", dumps(good_solution()))
    write(base, "solutions/corpus/mini/mini_op/b.json", dumps(good_solution()))
    base = os.path.join(CASES, "ds_trace_unknown_solution")
    write(base, "definitions/mini/mini_op.json", dumps(OP_DEF))
    write(base, "solutions/corpus/mini/mini_op/mini_op_python.json", dumps(good_solution()))
    t = good_trace()
    t["solution"] = "mini_op_triton"
    write(base, "traces/corpus/mini/mini_op.jsonl", line(good_trace()) + "\n" + line(t) + "\n")

    # Traces (loose .jsonl: lines with an evaluation are traces).
    trace_case("trace_passed_without_performance", deleter("evaluation", "performance"))
    trace_case("trace_passed_without_correctness", deleter("evaluation", "correctness"))
    trace_case("trace_runtime_error_with_correctness",
               lambda t: t.__setitem__("evaluation", {**good_evaluation("RUNTIME_ERROR"),
                                                      "correctness": {"max_relative_error": 0.0,
                                                                      "max_absolute_error": 0.0}}))
    trace_case("trace_incorrect_numerical_with_performance",
               lambda t: t.__setitem__("evaluation", {**good_evaluation("INCORRECT_NUMERICAL"),
                                                      "performance": {"latency_ms": 1.0,
                                                                      "reference_latency_ms": 1.0,
                                                                      "speedup_factor": 1.0}}))
    trace_case("trace_unknown_status", setter("evaluation", "status", "SUCCESS"))
    trace_case("trace_evaluated_null_solution", setter("solution", None))
    trace_case("trace_negative_latency", setter("evaluation", "performance", "latency_ms", -1.0))
    trace_case("trace_missing_environment", deleter("evaluation", "environment"))
    trace_case("trace_missing_workload", deleter("workload"))
    write(CASES, "trace_line_not_object.jsonl",
          "".join(line(good_trace()) + "\n" for _ in range(2)) + "[1, 2, 3]\n")

    trace_case("trace_empty_solution", setter("solution", ""))
    trace_case("trace_empty_hardware", setter("evaluation", "environment", "hardware", ""))
    trace_case("trace_lib_version_not_string", setter("evaluation", "environment", "libs", "torch", 2.8))
    trace_case("trace_error_lowercase_nan", setter("evaluation", "correctness", "max_relative_error", "nan"))
    trace_case("trace_negative_error", setter("evaluation", "correctness", "max_absolute_error", -0.5))
    write(CASES, "trace_duplicate_key.jsonl",
          line(good_trace()).replace('"solution": "mini_op_python"',
                                     '"solution": "mini_op_python", "solution": "mini_op_triton"') + "\n")
    write(CASES, "trace_line_null.jsonl", line(good_trace()) + "\nnull\n")

    # Solutions (loose .json with "spec"/"sources").
    sol_case("sol_entry_not_in_sources", setter("spec", "entry_point", "kernel.py::run"))
    sol_case("sol_entry_point_no_symbol", setter("spec", "entry_point", "main.py"))
    sol_case("sol_dotdot_source_path",
             lambda s: s["sources"].append({"path": "util/../../helper.py", "content": "X = 1\n"}))
    sol_case("sol_absolute_source_path",
             lambda s: s["sources"].append({"path": "/tmp/helper.py", "content": "X = 1\n"}))
    sol_case("sol_duplicate_source_path",
             lambda s: s["sources"].append({"path": "main.py", "content": "def run(*a): pass\n"}))
    sol_case("sol_unknown_language", setter("spec", "language", "rust"))
    sol_case("sol_name_escapes_out", setter("name", "../../../tmp/kb_escape/sol"))
    sol_case("sol_author_absolute_path", setter("author", "/tmp/kb_escape"))
    sol_case("sol_definition_backslash", setter("definition", "..\\..\\def"))
    sol_case("sol_no_sources", setter("sources", []))
    sol_case("sol_missing_spec", deleter("spec"))
    sol_case("sol_source_content_not_string", setter("sources", [{"path": "main.py", "content": None}]))


def make_good():
    write(GOOD, "definition.json", dumps(base_def("definition")))
    # seed-001: tokens (batch_size) nested in sequences (num_seqs), constraints spelled assumptions.
    d = base_def("seed_nested_axes")
    d["id"] = d.pop("name")
    d["reference_code"] = d.pop("reference")
    d["assumptions"] = d.pop("constraints")
    del d["op_type"]
    d["axes"]["num_seqs"] = {"type": "var"}
    d["axes"]["batch_size"]["parent"] = "num_seqs"
    d["inputs"]["seq_lens"] = {"shape": ["num_seqs"], "dtype": "int32"}
    write(GOOD, "seed_nested_axes.json", dumps(d))
    d = base_def("long_description")
    d["description"] = "A long but legal description. " * 5000  # ~150 KB
    write(GOOD, "long_description.json", dumps(d))
    base = os.path.join(GOOD, "tiny_dataset")
    write(base, "definitions/mini/mini_op.json", dumps(OP_DEF))
    write(base, "workloads/mini/mini_op.jsonl",
          "".join(line(wl_line(good_workload(f"00000000-0000-0000-0000-00000000000{i}", m=i))) + "\n"
                  for i in range(1, 4)))
    write(base, "solutions/corpus/mini/mini_op/mini_op_python.json", dumps(good_solution()))
    traces = [good_trace()]
    t = good_trace()
    t["evaluation"] = good_evaluation("RUNTIME_ERROR")
    traces.append(t)
    write(base, "traces/corpus/mini/mini_op.jsonl", "".join(line(x) + "\n" for x in traces))
    base = os.path.join(GOOD, "tiny_dataset_blob")
    write(base, "definitions/mini/mini_op.json", dumps(OP_DEF))
    wl = good_workload()
    wl["inputs"]["indptr"] = {"type": "safetensors", "path": BLOB, "tensor_key": "indptr"}
    write(base, "workloads/mini/mini_op.jsonl", line(wl_line(wl)) + "\n")
    write(base, BLOB, safetensors_bytes([("indptr", "I32", [3], struct.pack("<3i", 0, 1, 2))]))
    paged_dataset(GOOD, "tiny_dataset_index_blobs", [0, 1, 1, 4], [3, 0, 2, 1], [4, 0, 1])
    write(GOOD, "solution.json", dumps(good_solution()))
    write(GOOD, "traces.jsonl", "".join(line(good_trace()) + "\n" for _ in range(2)))


def main():
    for d in (CASES, GOOD):
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
    make_cases()
    make_good()
    for root in (CASES, GOOD):
        for dirpath, _, files in os.walk(root):
            for f in files:
                size = os.path.getsize(os.path.join(dirpath, f))
                assert size < 200 * 1024, (f, size)
    print(f"{len(os.listdir(CASES))} cases, {len(os.listdir(GOOD))} good controls")


if __name__ == "__main__":
    main()
