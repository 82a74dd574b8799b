#include "harness/torch_reference.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <variant>

#include "common/python_script.hpp"
#include "common/tuning.hpp"
#include "json/json.hpp"
#include "safetensors/safetensors.hpp"


namespace kb {

namespace {

// The runner: python3 RUNNER WORKDIR [--probe]. Exit status 0 on success;
// otherwise WORKDIR/error.txt holds one message and stderr the traceback.
constexpr std::string_view kRunner = R"PY(# kb's runner for a definition's PyTorch reference (embedded in kb).
import json, linecache, os, sys, time, traceback

WORK = sys.argv[1]


def fail(code, message):
    with open(os.path.join(WORK, "error.txt"), "w", encoding="utf-8") as f:
        f.write(message)
    sys.exit(code)


try:
    import torch
except Exception as e:  # ImportError, or a broken installation
    fail(4, "python3 cannot import torch (%s: %s)" % (type(e).__name__, e))

if len(sys.argv) > 2 and sys.argv[2] == "--probe":
    with open(os.path.join(WORK, "result.txt"), "w", encoding="utf-8") as f:
        f.write("torch %s\n" % torch.__version__)
    sys.exit(0)

# safetensors codes -> kb dtype names (torch uses the same names, where it has them)
CODES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
         "F8_E5M2": "float8_e5m2", "F4": "float4_e2m1", "I64": "int64", "I32": "int32", "I16": "int16",
         "I8": "int8", "BOOL": "bool"}
KB_TO_CODE = {v: k for k, v in CODES.items()}


def torch_dtype(kb_name, what):
    if kb_name == "float4_e2m1":
        fail(5, "%s: dtype float4_e2m1 (two values a byte) has no unpacked torch dtype; "
                "the torch reference runner cannot pass it" % what)
    dt = getattr(torch, kb_name, None)
    if not isinstance(dt, torch.dtype):
        fail(5, "%s: dtype %s is not available in the installed torch %s (it needs a newer PyTorch)"
             % (what, kb_name, torch.__version__))
    return dt


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = bytearray(blob[8 + n:])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = info["dtype"]
        if code not in CODES:
            fail(5, "input %s: unknown safetensors dtype %s" % (name, code))
        dt = torch_dtype(CODES[code], "input " + name)
        begin, end = info["data_offsets"]
        shape = info["shape"]
        if end == begin:
            t = torch.empty(shape, dtype=dt)
        else:
            size = torch.empty((), dtype=dt).element_size()
            t = torch.frombuffer(data, dtype=dt, count=(end - begin) // size, offset=begin).reshape(shape)
        out[name] = t
    return out


def tensor_bytes(t):
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return flat.numpy().tobytes()


def write_safetensors(path, items):
    header, chunks, offset = {}, [], 0
    for name, t, code in items:
        raw = tensor_bytes(t)
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text.encode("utf-8"))
        for c in chunks:
            f.write(c)


def last_frame():
    tb = traceback.extract_tb(sys.exc_info()[2])
    for frame in reversed(tb):
        if frame.filename.startswith("<reference"):
            return " (reference line %d: %s)" % (frame.lineno, (frame.line or "").strip())
    return ""


def failure_hint(e):
    # What torch 1.13 (Debian's) typically lacks: CPU kernels for half
    # precision (e.g. fp16 matmul) and functions or dtypes added later. And
    # what references written for one definition's constants do when another
    # definition (other head counts, sizes) borrows them: assert those
    # constants, or reshape by them.
    text = str(e)
    if isinstance(e, RuntimeError) and "not implemented for" in text:
        return ("; torch %s has no CPU kernel for this operation and dtype (newer PyTorch versions, or a CUDA "
                "device, do)" % torch.__version__)
    if isinstance(e, AttributeError) and "torch" in text:
        return "; torch %s lacks this attribute: the reference needs a newer PyTorch" % torch.__version__
    if isinstance(e, AssertionError):
        return ("; the reference asserts something of its inputs: references often assert the constants of the "
                "definition they were written for")
    if isinstance(e, RuntimeError) and ("must match the size" in text or "is invalid for input of size" in text):
        return ("; a shape did not fit: references often build shapes from the constants of the definition they "
                "were written for")
    if isinstance(e, (AttributeError, TypeError, NotImplementedError, RuntimeError)) and \
            int(torch.__version__.split(".")[0]) < 2:
        return "; torch %s is installed: a reference written for a newer PyTorch may fail on it" % torch.__version__
    return ""


with open(os.path.join(WORK, "call.json"), encoding="utf-8") as f:
    call = json.load(f)
name = call["definition"]
tensors = read_safetensors(os.path.join(WORK, "inputs.safetensors"))
# "cuda:N": run() on CUDA tensors of device N where this torch has CUDA, else on the CPU with a note
device, notes = call.get("device", "cpu"), []
if device.startswith("cuda"):
    if not torch.cuda.is_available():
        notes.append("torch %s has no usable CUDA device: the reference ran on the CPU" % torch.__version__)
        device = "cpu"
    else:
        torch.cuda.set_device(torch.device(device))
args = []
for spec in call["inputs"]:
    if spec["kind"] == "tensor":
        args.append(tensors[spec["name"]].to(device))
    elif spec["type"] == "int":
        args.append(int(spec["value"]))
    elif spec["type"] == "bool":
        args.append(spec["value"] == "true")
    else:
        args.append(float(spec["value"]))

with open(os.path.join(WORK, "reference.py"), encoding="utf-8") as f:
    source = f.read()
namespace = {"__name__": "kb_reference"}
filename = "<reference of %s>" % name
linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # lines in tracebacks
try:
    exec(compile(source, filename, "exec"), namespace)
except BaseException as e:
    traceback.print_exc()
    fail(3, "the reference failed to load: %s: %s%s%s" % (type(e).__name__, e, last_frame(), failure_hint(e)))
run = namespace.get("run")
if not callable(run):
    fail(3, "the reference defines no function run")

# "timed_runs" > 1: one warm-up call, then that many timed calls (ms is their median)
runs = max(1, int(call.get("timed_runs", 1)))
try:
    with torch.no_grad():
        if runs > 1:
            run(*args)
        times = []
        for _ in range(runs):
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            result = run(*args)
            if device != "cpu":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        ms = sorted(times)[len(times) // 2]
except BaseException as e:
    traceback.print_exc()
    fail(3, "the reference raised %s: %s%s%s" % (type(e).__name__, e, last_frame(), failure_hint(e)))

outputs = call["outputs"]
if isinstance(result, dict):
    missing = [o["name"] for o in outputs if o["name"] not in result]
    if missing:
        fail(6, "the reference returned a dict without output(s) %s" % ", ".join(missing))
    result = [result[o["name"]] for o in outputs]
elif isinstance(result, (tuple, list)):
    result = list(result)
else:
    result = [result]
if len(result) != len(outputs):
    fail(6, "the reference returned %d value(s); the definition has %d output(s) (%s)"
         % (len(result), len(outputs), ", ".join(o["name"] for o in outputs)))
items = []
for value, spec in zip(result, outputs):
    dt = torch_dtype(spec["dtype"], "output " + spec["name"])
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.tensor(value)
        except Exception as e:
            fail(6, "output %s: the reference returned %s, not a tensor" % (spec["name"], type(value).__name__))
    value = value.detach().to("cpu")
    if list(value.shape) != spec["shape"]:
        fail(6, "output %s: the reference returned shape %s; the definition says %s"
             % (spec["name"], list(value.shape), spec["shape"]))
    if value.dtype != dt:
        notes.append("output %s: the reference returned %s, cast to %s"
                     % (spec["name"], str(value.dtype).replace("torch.", ""), spec["dtype"]))
        value = value.to(dt)
    items.append((spec["name"], value, KB_TO_CODE[spec["dtype"]]))
write_safetensors(os.path.join(WORK, "outputs.safetensors"), items)
with open(os.path.join(WORK, "result.txt"), "w", encoding="utf-8") as f:
    f.write("torch %s\nms %r\ndevice %s\n" % (torch.__version__, ms, device))
    for n in notes:
        f.write("note %s\n" % n.replace("\n", " "))
)PY";

using python::last_lines;
using python::read_text;
using python::TempDir;
using python::write_text;
using ProcessResult = python::ScriptRun;

Result<std::filesystem::path> make_temp_dir() { return python::make_temp_dir("kb-torch"); }

// Runs `python runner dir [extra]` with stdout and stderr to files in dir.
Result<ProcessResult> run_python(const TorchReferenceOptions& opt, const std::filesystem::path& dir,
                                 const std::vector<std::string>& extra) {
  return python::run_script(opt.python, opt.timeout_s, dir, "kb_torch_runner.py", kRunner, extra);
}

Error process_error(const std::string& origin, const TorchReferenceOptions& opt, const ProcessResult& pr) {
  if (pr.timed_out)
    return Error{Code::internal,
                 fmt::format("{}: the PyTorch reference did not finish within {} s and was killed{}", origin,
                             opt.timeout_s, last_lines(pr.stderr_text, 4))};
  std::string msg = pr.error.empty() ? fmt::format("{} exited with status {}", opt.python, pr.exit_code) : pr.error;
  Code code = pr.exit_code == 4 ? Code::unsupported : pr.exit_code == 5 ? Code::unsupported : Code::invalid_data;
  std::string tail = last_lines(pr.stderr_text, 6);
  return Error{code, fmt::format("{}: {}{}", origin, msg,
                                 tail.empty() ? "" : "\n  last lines of the Python output:" + tail)};
}

std::string scalar_text(const ScalarValue& v, const char*& type) {
  if (auto* i = std::get_if<std::int64_t>(&v)) {
    type = "int";
    return fmt::format("{}", *i);
  }
  if (auto* b = std::get_if<bool>(&v)) {
    type = "bool";
    return *b ? "true" : "false";
  }
  type = "float";
  return fmt::format("{}", std::get<double>(v));  // shortest round trip; "inf"/"nan" read by float()
}

}  // namespace

std::string default_python() { return tuning::current().python; }

const char* reference_source_name(ReferenceSource s) noexcept { return s == ReferenceSource::torch ? "torch" : "native"; }

std::string_view torch_runner_script() noexcept { return kRunner; }

Result<std::string> torch_version(const TorchReferenceOptions& opt) {
  static std::mutex mu;
  static std::map<std::string, Result<std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(opt.python); it != cache.end()) return it->second;
  auto probe = [&]() -> Result<std::string> {
    auto dir = make_temp_dir();
    if (!dir) return dir.error();
    TempDir guard{*dir};
    auto pr = run_python(opt, *dir, {"--probe"});
    if (!pr) return pr.error();
    if (pr->timed_out || pr->exit_code != 0) return process_error("torch reference", opt, *pr);
    std::string text = read_text(*dir / "result.txt");
    if (text.rfind("torch ", 0) != 0)
      return make_error(Code::internal, "torch reference: the runner reported no torch version");
    return text.substr(6, text.find('\n') - 6);
  };
  auto r = probe();
  cache.emplace(opt.python, r);
  return r;
}

Result<TorchRun> run_torch_reference(const Definition& d, std::span<const Arg> inputs, std::span<Tensor> outputs,
                                     const TorchReferenceOptions& opt) {
  std::string origin = fmt::format("{}: torch reference", d.name);
  if (inputs.size() != d.inputs.size() || outputs.size() != d.outputs.size())
    return make_error(Code::invalid_argument, origin + ": wrong number of inputs or outputs");
  auto dir = make_temp_dir();
  if (!dir) return dir.error();
  TempDir guard{*dir};

  // Inputs: tensors to safetensors, scalars into call.json.
  std::vector<safetensors::TensorView> views;
  json::Writer w;
  w.begin_object().key("definition").string(d.name).key("device").string(opt.device);
  w.key("timed_runs").integer(opt.timed_runs).key("inputs").begin_array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    w.begin_object().key("name").string(d.inputs[i].name);
    if (inputs[i].tensor) {
      const Tensor& t = *inputs[i].tensor;
      views.push_back({d.inputs[i].name, t.dtype(), t.shape(), t.span()});
      w.key("kind").string("tensor");
    } else if (inputs[i].scalar) {
      const char* type = "float";
      std::string text = scalar_text(*inputs[i].scalar, type);
      w.key("kind").string("scalar").key("type").string(type).key("value").string(text);
    } else {
      return make_error(Code::invalid_argument, fmt::format("{}: input {} has no value", origin, d.inputs[i].name));
    }
    w.end_object();
  }
  w.end_array().key("outputs").begin_array();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    w.begin_object().key("name").string(d.outputs[i].name).key("dtype").string(dtype_name(outputs[i].dtype()));
    w.key("shape").begin_array();
    for (auto s : outputs[i].shape()) w.integer(s);
    w.end_array().end_object();
  }
  w.end_array().end_object();
  KB_TRY(write_text(*dir / "call.json", w.str()));
  KB_TRY(write_text(*dir / "reference.py", d.reference));
  KB_TRY(safetensors::write_file((*dir / "inputs.safetensors").string(), views));

  auto pr = run_python(opt, *dir, {});
  if (!pr) return Error{pr.error().code, origin + ": " + pr.error().message};
  if (pr->timed_out || pr->exit_code != 0) return process_error(origin, opt, *pr);

  auto file = safetensors::read_file((*dir / "outputs.safetensors").string());
  if (!file) return Error{file.error().code, origin + ": reading the outputs back: " + file.error().message};
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto* info = file->header.find(d.outputs[i].name);
    if (!info) return make_error(Code::invalid_data, fmt::format("{}: output {} missing from the runner's file", origin, d.outputs[i].name));
    if (info->dtype != outputs[i].dtype() || info->shape != outputs[i].shape() ||
        info->byte_size() != outputs[i].nbytes())
      return make_error(Code::invalid_data,
                        fmt::format("{}: output {}: the runner wrote {} [{}], expected {} [{}]", origin,
                                    d.outputs[i].name, dtype_name(info->dtype), fmt::join(info->shape, ", "),
                                    dtype_name(outputs[i].dtype()), fmt::join(outputs[i].shape(), ", ")));
    auto bytes = file->bytes(*info);
    if (!bytes.empty()) std::memcpy(outputs[i].bytes(), bytes.data(), bytes.size());
  }
  TorchRun run;
  std::istringstream in(read_text(*dir / "result.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("torch ", 0) == 0) run.torch_version = line.substr(6);
    else if (line.rfind("ms ", 0) == 0) run.reference_ms = std::strtod(line.c_str() + 3, nullptr);
    else if (line.rfind("device ", 0) == 0) run.device = line.substr(7);
    else if (line.rfind("note ", 0) == 0) run.notes.push_back(line.substr(5));
  }
  return run;
}

}  // namespace kb
