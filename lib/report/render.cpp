#include "report/render.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <variant>

#include "json/json.hpp"

namespace kb::report {
namespace fs = std::filesystem;

// ---- shared -----------------------------------------------------------------

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_safe_json(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

std::string axes_text(const Axes& axes) {
  if (axes.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : axes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out;
}

std::string ms(std::optional<double> v) { return v ? fmt::format("{:.4f}", *v) : "-"; }
std::string ratio(std::optional<double> v) { return v ? fmt::format("{:.2f}x", *v) : "-"; }
std::string percent(double v) { return fmt::format("{:.1f}%", 100 * v); }
std::string author_text(const std::string& a) { return a.empty() ? "(unknown)" : a; }

std::string baseline_text(const Report& r) {
  return r.baseline == "reference" ? "the reference latency the traces carry (reference_latency_ms, median per workload)"
                                   : "solution " + r.baseline;
}

void write_axes(json::Writer& w, const Axes& a) {
  w.begin_object();
  for (const auto& [k, v] : a) w.key(k).integer(v);
  w.end_object();
}

void write_opt(json::Writer& w, const char* key, std::optional<double> v) {
  if (v) w.key(key).number(*v);
  else w.key(key).null();
}

void write_fast_p(json::Writer& w, const FastP& f) {
  w.begin_object();
  w.key("p").begin_array();
  for (double p : f.p) w.number(p);
  w.end_array();
  w.key("curves").begin_array();
  for (const auto& [name, curve] : f.curves) {
    w.begin_object().key("name").string(name).key("fraction").begin_array();
    for (double v : curve) w.number(v);
    w.end_array().end_object();
  }
  w.end_array();
  w.end_object();
}

void write_counts(json::Writer& w, const std::vector<Count>& counts) {
  w.begin_array();
  for (const auto& c : counts)
    w.begin_object().key("name").string(c.name).key("records").integer(static_cast<std::int64_t>(c.records)).end_object();
  w.end_array();
}

// Markdown table cells: pipes and HTML are escaped, newlines become <br>.
std::string md(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\\': out += "\\\\"; break;
      case '`': out += "\\`"; break;
      case '*': out += "\\*"; break;
      case '_': out += "\\_"; break;
      case '[': out += "\\["; break;
      case ']': out += "\\]"; break;
      case '\r': break;
      case '\n': out += "<br>"; break;
      default: out += c;
    }
  }
  return out;
}

void md_row(std::string& out, const std::vector<std::string>& cells) {
  out += "|";
  for (const auto& c : cells) out += " " + c + " |";
  out += "\n";
}
void md_header(std::string& out, const std::vector<std::string>& cells) {
  md_row(out, cells);
  out += "|";
  for (std::size_t i = 0; i < cells.size(); ++i) out += " --- |";
  out += "\n";
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}
void csv_row(std::string& out, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + csv_field(cells[i]);
  out += "\n";
}
std::string num(std::optional<double> v) { return v ? fmt::format("{}", *v) : ""; }

std::string cell_short(const Cell& c) {
  if (!c.present) return "-";
  if (c.status == "PASSED") return c.latency_ms ? fmt::format("{:.4f}", *c.latency_ms) : "PASSED";
  return c.status;
}

}  // namespace

// ---- JSON -------------------------------------------------------------------

std::string to_json(const Report& r, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("title").string(r.title);
  w.key("trace_paths").begin_array();
  for (const auto& p : r.trace_paths) w.string(p);
  w.end_array();
  w.key("trace_files").integer(static_cast<std::int64_t>(r.trace_files));
  w.key("records").integer(static_cast<std::int64_t>(r.records));
  w.key("baseline").string(r.baseline);
  w.key("devices");
  write_counts(w, r.devices);
  w.key("timing");
  write_counts(w, r.timing);
  w.key("statuses");
  write_counts(w, r.statuses);
  w.key("authors").begin_array();
  for (const auto& a : r.authors) {
    w.begin_object();
    w.key("author").string(a.author);
    w.key("solutions").integer(static_cast<std::int64_t>(a.solutions));
    w.key("entered").integer(static_cast<std::int64_t>(a.entered));
    w.key("passed").integer(static_cast<std::int64_t>(a.passed));
    w.key("wins").integer(static_cast<std::int64_t>(a.wins));
    w.key("win_rate").number(a.win_rate);
    w.end_object();
  }
  w.end_array();
  w.key("author_fast_p");
  write_fast_p(w, r.author_fast_p);
  w.key("definitions").begin_array();
  for (const auto& d : r.definitions) {
    w.begin_object();
    w.key("name").string(d.name);
    w.key("op_type").string(d.op_type);
    w.key("devices").begin_array();
    for (const auto& x : d.devices) w.string(x);
    w.end_array();
    w.key("var_axes").begin_array();
    for (const auto& x : d.var_axes) w.string(x);
    w.end_array();
    w.key("workloads").begin_array();
    for (const auto& wl : d.workloads) {
      w.begin_object().key("uuid").string(wl.uuid).key("axes");
      write_axes(w, wl.axes);
      write_opt(w, "baseline_ms", wl.baseline_ms);
      w.end_object();
    }
    w.end_array();
    w.key("solutions").begin_array();
    for (std::size_t s = 0; s < d.solutions.size(); ++s) {
      const SolutionSummary& sum = d.solutions[s];
      w.begin_object();
      w.key("name").string(sum.name);
      w.key("author").string(sum.author);
      w.key("evaluated").integer(static_cast<std::int64_t>(sum.evaluated));
      w.key("passed").integer(static_cast<std::int64_t>(sum.passed));
      w.key("timed").integer(static_cast<std::int64_t>(sum.timed));
      write_opt(w, "geomean_speedup", sum.geomean_speedup);
      write_opt(w, "min_speedup", sum.min_speedup);
      write_opt(w, "max_speedup", sum.max_speedup);
      w.key("cells").begin_array();
      for (const Cell& c : d.cells[s]) {
        if (!c.present) {
          w.null();
          continue;
        }
        w.begin_object();
        w.key("status").string(c.status);
        write_opt(w, "latency_ms", c.latency_ms);
        write_opt(w, "speedup", c.speedup);
        write_opt(w, "spread", c.spread);
        if (!c.message.empty()) w.key("message").string(c.message);
        w.key("origin").string(c.origin);
        w.end_object();
      }
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.key("charts").begin_array();
    for (const auto& ch : d.charts) {
      w.begin_object().key("axis").string(ch.axis).key("log_x").boolean(ch.log_x).key("series").begin_array();
      for (const auto& s : ch.series) {
        w.begin_object().key("label").string(s.label).key("baseline").boolean(s.baseline).key("points").begin_array();
        for (const auto& [x, y] : s.points) w.begin_array().number(x).number(y).end_array();
        w.end_array().end_object();
      }
      w.end_array().end_object();
    }
    w.end_array();
    w.key("fast_p");
    write_fast_p(w, d.fast_p);
    w.end_object();
  }
  w.end_array();
  w.key("models").begin_array();
  for (const auto& m : r.models) {
    w.begin_object().key("path").string(m.path);
    if (!m.error.empty()) w.key("error").string(m.error);
    if (m.estimate) w.key("estimate").raw(estimate::to_json(*m.estimate, false));
    w.end_object();
  }
  w.end_array();
  w.key("agent_traces").begin_array();
  for (const auto& a : r.agents) w.begin_object().key("path").string(a.path).key("trace").raw(model::to_json(a.trace, false)).end_object();
  w.end_array();
  w.end_object();
  return w.take();
}

// ---- markdown ---------------------------------------------------------------

std::string to_markdown(const Report& r) {
  std::string out = "# " + md(r.title) + "\n\n";
  out += fmt::format("{} trace records from {} files ({}).\n\n", r.records, r.trace_files, md(fmt::format("{}", fmt::join(r.trace_paths, ", "))));
  out += "Baseline: " + md(baseline_text(r)) + ".\n\n";
  out += "## Devices and timing\n\n";
  md_header(out, {"device", "records"});
  for (const auto& c : r.devices) md_row(out, {md(c.name), std::to_string(c.records)});
  out += "\n";
  md_header(out, {"timing method", "timed records"});
  for (const auto& c : r.timing) md_row(out, {md(c.name), std::to_string(c.records)});
  out += "\n";
  md_header(out, {"status", "records"});
  for (const auto& c : r.statuses) md_row(out, {md(c.name), std::to_string(c.records)});
  out += "\n## Authors\n\nA workload is won by the author of its fastest PASSED solution; win rate: wins over the "
         "workloads the author entered.\n\n";
  md_header(out, {"author", "solutions", "workloads entered", "passed", "wins", "win rate"});
  for (const auto& a : r.authors)
    md_row(out, {md(a.author), std::to_string(a.solutions), std::to_string(a.entered), std::to_string(a.passed),
                 std::to_string(a.wins), percent(a.win_rate)});
  auto fast_p_table = [&](const FastP& f) {
    std::vector<std::string> head = {"p"};
    for (const auto& [name, curve] : f.curves) head.push_back(md(name));
    md_header(out, head);
    for (std::size_t i = 0; i < f.p.size(); ++i) {
      std::vector<std::string> row = {fmt::format("{:g}", f.p[i])};
      for (const auto& [name, curve] : f.curves) row.push_back(percent(curve[i]));
      md_row(out, row);
    }
  };
  out += "\n### fast_p per author\n\nThe fraction of the workloads an author entered where its best solution PASSED "
         "and is faster than p x the baseline.\n\n";
  fast_p_table(r.author_fast_p);
  for (const auto& d : r.definitions) {
    out += "\n## " + md(d.name) + "\n\n";
    if (!d.op_type.empty()) out += "op type " + md(d.op_type) + "; ";
    out += fmt::format("{} workloads; device {}\n\n", d.workloads.size(), md(fmt::format("{}", fmt::join(d.devices, ", "))));
    out += "### Speedup against the baseline\n\n";
    md_header(out, {"solution", "author", "evaluated", "passed", "geomean speedup", "min", "max", "statuses"});
    for (const auto& s : d.solutions) {
      std::string st;
      for (const auto& [k, v] : s.statuses) st += fmt::format("{}{} {}", st.empty() ? "" : ", ", k, v);
      md_row(out, {md(s.name), md(author_text(s.author)), std::to_string(s.evaluated), std::to_string(s.passed),
                   ratio(s.geomean_speedup), ratio(s.min_speedup), ratio(s.max_speedup), md(st)});
    }
    out += "\n### Latency (ms) by workload\n\n";
    std::vector<std::string> head = {"workload", "baseline"};
    for (const auto& s : d.solutions) head.push_back(md(s.name));
    md_header(out, head);
    for (std::size_t w = 0; w < d.workloads.size(); ++w) {
      std::vector<std::string> row = {md(axes_text(d.workloads[w].axes)), ms(d.workloads[w].baseline_ms)};
      for (std::size_t s = 0; s < d.solutions.size(); ++s) row.push_back(md(cell_short(d.cells[s][w])));
      md_row(out, row);
    }
    bool any_failure = false;
    for (std::size_t s = 0; s < d.solutions.size(); ++s)
      for (std::size_t w = 0; w < d.workloads.size(); ++w) {
        const Cell& c = d.cells[s][w];
        if (!c.present || c.status == "PASSED") continue;
        if (!any_failure) {
          out += "\n### Failures\n\n";
          md_header(out, {"solution", "workload", "status", "message"});
          any_failure = true;
        }
        md_row(out, {md(d.solutions[s].name), md(axes_text(d.workloads[w].axes)), md(c.status), md(c.message)});
      }
    out += "\n### fast_p\n\n";
    fast_p_table(d.fast_p);
  }
  if (!r.models.empty()) {
    out += "\n## Model steps (kb estimate)\n";
    for (const auto& m : r.models) {
      out += "\n### " + md(m.path) + "\n\n";
      if (!m.error.empty()) {
        out += "not estimated: " + md(m.error) + "\n";
        continue;
      }
      const auto& e = *m.estimate;
      out += fmt::format("{} ({}){}: {} of {} kernels measured", md(e.model), md(e.framework),
                         e.step.empty() ? "" : ", step " + md(e.step), e.measured, e.kernels.size());
      if (e.measured) out += fmt::format("; baseline {:.4f} ms, best {:.4f} ms, estimated speedup {:.2f}x", e.baseline_ms, e.best_ms, e.speedup);
      out += "\n\n";
      md_header(out, {"kernel", "count", "recorded workload", "baseline ms", "best ms", "best solution", "speedup", "share", "reason"});
      for (const auto& k : e.kernels)
        md_row(out, {md(k.id), std::to_string(k.count), k.measured ? md((k.exact ? "" : "~") + axes_text(k.matched_axes)) : "-",
                     k.measured ? ms(k.baseline_ms) : "-", k.measured ? ms(k.best_ms) : "-", md(k.best_solution),
                     k.measured ? ratio(k.speedup) : "-", k.measured ? percent(k.baseline_share) : "-", md(k.reason)});
    }
  }
  return out;
}

// ---- CSV --------------------------------------------------------------------

Files to_csv(const Report& r) {
  Files files;
  std::string results, solutions, authors, fast_p;
  csv_row(results, {"definition", "op_type", "workload", "axes", "solution", "author", "status", "latency_ms",
                    "baseline_ms", "speedup", "spread", "message", "origin"});
  csv_row(solutions, {"definition", "solution", "author", "evaluated", "passed", "timed", "geomean_speedup",
                      "min_speedup", "max_speedup"});
  csv_row(authors, {"author", "solutions", "entered", "passed", "wins", "win_rate"});
  csv_row(fast_p, {"definition", "name", "p", "fraction"});
  for (const auto& a : r.authors)
    csv_row(authors, {a.author, std::to_string(a.solutions), std::to_string(a.entered), std::to_string(a.passed),
                      std::to_string(a.wins), num(a.win_rate)});
  auto fast_p_rows = [&](const std::string& def, const FastP& f) {
    for (const auto& [name, curve] : f.curves)
      for (std::size_t i = 0; i < f.p.size(); ++i) csv_row(fast_p, {def, name, num(f.p[i]), num(curve[i])});
  };
  fast_p_rows("", r.author_fast_p);
  for (const auto& d : r.definitions) {
    for (std::size_t s = 0; s < d.solutions.size(); ++s) {
      const auto& sum = d.solutions[s];
      csv_row(solutions, {d.name, sum.name, sum.author, std::to_string(sum.evaluated), std::to_string(sum.passed),
                          std::to_string(sum.timed), num(sum.geomean_speedup), num(sum.min_speedup), num(sum.max_speedup)});
      for (std::size_t w = 0; w < d.workloads.size(); ++w) {
        const Cell& c = d.cells[s][w];
        if (!c.present) continue;
        csv_row(results, {d.name, d.op_type, d.workloads[w].uuid, axes_text(d.workloads[w].axes), sum.name, sum.author,
                          c.status, num(c.latency_ms), num(d.workloads[w].baseline_ms), num(c.speedup), num(c.spread),
                          c.message, c.origin});
      }
    }
    fast_p_rows(d.name, d.fast_p);
  }
  files.emplace_back("results.csv", std::move(results));
  files.emplace_back("solutions.csv", std::move(solutions));
  files.emplace_back("authors.csv", std::move(authors));
  files.emplace_back("fast_p.csv", std::move(fast_p));
  if (!r.models.empty()) {
    std::string models;
    csv_row(models, {"record", "model", "framework", "step", "kernel", "count", "measured", "recorded_workload", "exact",
                     "baseline_ms", "best_ms", "best_solution", "speedup", "baseline_share", "reason"});
    for (const auto& m : r.models) {
      if (!m.estimate) {
        csv_row(models, {m.path, "", "", "", "", "", "", "", "", "", "", "", "", "", m.error});
        continue;
      }
      const auto& e = *m.estimate;
      for (const auto& k : e.kernels)
        csv_row(models, {m.path, e.model, e.framework, e.step, k.id, std::to_string(k.count), k.measured ? "true" : "false",
                         k.measured ? axes_text(k.matched_axes) : "", k.measured ? (k.exact ? "true" : "false") : "",
                         k.measured ? num(k.baseline_ms) : "", k.measured ? num(k.best_ms) : "", k.best_solution,
                         k.measured ? num(k.speedup) : "", k.measured ? num(k.baseline_share) : "", k.reason});
    }
    files.emplace_back("models.csv", std::move(models));
  }
  return files;
}

// ---- HTML -------------------------------------------------------------------

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d232a;background:#fff}
header{background:#1f3b57;color:#fff;padding:14px 24px}header h1{margin:0;font-size:22px}
header a{color:#cfe3ff}nav{padding:8px 24px;background:#eef2f6;border-bottom:1px solid #d5dde6}
nav a{margin-right:14px}main{padding:8px 24px 40px}
h2{border-bottom:2px solid #1f3b57;padding-bottom:3px;margin-top:32px}h3{margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #c9d2dc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef2f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.s-PASSED{background:#e3f6e5}.s-fail{background:#fde4e1}.s-none{color:#8a949e}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{position:relative;width:560px;height:320px;border:1px solid #d5dde6;padding:6px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;border:1px solid #e1e6eb;padding:6px;margin:4px 0;max-height:360px;overflow:auto}
.entry{border:1px solid #c9d2dc;border-radius:4px;margin:10px 0;padding:8px 12px}.entry h3{margin:0 0 6px}
.role{font-weight:600;text-transform:uppercase;font-size:12px;color:#1f3b57}.muted{color:#5d6773}
)";

// The charts of a page as data, drawn by the script after Chart.js.
struct ChartSpec {
  std::string id, title, x_label, y_label;
  bool log_x = false, log_y = false, fraction = false;
  std::vector<Series> series;
};

constexpr const char* kDrawScript = R"(
(function () {
  var palette = ['#1f77b4','#d62728','#2ca02c','#9467bd','#ff7f0e','#17becf','#8c564b','#e377c2','#7f7f7f','#bcbd22'];
  var specs = JSON.parse(document.getElementById('kb-charts').textContent);
  specs.forEach(function (s) {
    var canvas = document.getElementById(s.id);
    var k = 0;
    var datasets = s.series.map(function (se) {
      var color = se.baseline ? '#222222' : palette[k++ % palette.length];
      return {label: se.label, data: se.points.map(function (p) { return {x: p[0], y: p[1]}; }),
              showLine: true, borderColor: color, backgroundColor: color, borderWidth: 2,
              borderDash: se.baseline ? [6, 4] : [], pointRadius: s.fraction ? 0 : 3, stepped: s.fraction ? 'after' : false};
    });
    var pct = function (v) { return Math.round(v * 100) + '%'; };
    new Chart(canvas, {type: 'scatter', data: {datasets: datasets}, options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      plugins: {title: {display: true, text: s.title}, legend: {position: 'bottom'}},
      scales: {
        x: {type: s.log_x ? 'logarithmic' : 'linear', title: {display: true, text: s.x_label}},
        y: {type: s.log_y ? 'logarithmic' : 'linear', beginAtZero: !s.log_y, min: s.fraction ? 0 : undefined,
            max: s.fraction ? 1 : undefined, title: {display: true, text: s.y_label},
            ticks: s.fraction ? {callback: pct} : {}}}}});
  });
})();
)";

std::string page_head(const Report& r, const std::string& subtitle) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(r.title) +
                    (subtitle.empty() ? "" : " - " + html_escape(subtitle)) + "</title>\n<style>" + kStyle + "</style>\n</head><body>\n";
  out += "<header><h1>" + html_escape(r.title) + (subtitle.empty() ? "" : ": " + html_escape(subtitle)) + "</h1>";
  out += "<div>pages: <a href=\"index.html\">kernels</a>";
  if (!r.models.empty()) out += " &middot; <a href=\"models.html\">model steps</a>";
  if (!r.agents.empty()) out += " &middot; <a href=\"agents.html\">agent traces</a>";
  out += "</div></header>\n";
  return out;
}

std::string charts_script(const std::vector<ChartSpec>& charts) {
  if (charts.empty()) return "";
  json::Writer w;
  w.begin_array();
  for (const auto& c : charts) {
    w.begin_object();
    w.key("id").string(c.id).key("title").string(c.title).key("x_label").string(c.x_label).key("y_label").string(c.y_label);
    w.key("log_x").boolean(c.log_x).key("log_y").boolean(c.log_y).key("fraction").boolean(c.fraction);
    w.key("series").begin_array();
    for (const auto& s : c.series) {
      w.begin_object().key("label").string(s.label).key("baseline").boolean(s.baseline).key("points").begin_array();
      for (const auto& [x, y] : s.points) w.begin_array().number(x).number(y).end_array();
      w.end_array().end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
  return std::string("<script>") + embedded_chart_js + "</script>\n<script type=\"application/json\" id=\"kb-charts\">" +
         script_safe_json(w.str()) + "</script>\n<script>" + kDrawScript + "</script>\n";
}

std::string canvas(const ChartSpec& c) {
  return "<div class=\"chart\"><canvas id=\"" + html_escape(c.id) + "\" role=\"img\" aria-label=\"" + html_escape(c.title) +
         "\"></canvas></div>\n";
}

ChartSpec fast_p_chart(std::string id, std::string title, const FastP& f) {
  ChartSpec c{std::move(id), std::move(title), "p (speedup threshold over the baseline)", "fraction of workloads", false, false, true, {}};
  for (const auto& [name, curve] : f.curves) {
    Series s{name, false, {}};
    for (std::size_t i = 0; i < f.p.size(); ++i) s.points.emplace_back(f.p[i], curve[i]);
    c.series.push_back(std::move(s));
  }
  return c;
}

std::string td(const std::string& text, bool numeric = false) {
  return std::string(numeric ? "<td class=\"num\">" : "<td>") + html_escape(text) + "</td>";
}
std::string th(const std::string& text) { return "<th>" + html_escape(text) + "</th>"; }

std::string anchor(std::size_t i) { return fmt::format("def-{}", i); }

std::string index_page(const Report& r) {
  std::vector<ChartSpec> charts;
  std::string out = page_head(r, "");
  out += "<nav>";
  out += "<a href=\"#summary\">summary</a><a href=\"#authors\">authors</a>";
  for (std::size_t i = 0; i < r.definitions.size(); ++i)
    out += "<a href=\"#" + anchor(i) + "\">" + html_escape(r.definitions[i].name) + "</a>";
  out += "</nav>\n<main>\n<h2 id=\"summary\">Summary</h2>\n";
  out += fmt::format("<p>{} trace records from {} files (", r.records, r.trace_files);
  for (std::size_t i = 0; i < r.trace_paths.size(); ++i) out += (i ? ", " : "") + std::string("<code>") + html_escape(r.trace_paths[i]) + "</code>";
  out += ").<br>Baseline: " + html_escape(baseline_text(r)) + ". Speedup: baseline / latency.</p>\n";
  out += "<table id=\"devices\"><tr><th>device</th><th>records</th></tr>";
  for (const auto& c : r.devices) out += "<tr>" + td(c.name) + td(std::to_string(c.records), true) + "</tr>";
  out += "</table>\n<table id=\"timing\"><tr><th>timing method</th><th>timed records</th></tr>";
  for (const auto& c : r.timing) out += "<tr>" + td(c.name) + td(std::to_string(c.records), true) + "</tr>";
  out += "</table>\n<table id=\"statuses\"><tr><th>status</th><th>records</th></tr>";
  for (const auto& c : r.statuses) out += "<tr>" + td(c.name) + td(std::to_string(c.records), true) + "</tr>";
  out += "</table>\n";

  out += "<h2 id=\"authors\">Authors</h2>\n<p>A workload is won by the author of its fastest PASSED solution; win "
         "rate: wins over the workloads the author entered. fast_p: the fraction of those workloads where the author's "
         "best solution PASSED and is faster than p &times; the baseline.</p>\n";
  out += "<table id=\"authors-table\"><tr>" + th("author") + th("solutions") + th("workloads entered") + th("passed") +
         th("wins") + th("win rate") + "</tr>";
  for (const auto& a : r.authors)
    out += "<tr>" + td(a.author) + td(std::to_string(a.solutions), true) + td(std::to_string(a.entered), true) +
           td(std::to_string(a.passed), true) + td(std::to_string(a.wins), true) + td(percent(a.win_rate), true) + "</tr>";
  out += "</table>\n";
  if (!r.authors.empty()) {
    charts.push_back(fast_p_chart("chart-authors-fast-p", "fast_p per author", r.author_fast_p));
    out += "<div class=\"charts\">" + canvas(charts.back()) + "</div>\n";
  }

  for (std::size_t di = 0; di < r.definitions.size(); ++di) {
    const DefinitionReport& d = r.definitions[di];
    out += "<section class=\"definition\" id=\"" + anchor(di) + "\" data-definition=\"" + html_escape(d.name) + "\">\n";
    out += "<h2>" + html_escape(d.name) + "</h2>\n<p class=\"muted\">";
    if (!d.op_type.empty()) out += "op type " + html_escape(d.op_type) + " &middot; ";
    out += fmt::format("{} workloads &middot; var axes: ", d.workloads.size());
    out += html_escape(d.var_axes.empty() ? std::string("none") : fmt::format("{}", fmt::join(d.var_axes, ", ")));
    out += " &middot; device: " + html_escape(fmt::format("{}", fmt::join(d.devices, ", "))) + "</p>\n";

    out += "<h3>Speedup against the baseline</h3>\n<table class=\"speedups\"><tr>" + th("solution") + th("author") +
           th("evaluated") + th("passed") + th("geomean speedup") + th("min") + th("max") + th("statuses") + "</tr>";
    for (const auto& s : d.solutions) {
      std::string st;
      for (const auto& [k, v] : s.statuses) st += fmt::format("{}{} {}", st.empty() ? "" : ", ", k, v);
      out += "<tr>" + td(s.name) + td(author_text(s.author)) + td(std::to_string(s.evaluated), true) +
             td(std::to_string(s.passed), true) + td(ratio(s.geomean_speedup), true) + td(ratio(s.min_speedup), true) +
             td(ratio(s.max_speedup), true) + td(st) + "</tr>";
    }
    out += "</table>\n<div class=\"charts\">\n";
    for (std::size_t ci = 0; ci < d.charts.size(); ++ci) {
      const AxisChart& ac = d.charts[ci];
      ChartSpec c{fmt::format("chart-{}-latency-{}", di, ci), "latency against " + ac.axis, ac.axis, "latency (ms)",
                  ac.log_x, false, false, ac.series};
      double lo = 0, hi = 0;
      for (const auto& s : ac.series)
        for (const auto& [x, y] : s.points) {
          lo = lo == 0 ? y : std::min(lo, y);
          hi = std::max(hi, y);
        }
      c.log_y = lo > 0 && hi > 8 * lo;
      charts.push_back(std::move(c));
      out += canvas(charts.back());
    }
    charts.push_back(fast_p_chart(fmt::format("chart-{}-fast-p", di), "fast_p", d.fast_p));
    out += canvas(charts.back()) + "</div>\n";

    out += "<h3>Status and latency (ms) by workload</h3>\n<table class=\"matrix\"><tr>" + th("solution");
    for (const auto& w : d.workloads) out += "<th title=\"" + html_escape(w.uuid) + "\">" + html_escape(axes_text(w.axes)) + "</th>";
    out += "</tr><tr>" + th("baseline");
    for (const auto& w : d.workloads) out += td(ms(w.baseline_ms), true);
    out += "</tr>";
    std::vector<std::string> failures;
    for (std::size_t s = 0; s < d.solutions.size(); ++s) {
      out += "<tr>" + th(d.solutions[s].name);
      for (std::size_t w = 0; w < d.workloads.size(); ++w) {
        const Cell& c = d.cells[s][w];
        if (!c.present) {
          out += "<td class=\"s-none\">-</td>";
          continue;
        }
        if (c.status == "PASSED") {
          out += "<td class=\"num s-PASSED\" title=\"" + html_escape(c.origin) + "\">" + html_escape(cell_short(c)) +
                 (c.speedup ? "<br><span class=\"muted\">" + html_escape(ratio(c.speedup)) + "</span>" : "") + "</td>";
        } else {
          failures.push_back("<li><b>" + html_escape(d.solutions[s].name) + "</b> at " + html_escape(axes_text(d.workloads[w].axes)) +
                             ": " + html_escape(c.status) + " <span class=\"muted\">(" + html_escape(c.origin) + ")</span><pre>" +
                             html_escape(c.message) + "</pre></li>");
          out += fmt::format("<td class=\"s-fail\" title=\"{}\">{} <a href=\"#{}-f{}\">[{}]</a></td>", html_escape(c.message),
                             html_escape(c.status), anchor(di), failures.size(), failures.size());
        }
      }
      out += "</tr>";
    }
    out += "</table>\n";
    if (!failures.empty()) {
      out += "<h3>Failure messages</h3>\n<ol class=\"failures\">";
      for (std::size_t i = 0; i < failures.size(); ++i)
        out += fmt::format("<span id=\"{}-f{}\"></span>", anchor(di), i + 1) + failures[i];
      out += "</ol>\n";
    }
    out += "</section>\n";
  }
  out += "</main>\n" + charts_script(charts) + "</body></html>\n";
  return out;
}

std::string models_page(const Report& r) {
  std::string out = page_head(r, "model steps");
  out += "<main>\n<p>Each calling record (how often each kernel runs in one model step) weighed with the traces by "
         "<code>kb estimate</code>: per kernel the recorded workload nearest to the call (~ where not exact), the "
         "baseline's and the fastest PASSED solution's latency there, times the count.</p>\n";
  for (const auto& m : r.models) {
    out += "<section class=\"model\"><h2>" + html_escape(m.record ? m.record->model : m.path) + "</h2>\n<p class=\"muted\">" +
           html_escape(m.path);
    if (m.record) {
      out += " &middot; " + html_escape(model::framework_name(m.record->framework));
      if (m.record->step) out += " &middot; step " + html_escape(*m.record->step);
      if (m.record->source) out += " &middot; source " + html_escape(*m.record->source);
    }
    out += "</p>\n";
    if (!m.error.empty()) {
      out += "<p>not estimated: " + html_escape(m.error) + "</p></section>\n";
      continue;
    }
    const auto& e = *m.estimate;
    if (e.measured)
      out += fmt::format("<p class=\"step\">{} of {} kernels measured{}: baseline {:.4f} ms, best {:.4f} ms, estimated step "
                         "speedup <b>{:.2f}x</b></p>\n",
                         e.measured, e.kernels.size(), e.hardware.empty() ? "" : " on " + html_escape(e.hardware),
                         e.baseline_ms, e.best_ms, e.speedup);
    else
      out += fmt::format("<p class=\"step\">no kernel of {} measured: no estimate</p>\n", e.kernels.size());
    out += "<table class=\"estimate\"><tr>" + th("kernel") + th("count") + th("call") + th("recorded workload") +
           th("baseline ms") + th("best ms") + th("best solution") + th("speedup") + th("share") + th("share'") +
           th("not measured because") + "</tr>";
    for (const auto& k : e.kernels) {
      out += "<tr>" + td(k.id) + td(std::to_string(k.count), true) + td(axes_text(k.axes));
      if (k.measured)
        out += td((k.exact ? "" : "~") + axes_text(k.matched_axes)) + td(ms(k.baseline_ms), true) + td(ms(k.best_ms), true) +
               td(k.best_solution) + td(ratio(k.speedup), true) + td(percent(k.baseline_share), true) +
               td(percent(k.best_share), true) + td("");
      else
        out += td("-") + td("-") + td("-") + td("-") + td("-") + td("-") + td("-") + td(k.reason);
      out += "</tr>";
    }
    out += "</table>\n<p class=\"muted\">share: of the step's baseline time; share': of its time with the best "
           "solutions.</p></section>\n";
  }
  out += "</main></body></html>\n";
  return out;
}

std::string message_html(const model::Message& m) {
  std::string out = "<div class=\"message\"><span class=\"role\">" + html_escape(model::role_name(m.role)) + "</span>";
  if (m.name) out += " <span class=\"muted\">" + html_escape(*m.name) + "</span>";
  if (m.tool_call_id) out += " <span class=\"muted\">answers " + html_escape(*m.tool_call_id) + "</span>";
  if (m.content) out += "<pre>" + html_escape(*m.content) + "</pre>";
  if (m.content_parts) out += "<pre>" + html_escape(*m.content_parts) + "</pre>";
  if (m.refusal) out += "<p>refusal: " + html_escape(*m.refusal) + "</p>";
  for (const auto& c : m.tool_calls)
    out += "<div class=\"tool-request\">calls <b>" + html_escape(c.name) + "</b> <span class=\"muted\">(" + html_escape(c.id) +
           ")</span><pre>" + html_escape(c.arguments) + "</pre></div>";
  return out + "</div>\n";
}

std::string agents_page(const Report& r) {
  std::string out = page_head(r, "agent traces");
  out += "<main>\n";
  for (const auto& a : r.agents) {
    out += "<section class=\"agent-trace\"><h2>" + html_escape(a.path) + "</h2>\n<p class=\"muted\">" +
           fmt::format("{} entries, ", a.trace.entries.size()) +
           (a.trace.form == model::AgentTrace::Form::conversation ? "conversation form" : "entry list form") + "</p>\n";
    std::size_t n = 0;
    for (const auto& entry : a.trace.entries) {
      ++n;
      if (const auto* q = std::get_if<model::LlmRequest>(&entry)) {
        out += fmt::format("<div class=\"entry llm-request\"><h3>{}. LLM request &middot; {}</h3>", n, html_escape(q->model));
        if (q->annotation) out += "<p class=\"muted\">" + html_escape(*q->annotation) + "</p>";
        for (const auto& m : q->conversation) out += message_html(m);
        if (q->response) {
          const auto& resp = *q->response;
          out += "<div class=\"response\"><h4>response &middot; " + html_escape(resp.model) + "</h4>";
          for (const auto& c : resp.choices) {
            out += message_html(c.message);
            if (c.finish_reason) out += "<p class=\"muted\">finish: " + html_escape(*c.finish_reason) + "</p>";
          }
          if (resp.usage)
            out += fmt::format("<p class=\"muted\">tokens: {} prompt, {} completion, {} total</p>", resp.usage->prompt_tokens,
                               resp.usage->completion_tokens, resp.usage->total_tokens);
          out += "</div>";
        }
        out += "</div>\n";
      } else if (const auto* t = std::get_if<model::ToolCall>(&entry)) {
        out += fmt::format("<div class=\"entry tool-call\"><h3>{}. Tool call &middot; {}</h3>", n, html_escape(t->tool_name));
        out += "<div>arguments</div><pre>" + html_escape(t->arguments) + "</pre><div>result</div><pre>" + html_escape(t->result) + "</pre>";
        if (t->cli_output) out += "<div>CLI output</div><pre>" + html_escape(*t->cli_output) + "</pre>";
        out += "</div>\n";
      } else if (const auto* mcp = std::get_if<model::Mcp>(&entry)) {
        out += fmt::format("<div class=\"entry mcp\"><h3>{}. MCP</h3><pre>{}</pre></div>\n", n, html_escape(mcp->json));
      }
    }
    out += "</section>\n";
  }
  out += "</main></body></html>\n";
  return out;
}

}  // namespace

Files to_html(const Report& r) {
  Files files;
  files.emplace_back("index.html", index_page(r));
  if (!r.models.empty()) files.emplace_back("models.html", models_page(r));
  if (!r.agents.empty()) files.emplace_back("agents.html", agents_page(r));
  return files;
}

Result<std::vector<std::string>> write_report(const Report& r, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create the folder: {}", dir, ec.message()));
  Files files = to_html(r);
  files.emplace_back("report.md", to_markdown(r));
  for (auto& f : to_csv(r)) files.push_back(std::move(f));
  files.emplace_back("report.json", to_json(r) + "\n");
  std::vector<std::string> written;
  for (const auto& [name, content] : files) {
    const fs::path path = fs::path(dir) / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) return make_error(Code::io_error, fmt::format("{}: cannot be written", path.string()));
    written.push_back(path.string());
  }
  return written;
}

}  // namespace kb::report
