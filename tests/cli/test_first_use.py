#!/usr/bin/env python3
"""What a user meets first with the kb command: `kb show [DATASET] NAME` on any dataset (near matches
for a typo, a seed-001 axis's parent shown), `kb bench --list` naming each solution's op types and
definitions, `kb format` printing or (-i) rewriting in place as its help says, `kb validate`'s
constraint counts agreeing with the errors above them, and kb bench's table: the axes column wrapped
when a workload has many axes (the other columns stay aligned), and no speedup for a batch of 0.

usage: test_first_use.py KB SHARED_DIR PROJECT_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

kb, shared, project = sys.argv[1:4]
dataset = os.path.join(shared, "flashinfer-trace")
bundled = os.path.join(project, "kernels")
failures = 0
TIMEOUT_S = 600 * float(os.environ.get("KB_TEST_TIMEOUT_SCALE", "1"))


def run(*args):
    p = subprocess.run([kb, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
    failures += 0 if cond else 1


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def load(path):
    with open(path) as f:
        return json.load(f)


# ---- kb show [DATASET] NAME ----
rc, out, err = run("show", dataset, "gqa_paged_decode_h16_kv2_d128_ps64")
check("show DATASET NAME", rc == 0 and out.startswith("gqa_paged_decode_h16_kv2_d128_ps64  (gqa_paged)") and
      "definitions/gqa_paged/gqa_paged_decode_h16_kv2_d128_ps64.json" in out, out + err)
rc, out, err = run("show", dataset, "mla_paged_decode_h16_ckv512_kpe64_ps1")
check("show DATASET NAME, another op type", rc == 0 and "ckv_cache" in out, out + err)
rc, out2, err = run("show", "--dataset", dataset, "gqa_paged_decode_h16_kv2_d128_ps64")
rc1, out1, _ = run("show", dataset, "gqa_paged_decode_h16_kv2_d128_ps64")
check("show --dataset DATASET NAME prints the same", rc == 0 and rc1 == 0 and out1 == out2, out2 + err)
rc, out, err = run("show", "rmsnorm_h4096")
check("show NAME finds the bundled definition", rc == 0 and "kernels/rmsnorm/definitions/rmsnorm_h4096.json" in out,
      out + err)
rc, out, err = run("show", dataset, "rmsnorm_h4069")
check("show DATASET typo: exit 1, near matches", rc == 1 and
      f'kb show: no definition "rmsnorm_h4069" in {dataset}' in err and "did you mean rmsnorm_h4096" in err, err)
rc, out, err = run("show", dataset, "gqa_paged_decode")
check("show DATASET prefix: the names it begins", rc == 1 and "did you mean gqa_paged_decode_h" in err, err)
rc, out, err = run("show", dataset)
check("show DATASET alone: usage error naming the fix", rc == 2 and "is a directory" in err, err)
rc, out, err = run("show", dataset, "a", "b")
check("show with three arguments: usage error", rc == 2 and "expected [DATASET] NAME|FILE" in err, err)
rc, out, err = run("show", os.path.join(dataset, "no_such_dir"), "rmsnorm_h4096")
check("show in a missing directory", rc == 1 and "no_such_dir: not a directory" in err, err)

with tempfile.TemporaryDirectory() as tmp:
    # A folder of definitions (not a dataset root), one named otherwise than its file, one seed-001 with
    # nested axes.
    base = load(os.path.join(bundled, "rmsnorm", "definitions", "rmsnorm_h4096.json"))
    write_json(os.path.join(tmp, "defs", "a", "misnamed.json"), dict(base, name="rmsnorm_h4096_copy"))
    seed = {
        "id": "seed_nested", "description": "tokens nested in sequences",
        "axes": {"num_seqs": {"type": "var"}, "num_tokens": {"type": "var", "parent": "num_seqs"},
                 "hidden": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["num_tokens", "hidden"], "dtype": "float32"},
                   "seq_lens": {"shape": ["num_seqs"], "dtype": "int32"}},
        "outputs": {"y": {"shape": ["num_tokens", "hidden"], "dtype": "float32"}},
        "assumptions": ["hidden % 4 == 0"],
        "reference_code": "def run(x, seq_lens):\n    return x\n",
    }
    write_json(os.path.join(tmp, "defs", "seed_nested.json"), seed)
    rc, out, err = run("show", os.path.join(tmp, "defs"), "rmsnorm_h4096_copy")
    check("show finds a definition whose file is named otherwise", rc == 0 and "misnamed.json" in out, out + err)
    rc, out, err = run("show", os.path.join(tmp, "defs"), "seed_nested")
    check("show prints a seed-001 axis's parent",
          rc == 0 and re.search(r"num_tokens\s+var \(parent num_seqs\)", out) is not None and
          re.search(r"num_seqs\s+var\s*\n", out) is not None, out + err)

    # ---- kb format prints; -i rewrites in place ----
    rc, out, err = run("format", "--help")
    check("format --help says it prints and what -i does", rc == 0 and "prints it on stdout" in out and
          "-i, --in-place" in out and "rewritten in place" in out, out)
    rc, out, err = run("--help")
    check("kb --help says format prints (-i rewrites)", "format [-i] FILE..." in out and "-i: rewrite each FILE" in out,
          out)
    seed_file = os.path.join(tmp, "defs", "seed_nested.json")
    before = open(seed_file).read()
    # seed-001 had no op_type; the current dialect needs one, so this one cannot be written in it.
    rc, out, err = run("format", "-i", seed_file)
    check("format -i refuses a seed-001 definition the current dialect would not read back",
          rc == 1 and "seed_nested.json (in the current dialect): definition.op_type: must not be empty" in err and
          open(seed_file).read() == before, out + err)
    seed["op_type"] = "copy"
    write_json(seed_file, seed)
    before = open(seed_file).read()
    rc, out, err = run("format", seed_file)
    printed = out
    check("format FILE prints the current dialect and leaves FILE alone",
          rc == 0 and '"name": "seed_nested"' in out and '"constraints"' in out and open(seed_file).read() == before,
          out + err)
    os.chmod(seed_file, 0o640)
    rc, out, err = run("format", "-i", seed_file)
    after = open(seed_file).read()
    check("format -i rewrites FILE in place, printing nothing", rc == 0 and out == "" and after == printed, out + err)
    check("format -i keeps the file's permissions", (os.stat(seed_file).st_mode & 0o777) == 0o640,
          oct(os.stat(seed_file).st_mode))
    rc, out, err = run("format", "-i", seed_file)
    check("format -i on formatted text changes nothing", rc == 0 and open(seed_file).read() == after, err)
    link = os.path.join(tmp, "link.json")
    os.symlink(seed_file, link)
    rc, out, err = run("format", "--in-place", link)
    check("format -i through a link keeps the link", rc == 0 and os.path.islink(link), err)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"name": "x"}\n')
    rc, out, err = run("format", "-i", bad)
    check("format -i on an invalid file: exit 1, file untouched", rc == 1 and open(bad).read() == '{"name": "x"}\n' and
          "bad.json" in err, err)
    check("format -i leaves no temporary file", not [f for f in os.listdir(tmp) if "kb-format" in f], os.listdir(tmp))
    rc, out, err = run("format", "--bogus", bad)
    check("format: an unknown option is a usage error", rc == 2 and "unknown option --bogus" in err, err)

    # ---- kb validate: the constraint counts agree with the errors above them ----
    viol = dict(base, name="rmsnorm_violated", constraints=["hidden_size % 3 == 0"])
    write_json(os.path.join(tmp, "viol", "definitions", "rmsnorm", "rmsnorm_violated.json"), viol)
    rc, out, err = run("validate", os.path.join(tmp, "viol"))
    check("a violated const constraint is an error", rc == 1 and "constraint `hidden_size % 3 == 0` violated" in err,
          err)
    check("... and counted as violated in the summary", "0 held, 1 violated" in out, out)
    held = dict(base, name="rmsnorm_held", constraints=["hidden_size % 4 == 0"])
    write_json(os.path.join(tmp, "viol", "definitions", "rmsnorm", "rmsnorm_held.json"), held)
    rc, out, err = run("validate", os.path.join(tmp, "viol"))
    check("held and violated counted side by side", "1 held, 1 violated" in out and err.count(" violated:") == 1,
          out + err)

# ---- kb bench --list ----
rc, out, err = run("bench", "--list", "--device", "cpu")
check("bench --list exits 0", rc == 0, err)
for name, op in (("kb_cpu_rmsnorm", "rmsnorm"), ("kb_cpu_gemm", "gemm"), ("kb_cpu_moe", "moe")):
    block = re.search(rf"^{name} \(cpu, by kb\): .*?(?=^\S|\Z)", out, re.M | re.S)
    check(f"bench --list names {name} with its op type and definitions",
          block is not None and re.search(rf"^  {op}: \d+ definitions?: ", block.group(0), re.M) is not None,
          out[:3000])
check("bench --list names the dataset it looked in",
      re.search(rf"of the \d+ definitions in {re.escape(bundled)} \(kb's bundled dataset\)", out) is not None, out[:500])
# The bundled dataset has no paged attention definitions.
check("bench --list says what a solution handles nothing of",
      re.search(r"^kb_cpu_gqa_paged \(cpu, by kb\): .*\n  handles nothing in these datasets$", out, re.M) is not None,
      out[:3000])
rc, out, err = run("bench", "--list", "--device", "cpu", dataset)
block = re.search(r"^kb_cpu_rmsnorm \(cpu, by kb\): .*?(?=^\S|\Z)", out, re.M | re.S)
check("bench --list DATASET: rmsnorm's definitions of the shipped dataset",
      block is not None and re.search(r"^  rmsnorm: \d+ definitions: .*rmsnorm_h4096", block.group(0), re.M), out[:3000])
block = re.search(r"^kb_cpu_gqa_paged \(cpu, by kb\): .*?(?=^\S|\Z)", out, re.M | re.S)
check("bench --list DATASET: paged attention, decode and prefill",
      block is not None and re.search(r"^  gqa_paged: \d+ definitions: .*gqa_paged_decode_h32_kv8_d128_ps1.*"
                                      r"gqa_paged_prefill_causal", block.group(0), re.M), out[:3000])

# ---- kb bench's table ----
def table(out):
    """(header, [row lines and continuation lines]) of kb bench's table."""
    lines = out.splitlines()
    head = next((i for i, l in enumerate(lines) if l.startswith("definition ") and " speedup " in l), None)
    if head is None:
        return None, []
    body = []
    for l in lines[head + 1:]:
        if re.match(r"^\d+ evaluations on ", l) or l.startswith(("skipped:", "not run")):
            break
        body.append(l)
    return lines[head], body


with tempfile.TemporaryDirectory() as tmp:
    # rmsnorm with a batch of 0 beside a batch of 2.
    root = os.path.join(tmp, "ds")
    write_json(os.path.join(root, "definitions", "rmsnorm", "rmsnorm_h4096.json"),
               load(os.path.join(bundled, "rmsnorm", "definitions", "rmsnorm_h4096.json")))
    os.makedirs(os.path.join(root, "workloads", "rmsnorm"))
    with open(os.path.join(root, "workloads", "rmsnorm", "rmsnorm_h4096.jsonl"), "w") as f:
        for uuid, b in (("zero-rows", 0), ("two-rows", 2)):
            f.write(json.dumps({"definition": "rmsnorm_h4096", "solution": None, "evaluation": None, "workload": {
                "uuid": uuid, "axes": {"batch_size": b},
                "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}}}}) + "\n")
    rc, out, err = run("bench", root, "--device", "cpu", "--trials", "1", "--out", os.path.join(tmp, "out"))
    head, body = table(out)
    check("bench on batches 0 and 2 runs", rc == 0 and head is not None, out + err)
    if head:
        end = head.index(" speedup ") + len(" speedup")
        cells = {l.split()[1]: l[end - 8:end].strip() for l in body if "kb_cpu_rmsnorm" in l}
        check("a batch of 0 prints no speedup", cells.get("batch_size=0") == "-", cells)
        check("a batch of 2 prints its speedup", re.fullmatch(r"[\d.]+x", cells.get("batch_size=2", "")) is not None,
              cells)

    # A definition with many var axes: the axes wrap inside their column, the solution column stays put.
    # gqa_paged decode binds batch_size, num_pages, len_indptr and num_kv_indices (and their sizes grow).
    name = "gqa_paged_decode_h32_kv8_d128_ps1"
    d = load(os.path.join(dataset, "definitions", "gqa_paged", name + ".json"))
    root = os.path.join(tmp, "many")
    write_json(os.path.join(root, "definitions", "gqa_paged", name + ".json"), d)
    var_axes = [a for a, v in d["axes"].items() if v["type"] == "var"]
    batch, pages = 3, 1200
    values = {"batch_size": batch, "num_pages": pages, "len_indptr": batch + 1, "num_kv_indices": 1100}
    check("the many-axes definition has the axes this test binds", set(var_axes) == set(values), var_axes)
    inputs = {t: {"type": "random"} for t in d["inputs"]}
    for t, spec in d["inputs"].items():
        if spec["shape"] is None:
            inputs[t] = {"type": "scalar", "value": 0.08838834764831845}
    os.makedirs(os.path.join(root, "workloads", "gqa_paged"))
    with open(os.path.join(root, "workloads", "gqa_paged", name + ".jsonl"), "w") as f:
        f.write(json.dumps({"definition": name, "solution": None, "evaluation": None, "workload": {
            "uuid": "many-axes", "axes": values, "inputs": inputs}}) + "\n")
    rc, out, err = run("bench", root, "--device", "cpu", "--trials", "1", "--no-time", "--out", os.path.join(tmp, "out2"))
    head, body = table(out)
    check("bench on a workload with many axes runs", rc == 0 and head is not None, out + err)
    if head:
        col = head.index("solution")
        rows = [i for i, l in enumerate(body) if "kb_cpu_gqa_paged" in l]
        check("the row's solution column is where the header puts it",
              rows and body[rows[0]][col:].startswith("kb_cpu_gqa_paged"), "\n".join([head] + body))
        axes_col = head.index("axes")
        if rows:
            cont, words = [], body[rows[0]][axes_col:col].split()
            for l in body[rows[0] + 1:]:
                if not (l.startswith(" " * axes_col) and l.split() and all("=" in w for w in l.split())):
                    break
                cont.append(l)
                words += l.split()
            check("the axes wrap onto lines of their own column", cont and all(
                len(l.rstrip()) <= col - 1 for l in cont), "\n".join([head] + body))
            check("every axis is printed once",
                  sorted(words) == sorted(f"{k}={v}" for k, v in values.items()), words)

print(f"{failures} failure{'s' if failures != 1 else ''}")
sys.exit(1 if failures else 0)
