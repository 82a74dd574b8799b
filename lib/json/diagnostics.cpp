#include "json/diagnostics.hpp"

#include <fmt/format.h>

#include "common/printable.hpp"

namespace kb {
namespace {

// "file:12" -> "file"; "file" stays.
std::string_view file_of(std::string_view origin) {
  const auto colon = origin.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == origin.size()) return origin;
  for (char c : origin.substr(colon + 1))
    if (c < '0' || c > '9') return origin;
  return origin.substr(0, colon);
}

}  // namespace

std::string Diagnostic::to_string() const {
  std::string out;
  if (!origin.empty()) out += origin + ": ";
  if (severity == Severity::warning) out += "warning: ";
  if (severity == Severity::note) out += "note: ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

void Diagnostics::add(Diagnostic d) {
  if (d.severity == Severity::error) ++errors_;
  else if (d.severity == Severity::warning) ++warnings_;
  const std::string_view file = file_of(d.origin);
  auto it = files_.find(file);
  if (it == files_.end()) it = files_.emplace(std::string(file), FileCount{}).first;
  FileCount& count = it->second;
  if (!d.category.empty()) ++categories_[{d.category, it->first}];
  std::size_t& kept = d.severity == Severity::error ? count.kept_errors : count.kept_others;
  if (kept >= kMaxPerFile) {
    // A warning or note of a category is counted there (category_counts),
    // which is how printers report such groups; the count line stands for the others.
    if (!d.category.empty() && d.severity != Severity::error) return;
    if (count.dropped++ == 0) {
      count.line = items_.size();
      items_.push_back({Severity::warning, {}, {}, {}, "more-problems"});
    }
    Diagnostic& line = items_[count.line];
    // The count line is an error when any problem it stands for is.
    if (d.severity == Severity::error) line.severity = Severity::error;
    line.message = fmt::format("... and {} more problem{} in {}", count.dropped, count.dropped == 1 ? "" : "s",
                               escape_controls(cut_text(it->first, kMessageMaxBytes)));
    if (d.severity == Severity::error) error_index_.push_back(count.line);
    return;
  }
  ++kept;
  // An origin is a path (or path:line), never cut by words: only escaped.
  d.origin = escape_controls(cut_text(d.origin, kMessageMaxBytes));
  d.path = printable(d.path);
  d.message = printable(d.message);
  if (d.severity == Severity::error) error_index_.push_back(items_.size());
  items_.push_back(std::move(d));
}

void Diagnostics::error(std::string origin, std::string path, std::string message) {
  add({Severity::error, std::move(origin), std::move(path), std::move(message), {}});
}
void Diagnostics::warning(std::string origin, std::string path, std::string message, std::string category) {
  add({Severity::warning, std::move(origin), std::move(path), std::move(message), std::move(category)});
}
void Diagnostics::note(std::string origin, std::string path, std::string message) {
  add({Severity::note, std::move(origin), std::move(path), std::move(message), {}});
}

void Diagnostics::append(const Diagnostics& other) {
  for (const auto& d : other.items_) add(d);
}

std::map<std::string, std::size_t> Diagnostics::category_counts(std::string_view category) const {
  std::map<std::string, std::size_t> out;
  for (const auto& [key, n] : categories_)
    if (key.first == category) out[escape_controls(cut_text(key.second, kMessageMaxBytes))] += n;
  return out;
}

std::string Diagnostics::error_after(std::size_t errors_before) const {
  if (errors_before >= error_index_.size()) return {};
  return items_[error_index_[errors_before]].to_string();
}

std::string Diagnostics::first_error() const {
  for (const auto& d : items_)
    if (d.severity == Severity::error) return d.to_string();
  return {};
}

std::string Diagnostics::errors_text() const {
  std::string out;
  for (const auto& d : items_) {
    if (d.severity != Severity::error) continue;
    if (!out.empty()) out += '\n';
    out += d.to_string();
  }
  return out;
}

}  // namespace kb
