// `kb backendbench parse|import|ops|run`: BackendBench / TritonBench operator traces from the command
// line, over lib/backendbench.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "backendbench/import.hpp"
#include "backendbench/ops.hpp"
#include "backendbench/report.hpp"
#include "backendbench/run.hpp"
#include "backendbench/trace.hpp"
#include "commands.hpp"
#include "common/near_match.hpp"
#include "common/printable.hpp"
#include "cuda/device.hpp"

namespace kb::backendbench {
namespace {

constexpr const char* kParseUsage = R"USAGE(usage: kb backendbench parse FILE
       kb backendbench import FILE --out DIR
       kb backendbench ops [--device cuda]
       kb backendbench ops FILE
       kb backendbench run FILE [--ops A,B] [--device cpu|cuda|cuda:N] [--limit-per-op N]
                                [--baseline JSON] [--seed N] [--lines] [--reps N]
                                [--markdown FILE] [--oracle-limit N] [--oracle-flops N]
                                [--gpu-reference] [--time-limit S]
                                [--save-lines FILE] [--resume FILE,...]
                                [--out DIR] [--empty-kernel-ms MS] [--reference native|torch]
parse   Parse a BackendBench / TritonBench operator trace file ("Operator: NAME"
        lines, each followed by "cnt: N, ((args...), {kwargs})" lines). Prints
        every line that does not parse as FILE:LINE:COL: message, then
        "parsed N of M lines". Exit 0 when every line parsed, 1 otherwise.
import  Write the file as a FlashInfer Trace dataset under DIR: one definition
        per operator overload and argument signature (definitions/aten/), one
        workload per line (workloads/aten/; dims, strides and cnt are axes),
        backendbench/lines.jsonl (uuid -> operator, line, cnt, original text)
        and backendbench/skipped.tsv (lines the format cannot hold).
ops     Print the operator overloads kb implements (with --device cuda: those
        with a CUDA kernel), comma-separated. With FILE: every operator of the
        file, most lines first, with its lines, the sum of its cnt and
        whether kb runs it on the CPU (a CPU oracle) and on CUDA (a CUDA
        kernel), then the totals and what is left, weighted by lines.
run     Run the operators kb implements on the file's lines and print the
        per-operator table, BackendBench's score and a coverage table of the
        operators kb does not implement. --ops names operators
        (aten.add.Tensor); --limit-per-op N takes each operator's N lines with
        the smallest inputs; --baseline reads times from
        bench/torch_baseline.py; --lines lists every line run.
        --device cuda runs kb's CUDA kernels (operators that have one) and
        judges them against the CPU oracles (cuda:N: on device N); --reps
        sets the timed calls per line (20); --markdown writes the
        per-operator table, the score and the coverage as markdown. The
        fp64 CPU oracle is slow (~1e7 elements/s per core): lines over --oracle-limit input elements
        (2^23) or, for mm/bmm/addmm, --oracle-flops (2^32) are not judged
        and do not pass; 0 lifts a limit. --gpu-reference judges those lines
        against kb's fp64 GPU reference instead (its own CUDA plans in fp64,
        see run.hpp; counted separately). --time-limit S: lines not started
        after S seconds are reported as not run (the report is still written).
        --save-lines FILE writes every line's outcome (not the lines not
        run) as JSON; --resume FILE,... (--device cuda) takes the lines saved
        there as they are (with the baseline times of the run that saved them) and
        runs the others: a run cut by --time-limit continues in a new call.
        --out DIR writes BackendBench's output files there: OVERALL_SUMMARY.md,
        operator_summary.csv, full_results.json and failed_tests.json, with
        lines whose baseline time is under 1.3x an empty call flagged as
        overhead-dominated (the CPU run measures its own empty call;
        --empty-kernel-ms gives the device's, e.g. an empty CUDA kernel's
        time from the baseline's machine). Operators without a CUDA kernel
        are listed on a --device cuda run as not run on CUDA.
        --reference torch (--device cpu) also judges every line against
        PyTorch eager on the same inputs, as BackendBench does (python3 with
        torch, $KB_PYTHON; f64 where the op runs in it, cast back to the
        traced dtypes; new_empty*, empty_like and bernoulli by dtypes and
        shapes only); refused with the reason when torch cannot be imported.
        Exit 0 when every line run passed, 1 otherwise.
Exit status 2 on bad usage.
)USAGE";

bool asks_help(const std::string& a) { return a == "--help" || a == "-h" || a == "help"; }

int usage_error(std::FILE* err, const std::string& msg) {
  fmt::print(err, "kb backendbench: {}\n", msg);
  std::fputs(kParseUsage, err);
  return 2;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool parse_u64(const std::string& s, std::uint64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

int run_import_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  std::string file, dir;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (asks_help(args[i])) {
      std::fputs(kParseUsage, out);
      return 0;
    }
    if (args[i] == "--out") {
      if (++i >= args.size()) return usage_error(err, "import: --out needs a directory");
      dir = args[i];
    } else if (args[i].size() > 1 && args[i][0] == '-') {
      return usage_error(err, fmt::format("import: unknown option \"{}\"", args[i]));
    } else if (file.empty()) {
      file = args[i];
    } else {
      return usage_error(err, "import: expected exactly one FILE");
    }
  }
  if (file.empty() || dir.empty()) return usage_error(err, "import: expected FILE and --out DIR");
  auto trace = parse_file(file);
  if (!trace) {
    fmt::print(err, "kb backendbench import: {}\n", kb::printable(trace.error().message));
    return 1;
  }
  ImportResult r = import_trace(*trace);
  if (auto st = write_dataset(r, dir); !st) {
    fmt::print(err, "kb backendbench import: {}\n", kb::printable(st.error().message));
    return 1;
  }
  std::set<std::string> ops;
  for (const auto& l : r.lines) ops.insert(l.op);
  fmt::print(out, "imported {} of {} lines of {} operators as {} definitions and {} workloads into {}\n", r.lines.size(),
             r.lines.size() + r.skipped.size(), ops.size(), r.definitions.size(), r.lines.size(), dir);
  if (!r.skipped.empty()) {
    fmt::print(out, "skipped {} lines (listed in {}/backendbench/skipped.tsv), e.g. line {} ({}): {}\n", r.skipped.size(),
               dir, r.skipped[0].source_line, r.skipped[0].op, r.skipped[0].reason);
  }
  return 0;
}

std::string pct(double num, double den) { return den > 0 ? fmt::format("{:.1f}%", 100.0 * num / den) : "-"; }

int run_run_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  std::string file, device = "cpu", baseline_path;
  int cuda_device = -1;  // --device cuda:N; -1: the current device
  RunOptions opt;
  CudaRunOptions copt;
  std::string markdown_path, save_path, out_dir;
  std::optional<double> empty_kernel_ms;
  std::vector<std::string> resume_paths;
  bool list_lines = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* what) -> const std::string* {
      if (i + 1 >= args.size()) return nullptr;
      (void)what;
      return &args[++i];
    };
    if (asks_help(a)) {
      std::fputs(kParseUsage, out);
      return 0;
    } else if (a == "--ops") {
      auto v = value("--ops");
      if (!v) return usage_error(err, "run: --ops needs a list");
      for (auto& o : split_commas(*v)) opt.ops.push_back(o == "aten.sum.SymInt" ? "aten.sum.dim_IntList" : o);
    } else if (a == "--device") {
      auto v = value("--device");
      if (!v) return usage_error(err, "run: --device takes cpu, cuda or cuda:N");
      if (*v == "cpu") {
        device = "cpu";
      } else {
        auto ordinal = cuda::parse_cuda_device(*v);
        if (!ordinal) return usage_error(err, "run: --device takes cpu, cuda or cuda:N");
        device = "cuda";
        cuda_device = *ordinal;
      }
    } else if (a == "--limit-per-op") {
      auto v = value("--limit-per-op");
      std::uint64_t n = 0;
      if (!v || !parse_u64(*v, n)) return usage_error(err, "run: --limit-per-op needs a non-negative integer");
      opt.limit_per_op = n;
    } else if (a == "--seed") {
      auto v = value("--seed");
      std::uint64_t n = 0;
      if (!v || !parse_u64(*v, n)) return usage_error(err, "run: --seed needs a non-negative integer");
      opt.seed = n;
    } else if (a == "--baseline") {
      auto v = value("--baseline");
      if (!v) return usage_error(err, "run: --baseline needs a JSON file");
      baseline_path = *v;
    } else if (a == "--markdown") {
      auto v = value("--markdown");
      if (!v) return usage_error(err, "run: --markdown needs a file");
      markdown_path = *v;
    } else if (a == "--oracle-limit" || a == "--oracle-flops") {
      auto v = value("--oracle-limit");
      std::uint64_t n = 0;
      if (!v || !parse_u64(*v, n)) return usage_error(err, fmt::format("run: {} needs a non-negative integer", a));
      if (a == "--oracle-limit") copt.oracle_elements = static_cast<std::int64_t>(n);
      else copt.oracle_flops = static_cast<double>(n);
    } else if (a == "--time-limit") {
      auto v = value("--time-limit");
      std::uint64_t n = 0;
      if (!v || !parse_u64(*v, n)) return usage_error(err, "run: --time-limit needs seconds");
      copt.time_limit_s = static_cast<double>(n);
    } else if (a == "--save-lines") {
      auto v = value("--save-lines");
      if (!v) return usage_error(err, "run: --save-lines needs a file");
      save_path = *v;
    } else if (a == "--resume") {
      auto v = value("--resume");
      if (!v) return usage_error(err, "run: --resume needs files");
      resume_paths = split_commas(*v);
    } else if (a == "--out") {
      auto v = value("--out");
      if (!v) return usage_error(err, "run: --out needs a directory");
      out_dir = *v;
    } else if (a == "--empty-kernel-ms") {
      auto v = value("--empty-kernel-ms");
      char* end = nullptr;
      double ms = v ? std::strtod(v->c_str(), &end) : 0.0;
      if (!v || v->empty() || *end != '\0' || !(ms > 0) || !std::isfinite(ms))
        return usage_error(err, "run: --empty-kernel-ms needs a positive number of ms");
      empty_kernel_ms = ms;
    } else if (a == "--gpu-reference") {
      copt.gpu_reference = true;
    } else if (a == "--reps") {
      auto v = value("--reps");
      std::uint64_t n = 0;
      if (!v || !parse_u64(*v, n) || n == 0 || n > 10000) return usage_error(err, "run: --reps needs 1..10000");
      copt.reps = static_cast<int>(n);
    } else if (a == "--lines") {
      list_lines = true;
    } else if (a == "--reference") {
      auto v = value("--reference");
      if (!v || (*v != "torch" && *v != "native")) return usage_error(err, "run: --reference takes native or torch");
      opt.torch_reference = *v == "torch";
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error(err, fmt::format("run: unknown option \"{}\"", a));
    } else if (file.empty()) {
      file = a;
    } else {
      return usage_error(err, "run: expected exactly one FILE");
    }
  }
  if (file.empty()) return usage_error(err, "run: expected a FILE");
  if (!resume_paths.empty() && device != "cuda") return usage_error(err, "run: --resume needs --device cuda");
  if (opt.torch_reference && device != "cpu") return usage_error(err, "run: --reference torch needs --device cpu");
  std::string torch_version_text;
  if (opt.torch_reference) {
    auto v = torch_version(opt.torch);
    if (!v) {
      fmt::print(err, "kb backendbench run: --reference torch: {}\n", v.error().message);
      return 1;
    }
    torch_version_text = *v;
  }
  for (const std::string& p : resume_paths) {
    auto saved = read_saved_lines(p);
    if (!saved) {
      fmt::print(err, "kb backendbench run: {}\n", kb::printable(saved.error().message));
      return 1;
    }
    for (auto& [k, v] : *saved) copt.resume[k] = std::move(v);
  }
  if (device == "cuda" && !cuda_runs_available()) {
    fmt::print(err, "kb backendbench run: --device cuda: this kb was built without CUDA; run with --device cpu\n");
    return 1;
  }
  if (cuda_device >= 0) {
    if (auto st = cuda::select_device(cuda_device); !st) {
      fmt::print(err, "kb backendbench run: --device cuda:{}: {}\n", cuda_device, kb::printable(st.error().message));
      return 1;
    }
  }
  auto trace = parse_file(file);
  if (!trace) {
    fmt::print(err, "kb backendbench run: {}\n", kb::printable(trace.error().message));
    return 1;
  }
  // Every --ops name must be an operator kb implements and the file holds, before anything runs.
  {
    std::vector<std::string> implemented, in_file;
    for (const OpInfo& op : aten_ops()) implemented.emplace_back(op.name);
    for (const Operator& op : trace->operators)
      if (find_aten_op(op.name)) in_file.push_back(op.name);
    std::sort(in_file.begin(), in_file.end());
    in_file.erase(std::unique(in_file.begin(), in_file.end()), in_file.end());
    bool unknown = false;
    for (const std::string& o : opt.ops) {
      bool kb_has = find_aten_op(o) != nullptr;
      if (kb_has && std::find(in_file.begin(), in_file.end(), o) != in_file.end()) continue;
      unknown = true;
      fmt::print(err, "kb backendbench run: --ops {}: {}{}\n", o,
                 kb_has ? "not in this file" : "kb does not implement this operator",
                 suggestion_text(o, kb_has ? in_file : implemented));
    }
    if (unknown) return 2;
  }
  if (!baseline_path.empty()) {
    auto b = read_baseline(baseline_path);
    if (!b) {
      fmt::print(err, "kb backendbench run: {}\n", kb::printable(b.error().message));
      return 1;
    }
    opt.baseline = std::move(*b);
  }
  auto rep = device == "cuda" ? run_cuda_trace(*trace, opt, copt) : run_cpu_trace(*trace, opt);
  if (!rep) {
    fmt::print(err, "kb backendbench run: {}\n", kb::printable(rep.error().message));
    return 1;
  }
  for (const auto& u : rep->unknown_ops)
    fmt::print(err, "kb backendbench run: --ops {}: {}\n", u,
               !find_aten_op(u)                          ? "kb does not implement this operator"
               : device == "cuda" && !has_cuda_kernel(u) ? "not run on CUDA: kb has its CPU oracle and no CUDA kernel"
                                                         : "not in this file");
  if (!rep->unknown_ops.empty()) return 2;

  std::string device_name = "cpu";
  if (device == "cuda") {
    auto info = cuda::current_device_info();
    device_name = info ? info->name : "cuda";
    fmt::print(out,
               "device: {} (kb's CUDA kernels, judged against kb's fp64 CPU oracles: atol = rtol = 1e-2, NaN == NaN,\n"
               "dtype and shape must match). kb ms: median of {} calls after {} warm-up calls, each call between its\n"
               "own CUDA events, L2 warm: the policy of bench/torch_baseline.py.\n",
               device_name, copt.reps, copt.warmup);
    if (!rep->fatal.empty()) fmt::print(out, "STOPPED EARLY: {}\n", rep->fatal);
    const DevicePhases& ph = rep->phases;
    fmt::print(out, "time (s): inputs to the device {:.1f}, GPU reference {:.1f}, candidate's first run {:.1f}, judging {:.1f}, "
                    "timed calls {:.1f}, waiting for the host side {:.1f}\n",
               ph.upload_s, ph.reference_s, ph.candidate_s, ph.judge_s, ph.timing_s, ph.host_wait_s);
    if (rep->resumed_lines) fmt::print(out, "resumed: {} lines taken from --resume files, not run again\n", rep->resumed_lines);
  } else if (opt.torch_reference) {
    fmt::print(out, "device: cpu (kb's fp64 oracles judged against PyTorch {} eager on the same inputs: atol = rtol = 1e-2,\n"
                    "NaN == NaN, dtype and shape must match; PyTorch in f64 where the op runs in it), after the oracle's own\n"
                    "checks (shapes and dtypes against the meta call, determinism, materialization).\n",
               torch_version_text);
  } else {
    fmt::print(out, "device: cpu (kb's fp64 oracles). A CPU run validates output shapes and dtypes against the meta call,\n"
                    "determinism and materialization (strides, value ranges, valid indices); judging numerical\n"
                    "correctness needs a second implementation (a CUDA kernel) or a run against PyTorch.\n");
  }
  if (opt.limit_per_op) fmt::print(out, "sample: the {} lines with the smallest inputs per operator\n", opt.limit_per_op);
  bool timed = !opt.baseline.empty();
  fmt::print(out, "\n{:<44} {:>6} {:>7} {:>10}{}\n", "operator", "lines", "passed", "kb ms", timed ? "   speedup" : "");
  bool all_passed = true;
  for (const OpScore& s : rep->ops) {
    double ms = 0;
    for (const auto& l : rep->lines)
      if (l.op == s.op) ms += l.kb_ms;
    fmt::print(out, "{:<44} {:>6} {:>7} {:>10.3f}{}\n", s.op, s.lines, s.passed, ms,
               timed ? fmt::format(" {:>9.3f}", s.score) : std::string());
    all_passed &= s.fully_correct();
  }
  for (const auto& l : rep->lines) {
    if (!l.passed && (list_lines || (l.problem.rfind("not judged", 0) != 0 && l.problem.rfind("not run", 0) != 0)))
      fmt::print(out, "  FAILED {} line {} (#{}): {}\n", l.op, l.source_line, l.index, kb::printable(l.problem));
    else if (list_lines) fmt::print(out, "  passed {} line {} (#{}) {:.3f} ms\n", l.op, l.source_line, l.index, l.kb_ms);
  }
  const Summary& sm = rep->summary;
  fmt::print(out, "\nscore over {} operators: fully correct {}", sm.ops, pct(sm.fraction_correct, 1.0));
  if (timed) {
    fmt::print(out, ", geomean speedup {:.3f}", sm.geomean);
    for (auto [p, f] : sm.perf_at) fmt::print(out, ", perf@{:g} {}", p, pct(f, 1.0));
    if (device == "cpu") fmt::print(out, " (CPU oracle time against the baseline's)");
  }
  fmt::print(out, "\n");

  std::size_t impl_lines = 0;
  std::uint64_t impl_count = 0;
  for (const auto& c : rep->implemented) {
    impl_lines += c.lines;
    impl_count += c.count;
  }
  fmt::print(out, "\ncoverage: kb implements {} of {} operators in the file ({} in its table): {} of {} lines ({}), "
                  "{} of cnt ({})\n",
             rep->implemented.size(), rep->implemented.size() + rep->unimplemented.size(), aten_ops().size(), impl_lines,
             rep->total_lines, pct(static_cast<double>(impl_lines), static_cast<double>(rep->total_lines)), impl_count,
             pct(static_cast<double>(impl_count), static_cast<double>(rep->total_count)));
  // The done-when measure: operators whose every line passed (all their lines run), and their line share.
  std::size_t full_ops = 0, full_lines = 0, full_ref_ops = 0, full_ref_lines = 0, ref_lines = 0;
  std::set<std::string> ref_ops;
  for (const auto& l : rep->lines)
    if (l.by_reference) {
      ++ref_lines;
      ref_ops.insert(l.op);
    }
  for (const OpScore& sc : rep->ops)
    for (const auto& c : rep->implemented)
      if (c.op == sc.op && sc.fully_correct() && sc.lines == c.lines) {
        if (ref_ops.count(sc.op)) {
          ++full_ref_ops;
          full_ref_lines += c.lines;
        } else {
          ++full_ops;
          full_lines += c.lines;
        }
      }
  std::size_t unjudged = 0, unrun = 0;
  for (const auto& l : rep->lines) {
    unjudged += l.problem.rfind("not judged", 0) == 0;
    unrun += l.problem.rfind("not run", 0) == 0;
  }
  if (unjudged) fmt::print(out, "{} lines not judged (over the CPU oracle budget)\n", unjudged);
  if (unrun) fmt::print(out, "{} lines not run (--time-limit reached)\n", unrun);
  fmt::print(out, "fully correct on every line of the file against the CPU oracle: {} operators, {} of {} lines ({})\n",
             full_ops, full_lines, rep->total_lines,
             pct(static_cast<double>(full_lines), static_cast<double>(rep->total_lines)));
  if (ref_lines)
    fmt::print(out,
               "{} lines judged against the GPU fp64 reference (--gpu-reference); fully correct with some lines judged "
               "so: {} more operators, {} more lines ({})\n",
               ref_lines, full_ref_ops, full_ref_lines,
               pct(static_cast<double>(full_ref_lines), static_cast<double>(rep->total_lines)));
  if (!save_path.empty())
    if (auto st = write_saved_lines(*rep, device_name, save_path); !st) {
      fmt::print(err, "kb backendbench run: {}\n", kb::printable(st.error().message));
      return 1;
    }
  if (!markdown_path.empty()) {
    std::FILE* md = std::fopen(markdown_path.c_str(), "w");
    if (!md) {
      fmt::print(err, "kb backendbench run: cannot write {}\n", markdown_path);
      return 1;
    }
    fmt::print(md, "# kb vs PyTorch eager on BackendBench traces\n\n");
    fmt::print(md, "- trace: `{}`\n- device: {}\n", file, device_name);
    if (device == "cuda")
      fmt::print(md, "- timing: median of {} calls after {} warm-up calls, each between its own CUDA events, L2 warm "
                     "(kb and bench/torch_baseline.py alike)\n", copt.reps, copt.warmup);
    fmt::print(md, "- judge: kb's fp64 CPU oracle, atol = rtol = 1e-2, NaN == NaN, dtype and shape must match\n");
    fmt::print(md, "- operators run: {}, fully correct: {}; geomean speedup over them: {:.3f}\n", sm.ops,
               pct(sm.fraction_correct, 1.0), sm.geomean);
    fmt::print(md, "- fully correct on every line of the file against the CPU oracle: {} operators covering {} of {} lines ({})\n",
               full_ops, full_lines, rep->total_lines,
               pct(static_cast<double>(full_lines), static_cast<double>(rep->total_lines)));
    if (ref_lines)
      fmt::print(md, "- plus, with {} lines judged against the GPU fp64 reference (--gpu-reference): {} operators, {} lines ({})\n",
                 ref_lines, full_ref_ops, full_ref_lines,
                 pct(static_cast<double>(full_ref_lines), static_cast<double>(rep->total_lines)));
    std::size_t unjudged_md = 0;
    for (const auto& l : rep->lines) unjudged_md += l.problem.rfind("not judged", 0) == 0;
    fmt::print(md, "- lines not judged (over the CPU oracle budget, not run): {}\n\n", unjudged_md);
    fmt::print(md, "| operator | lines | passed | by GPU reference | kb ms (sum of medians) | torch ms (sum) | speedup (geomean) |\n"
                   "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const OpScore& sc : rep->ops) {
      double kms = 0, tms = 0;
      std::size_t by_ref = 0;
      for (const auto& l : rep->lines)
        if (l.op == sc.op) {
          kms += l.kb_ms;
          tms += l.baseline_ms.value_or(0.0);
          by_ref += l.by_reference;
        }
      fmt::print(md, "| `{}` | {} | {} | {} | {:.3f} | {:.3f} | {:.3f} |\n", sc.op, sc.lines, sc.passed, by_ref, kms, tms,
                 sc.score);
    }
    std::fclose(md);
  }
  if (!out_dir.empty()) {
    std::string command = "kb backendbench";
    for (const std::string& a : args) command += " " + a;
    OutputInfo oi{command, device_name, 1.0, empty_kernel_ms};
    if (auto st = write_outputs(*rep, *trace, oi, out_dir); !st) {
      fmt::print(err, "kb backendbench run: {}\n", kb::printable(st.error().message));
      return 1;
    }
    fmt::print(out, "\nBackendBench's output files written to {}\n", out_dir);
  }
  fmt::print(out, "\nnot implemented, by lines:\n{:<56} {:>6} {:>7} {:>10}\n", "operator", "lines", "% lines", "cnt");
  for (const auto& c : rep->unimplemented)
    if (!c.cpu_oracle)
      fmt::print(out, "{:<56} {:>6} {:>7} {:>10}\n", c.op, c.lines,
                 pct(static_cast<double>(c.lines), static_cast<double>(rep->total_lines)), c.count);
  if (std::any_of(rep->unimplemented.begin(), rep->unimplemented.end(), [](const CoverageRow& c) { return c.cpu_oracle; })) {
    fmt::print(out, "\nnot run on CUDA (kb has the CPU oracle, no CUDA kernel), by lines:\n{:<56} {:>6} {:>7} {:>10}\n",
               "operator", "lines", "% lines", "cnt");
    for (const auto& c : rep->unimplemented)
      if (c.cpu_oracle)
        fmt::print(out, "{:<56} {:>6} {:>7} {:>10}\n", c.op, c.lines,
                   pct(static_cast<double>(c.lines), static_cast<double>(rep->total_lines)), c.count);
  }
  std::fflush(out);
  return all_passed ? 0 : 1;
}

// `kb backendbench ops FILE`: each operator of the file with its lines and whether kb runs it.
int run_ops_file(const std::string& file, std::FILE* out, std::FILE* err) {
  auto trace = parse_file(file);
  if (!trace) {
    fmt::print(err, "kb backendbench ops: {}\n", kb::printable(trace.error().message));
    return 1;
  }
  struct Row {
    std::string op;
    std::size_t lines = 0;
    std::uint64_t count = 0;
    bool cpu = false, cuda = false;
  };
  std::vector<Row> rows;
  std::size_t total_lines = 0;
  for (const Operator& op : merge_operators(*trace)) {
    Row r{op.name, op.lines.size(), 0, find_aten_op(op.name) != nullptr, has_cuda_kernel(op.name)};
    for (const ArgLine& l : op.lines) r.count += l.count;
    total_lines += r.lines;
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.lines > b.lines; });
  fmt::print(out, "{:<56} {:>6} {:>7} {:>8} {:>4} {:>5}\n", "operator", "lines", "% lines", "cnt", "cpu", "cuda");
  std::size_t cpu_ops = 0, cpu_lines = 0, cuda_ops = 0, cuda_lines = 0;
  for (const Row& r : rows) {
    fmt::print(out, "{:<56} {:>6} {:>7} {:>8} {:>4} {:>5}\n", r.op, r.lines,
               pct(static_cast<double>(r.lines), static_cast<double>(total_lines)), r.count, r.cpu ? "yes" : "no",
               r.cuda ? "yes" : "no");
    cpu_ops += r.cpu;
    cpu_lines += r.cpu ? r.lines : 0;
    cuda_ops += r.cuda;
    cuda_lines += r.cuda ? r.lines : 0;
  }
  fmt::print(out, "\n{} operators, {} lines. CPU: {} operators, {} lines ({}); left: {} operators, {} lines ({}).\n"
                  "CUDA: {} operators, {} lines ({}); left: {} operators, {} lines ({}).\n",
             rows.size(), total_lines, cpu_ops, cpu_lines, pct(static_cast<double>(cpu_lines), static_cast<double>(total_lines)),
             rows.size() - cpu_ops, total_lines - cpu_lines,
             pct(static_cast<double>(total_lines - cpu_lines), static_cast<double>(total_lines)), cuda_ops, cuda_lines,
             pct(static_cast<double>(cuda_lines), static_cast<double>(total_lines)), rows.size() - cuda_ops,
             total_lines - cuda_lines, pct(static_cast<double>(total_lines - cuda_lines), static_cast<double>(total_lines)));
  return 0;
}

int run_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  if (args.empty()) {
    std::fputs(kParseUsage, err);
    return 2;
  }
  if (asks_help(args[0])) {
    std::fputs(kParseUsage, out);
    return 0;
  }
  if (args[0] == "import") return run_import_command(args, out, err);
  if (args[0] == "run") return run_run_command(args, out, err);
  if (args[0] == "ops" && args.size() == 2 && !args[1].empty() && args[1][0] != '-') return run_ops_file(args[1], out, err);
  if (args[0] == "ops") {  // the overloads kb implements, comma-separated (for torch_baseline.py --ops)
    bool cuda_only = args.size() == 3 && args[1] == "--device" && args[2] == "cuda";
    if (args.size() != 1 && !cuda_only) return usage_error(err, "ops: takes only --device cuda, or one FILE");
    std::vector<std::string_view> names;
    for (const OpInfo& o : aten_ops())
      if (!cuda_only || has_cuda_kernel(o.name)) names.emplace_back(o.name);
    fmt::print(out, "{}\n", fmt::join(names, ","));
    return 0;
  }
  if (args[0] != "parse") {
    fmt::print(err, "kb backendbench: unknown subcommand \"{}\" (see kb backendbench --help)\n", args[0]);
    return 2;
  }
  std::vector<std::string> files;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (asks_help(a)) {
      std::fputs(kParseUsage, out);
      return 0;
    }
    if (a.size() > 1 && a[0] == '-') {
      fmt::print(err, "kb backendbench parse: unknown option \"{}\"\n", a);
      std::fputs(kParseUsage, err);
      return 2;
    }
    files.push_back(a);
  }
  if (files.size() != 1) {
    fmt::print(err, "kb backendbench parse: expected exactly one FILE, got {}\n", files.size());
    std::fputs(kParseUsage, err);
    return 2;
  }
  auto rep = parse_file_report(files[0]);
  if (!rep) {
    fmt::print(err, "kb backendbench parse: {}\n", kb::printable(rep.error().message));
    return 1;
  }
  for (const LineError& e : rep->errors) fmt::print(err, "{}\n", kb::printable(rep->format_error(e)));
  fmt::print(out, "parsed {} of {} lines\n", rep->arg_lines_parsed, rep->arg_lines_total);
  std::fflush(out);
  return rep->ok() ? 0 : 1;
}

}  // namespace
}  // namespace kb::backendbench

int cmd_backendbench(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  return kb::backendbench::run_command(args, out, err);
}
