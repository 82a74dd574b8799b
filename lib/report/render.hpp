// The printers of a Report (report.hpp): HTML pages, markdown, CSV tables and JSON, each laying
// out the same record. Every string that comes from a trace, a record or an agent trace is escaped
// for the format it lands in (HTML text and attributes, JSON inside <script>, markdown table cells,
// CSV fields): a solution named "<script>" renders as text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "report/report.hpp"

namespace kb::report {

using Files = std::vector<std::pair<std::string, std::string>>;  // (file name, content)

// The report as JSON (the whole record), pretty or one line.
std::string to_json(const Report& r, bool pretty = true);
// report.md: every table of the HTML pages (fast_p as a table of p by solution).
std::string to_markdown(const Report& r);
// results.csv (one row per solution and workload), solutions.csv, authors.csv, fast_p.csv, and
// models.csv when there are model pages.
Files to_csv(const Report& r);
// index.html (devices, method, authors, per definition: speedups, latency charts, fast_p, status
// matrix with the failure messages), models.html and agents.html when there are calling records or
// agent traces. Each page stands alone: styles and the charting library (Chart.js, embedded into
// kb at build time) are inlined, nothing is fetched when it is viewed.
Files to_html(const Report& r);

// Writes every file above into `dir` (created if missing). Returns the names written.
Result<std::vector<std::string>> write_report(const Report& r, const std::string& dir);

// Escapes for HTML text and attribute values (& < > " ').
std::string html_escape(std::string_view s);
// JSON text made safe inside <script>: '<', '>' and '&' become \u003c, \u003e, \u0026 (JSON
// strings are the only place they can occur, where the escapes read back the same).
std::string script_safe_json(std::string_view json);

// The Chart.js build kb inlines (embedded at build time from third_party/chart.js).
extern const char* const embedded_chart_js;

}  // namespace kb::report
