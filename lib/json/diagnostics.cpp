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

void Diagnostics::error(std::string origin, std::string path, std::string message) {
  items_.push_back({Severity::error, std::move(origin), std::move(path), std::move(message), {}});
}
void Diagnostics::warning(std::string origin, std::string path, std::string message, std::string category) {
  items_.push_back({Severity::warning, std::move(origin), std::move(path), std::move(message), std::move(category)});
}
void Diagnostics::note(std::string origin, std::string path, std::string message) {
  items_.push_back({Severity::note, std::move(origin), std::move(path), std::move(message), {}});
}

void Diagnostics::append(const Diagnostics& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

std::size_t Diagnostics::error_count() const {
  std::size_t n = 0;
  for (const auto& d : items_) n += d.severity == Severity::error;
  return n;
}
std::size_t Diagnostics::warning_count() const {
  std::size_t n = 0;
  for (const auto& d : items_) n += d.severity == Severity::warning;
  return n;
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
