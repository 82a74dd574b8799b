#include "json/diagnostics.hpp"

namespace kb {

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
  if (d.severity == Severity::error) {
    ++errors_;
    error_index_.push_back(items_.size());
  } else if (d.severity == Severity::warning) {
    ++warnings_;
  }
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
