// PyTorch eager as the reference for BackendBench lines (see torch_reference.hpp).
#include "backendbench/torch_reference.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/python_script.hpp"
#include "common/tuning.hpp"
#include "json/json.hpp"


namespace kb::backendbench {

namespace {

// The runner. Exit codes: 0 the batch ran (each line's own error is in
// LINE.error.txt), 3 torch cannot be imported, 2 a bad batch directory.
constexpr std::string_view kRunner = R"PY(
import json, os, sys, traceback

def fail(code, msg):
    with open(os.path.join(sys.argv[1], "error.txt"), "w") as f:
        f.write(msg)
    sys.exit(code)

try:
    import torch
except Exception as e:
    fail(3, "cannot import torch: %s: %s" % (type(e).__name__, e))

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
      "c64": torch.complex64, "c128": torch.complex128, "i8": torch.int8, "i16": torch.int16,
      "i32": torch.int32, "i64": torch.int64, "b8": torch.bool, "u8": torch.uint8}
if hasattr(torch, "complex32"):
    DT["c32"] = torch.complex32
NAME = {v: k for k, v in DT.items()}
SPELL = {"float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32", "float64": "f64",
         "double": "f64", "complex32": "c32", "chalf": "c32", "complex64": "c64", "cfloat": "c64",
         "complex128": "c128", "cdouble": "c128", "int8": "i8", "int16": "i16", "int32": "i32", "int": "i32",
         "int64": "i64", "long": "i64", "bool": "b8", "uint8": "u8"}
FLOATING = (torch.float16, torch.bfloat16, torch.float32)
COMPLEX = (torch.complex32, torch.complex64) if hasattr(torch, "complex32") else (torch.complex64,)


def raised(dt):
    # The dtype a line runs in when raised: f64 for real floats, c128 for complex.
    return torch.float64 if dt in FLOATING else torch.complex128 if dt in COMPLEX else dt


class TorchNames:
    # torch.float16 / torch.strided / torch.channels_last / torch.device(...) as written in traces.
    def __getattr__(self, name):
        if name in SPELL:
            return DT[SPELL[name]]
        if name == "device":
            return lambda *a, **k: torch.device("cpu")
        return getattr(torch, name)


def call(op, args, kwargs):
    parts = op.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise ValueError("not an aten overload name: %s" % op)
    aten = torch.ops.aten
    # Overloads this torch may lack, run through the ones that define them:
    # im2col_backward is col2im and col2im_backward is im2col with the same
    # arguments; upsample_*_backward.vec is .default with the output size and
    # per-dim scales the .vec form derives from its arguments.
    if not hasattr(aten, parts[1]) and parts[1] in ("im2col_backward", "col2im_backward"):
        return (aten.col2im if parts[1] == "im2col_backward" else aten.im2col).default(*args, **kwargs)
    if parts[1] in ("_cudnn_rnn", "_cudnn_rnn_backward") and not (args[0].is_cuda and torch.backends.cudnn.is_available()):
        return cudnn_lstm(parts[1] == "_cudnn_rnn_backward", args, kwargs)
    fn = getattr(aten, parts[1])
    if parts[2] == "vec" and parts[1].endswith("_backward") and not hasattr(fn, "vec"):
        g, size, input_size, *rest = args
        scales = rest[-1] or [None] * (len(input_size) - 2)
        return fn.default(g, size or list(g.shape[2:]), input_size, *rest[:-1], *scales, **kwargs)
    return getattr(fn, parts[2])(*args, **kwargs)


def cudnn_lstm(backward, args, kwargs):
    # _cudnn_rnn(_backward) for LSTMs through PyTorch's own LSTM (aten.lstm, autograd for the
    # backward), on any device: the outputs kb's oracle defines (kernels/aten/rnn/lstm.cpp), with
    # cuDNN's reserve and weight_buf None. The backward reruns the forward from input, hx, cx and
    # the weight list and reads neither reserve, weight_buf nor output.
    names = ["input", "weight", "weight_stride0", "weight_buf", "hx", "cx"]
    if backward:
        names += ["output", "grad_output", "grad_hy", "grad_cy"]
    names += ["mode", "hidden_size", "proj_size", "num_layers", "batch_first", "dropout", "train",
              "bidirectional", "batch_sizes", "dropout_state"]
    if backward:
        names += ["reserve", "output_mask"]
    a = dict(zip(names, args))
    a.update(kwargs)
    if a["mode"] != 2 or a["proj_size"] != 0 or a["batch_sizes"]:
        raise ValueError("only LSTMs without projections on padded sequences are emulated")
    weights = list(a["weight"])
    if a["weight_stride0"] != 4 and a["weight_stride0"] != 2:
        raise ValueError("weight_stride0 must be 2 or 4")
    with torch.enable_grad():
        x = a["input"].detach().requires_grad_(backward)
        hx = a["hx"].detach().requires_grad_(backward)
        cx = a["cx"].detach().requires_grad_(backward)
        ws = [w.detach().requires_grad_(backward) for w in weights]
        y, hy, cy = torch.ops.aten.lstm.input(x, [hx, cx], ws, a["weight_stride0"] == 4, a["num_layers"],
                                              0.0, False, a["bidirectional"], a["batch_first"])
        if not backward:
            return [y, hy, cy, None, None]
        outs, grads = [], []
        for o, g in ((y, a["grad_output"]), (hy, a["grad_hy"]), (cy, a["grad_cy"])):
            if g is not None:
                outs.append(o)
                grads.append(g)
        got = torch.autograd.grad(outs, [x, hx, cx] + ws, grads, allow_unused=True)
    mask = a["output_mask"]
    res = [got[k] if mask[k] else None for k in range(3)]
    res.append([g if g is not None else torch.zeros_like(w) for g, w in zip(got[3:], ws)] if mask[3] else [])
    return res


def build_args(desc, data, to_f64, meta):
    made = []
    for t in desc["tensors"]:
        dt = DT.get(t["dtype"])
        if dt is None:
            raise TypeError("this torch has no dtype %s" % t["dtype"])
        raw = data[t["begin"]:t["begin"] + t["nbytes"]]
        base = torch.frombuffer(bytearray(raw), dtype=dt) if t["nbytes"] else torch.empty(0, dtype=dt)
        x = torch.as_strided(base, t["shape"], t["strides"], t["offset"])
        if to_f64 and (dt in FLOATING or dt in COMPLEX):
            x = x.to(raised(dt))
        if meta:
            x = x.to("meta")
        made.append(x)
    it = iter(made)

    def T(shape, dtype=None, stride=None):
        return next(it)

    env = {"T": T, "torch": TorchNames(), "inf": float("inf"), "nan": float("nan"),
           "True": True, "False": False, "None": None, "__builtins__": {}}
    for k, v in DT.items():
        env[k] = raised(v) if to_f64 else v
    args, kwargs = eval(desc["args"], env)
    if "device" in kwargs:
        kwargs["device"] = "meta" if meta else "cpu"
    if "pin_memory" in kwargs:
        kwargs["pin_memory"] = False
    return list(args), kwargs


def flatten(out):
    # A sparse COO tensor is written as its parts (_indices(), _values()), what
    # torch.testing.assert_close compares for two of them.
    if isinstance(out, torch.Tensor) and out.layout == torch.sparse_coo:
        return [out._indices(), out._values()]
    if out is None or isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        r = []
        for o in out:
            r.extend(flatten(o))
        return r
    raise TypeError("the overload returned %s, not tensors" % type(out).__name__)


def run_line(d, stem):
    with open(os.path.join(d, stem + ".in.json")) as f:
        desc = json.load(f)
    with open(os.path.join(d, stem + ".in.bin"), "rb") as f:
        data = f.read()
    op = desc["op"]
    with torch.no_grad():
        dtypes = None
        try:
            a, k = build_args(desc, data, False, True)
            dtypes = [None if o is None else o.dtype for o in flatten(call(op, a, k))]
        except Exception:
            pass
        outs, fp64 = None, False
        wants_f64 = any(DT.get(t["dtype"]) in FLOATING + COMPLEX for t in desc["tensors"])
        if dtypes is not None and wants_f64:
            try:
                a, k = build_args(desc, data, True, False)
                got = flatten(call(op, a, k))
                if len(got) == len(dtypes):
                    outs = [None if o is None else (o.to(dt) if dt is not None else o) for o, dt in zip(got, dtypes)]
                    fp64 = True
            except Exception:
                outs = None
        if outs is None:
            a, k = build_args(desc, data, False, False)
            outs = flatten(call(op, a, k))
    meta_out = []
    with open(os.path.join(d, stem + ".out.bin"), "wb") as f:
        pos = 0
        for o in outs:
            if o is None:
                meta_out.append(None)
                continue
            if o.dtype not in NAME:
                raise TypeError("output dtype %s has no kb spelling" % o.dtype)
            c = o.detach().contiguous().reshape(-1)
            b = c.view(torch.uint8).numpy().tobytes() if c.numel() else b""
            f.write(b)
            meta_out.append({"dtype": NAME[o.dtype], "shape": list(o.shape), "begin": pos, "nbytes": len(b)})
            pos += len(b)
    with open(os.path.join(d, stem + ".out.json"), "w") as f:
        json.dump({"outputs": meta_out, "fp64": fp64}, f)


def main():
    d = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--probe":
        with open(os.path.join(d, "version.txt"), "w") as f:
            f.write(torch.__version__)
        return
    torch.manual_seed(0)
    stems = sorted(n[:-len(".in.json")] for n in os.listdir(d) if n.endswith(".in.json"))
    for stem in stems:
        try:
            run_line(d, stem)
        except Exception as e:
            with open(os.path.join(d, stem + ".error.txt"), "w") as f:
                f.write("%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else ""))


main()
)PY";

using python::last_lines;
using python::read_text;
using python::TempDir;

Result<std::filesystem::path> make_temp_dir() { return python::make_temp_dir("kb-bb-torch"); }

Status write_bytes(const std::filesystem::path& p, const void* data, std::size_t n) {
  return python::write_text(p, std::string_view(static_cast<const char*>(data), n));
}

std::string python_of(const TorchOptions& opt) { return opt.python.empty() ? tuning::current().python : opt.python; }

// Runs the runner on `dir` (with `extra` arguments); an Error when it could not start, timed out or failed as a whole.
Status run_runner(const TorchOptions& opt, const std::filesystem::path& dir, const std::vector<std::string>& extra) {
  const std::string python = python_of(opt);
  auto run = python::run_script(python, opt.timeout_s, dir, "kb_backendbench_torch.py", kRunner, extra);
  if (!run) return run.error();
  const std::string tail = last_lines(run->stderr_text, 4);
  const bool timed_out = run->timed_out;
  const int code = run->exit_code;
  if (timed_out)
    return make_error(Code::internal, fmt::format("torch reference: {} did not finish within {} s and was killed{}",
                                                  python, opt.timeout_s, tail));
  if (code != 0) {
    std::string msg = run->error;
    if (msg.empty()) msg = fmt::format("{} exited with status {}", python, code);
    return make_error(code == 3 ? Code::unsupported : Code::internal,
                      fmt::format("torch reference: {}{}", msg, tail.empty() ? "" : "\n  last lines of its output:" + tail));
  }
  return ok_status();
}

}  // namespace

Result<std::string> torch_version(const TorchOptions& opt) {
  static std::mutex mu;
  static std::map<std::string, Result<std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  const std::string python = python_of(opt);
  if (auto it = cache.find(python); it != cache.end()) return it->second;
  auto probe = [&]() -> Result<std::string> {
    auto dir = make_temp_dir();
    if (!dir) return dir.error();
    TempDir guard{*dir};
    TorchOptions o = opt;
    o.timeout_s = 120;
    KB_TRY(run_runner(o, *dir, {"--probe"}));
    std::string v = read_text(*dir / "version.txt");
    if (v.empty()) return make_error(Code::internal, "torch reference: the runner reported no torch version");
    return v;
  };
  auto r = probe();
  cache.emplace(python, r);
  return r;
}

Result<std::vector<TorchLineResult>> run_torch_lines(const std::vector<TorchLine>& lines, const TorchOptions& opt) {
  auto dir = make_temp_dir();
  if (!dir) return dir.error();
  TempDir guard{*dir};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const TorchLine& l = lines[i];
    const std::string stem = fmt::format("{:08}", i);
    json::Writer w;
    w.begin_object().key("op").string(l.op).key("args").string(l.args_text).key("tensors").begin_array();
    std::vector<std::byte> data;
    for (const HostTensor* t : l.inputs) {
      if (t->is_meta()) return make_error(Code::invalid_argument, fmt::format("{}: torch reference: an input has no values", l.op));
      const std::size_t es = dtype_size(t->dtype);
      const std::size_t n = t->numel() ? static_cast<std::size_t>(t->span() + t->offset) * es : 0;
      w.begin_object().key("dtype").string(dtype_abbrev(t->dtype)).key("shape").begin_array();
      for (auto s : t->shape) w.integer(s);
      w.end_array().key("strides").begin_array();
      for (auto s : t->strides) w.integer(s);
      w.end_array().key("offset").integer(t->numel() ? t->offset : 0);
      w.key("begin").integer(static_cast<std::int64_t>(data.size())).key("nbytes").integer(static_cast<std::int64_t>(n));
      w.end_object();
      data.insert(data.end(), t->storage->begin(), t->storage->begin() + static_cast<std::ptrdiff_t>(n));
    }
    w.end_array().end_object();
    KB_TRY(write_bytes(*dir / (stem + ".in.json"), w.str().data(), w.str().size()));
    KB_TRY(write_bytes(*dir / (stem + ".in.bin"), data.data(), data.size()));
  }
  KB_TRY(run_runner(opt, *dir, {}));
  std::vector<TorchLineResult> out(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    TorchLineResult& r = out[i];
    const std::string stem = fmt::format("{:08}", i);
    if (std::string e = read_text(*dir / (stem + ".error.txt")); !e.empty()) {
      r.error = "PyTorch: " + e;
      continue;
    }
    const auto json_path = (*dir / (stem + ".out.json")).string();
    auto text = json::read_text_file(json_path);
    if (!text) {
      r.error = "torch reference: the runner wrote no outputs";
      continue;
    }
    auto doc = json::parse(*text, json_path);
    if (!doc) return std::move(doc).error();
    const std::string bytes = read_text(*dir / (stem + ".out.bin"));
    json::Object root;
    json::Array outs;
    if (doc->root().get_object().get(root) || root["outputs"].get_array().get(outs) || root["fp64"].get_bool().get(r.fp64))
      return make_error(Code::invalid_data, fmt::format("{}: expected outputs and fp64", json_path));
    for (auto o : outs) {
      if (o.is_null()) {
        HostTensor u;
        u.undefined = true;
        r.outputs.push_back(std::move(u));
        continue;
      }
      std::string_view dt;
      std::int64_t begin = 0, nbytes = 0;
      json::Array shape;
      if (o["dtype"].get_string().get(dt) || o["shape"].get_array().get(shape) || o["begin"].get_int64().get(begin) ||
          o["nbytes"].get_int64().get(nbytes))
        return make_error(Code::invalid_data, fmt::format("{}: an output lacks dtype, shape, begin or nbytes", json_path));
      auto d = dtype_from_name(dt);
      if (!d) return make_error(Code::invalid_data, fmt::format("{}: unknown dtype {}", json_path, dt));
      std::vector<std::int64_t> sh;
      for (auto s : shape) sh.push_back(s.get_int64().value());
      HostTensor t = empty_tensor(*d, sh);
      if (nbytes != static_cast<std::int64_t>(t.numel() * static_cast<std::int64_t>(dtype_size(*d))) || begin < 0 ||
          static_cast<std::size_t>(begin + nbytes) > bytes.size())
        return make_error(Code::invalid_data, fmt::format("{}: output bytes do not match its shape", json_path));
      if (nbytes) std::memcpy(t.storage->data(), bytes.data() + begin, static_cast<std::size_t>(nbytes));
      r.outputs.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace kb::backendbench
