#include "schema/model.hpp"

namespace kb {

namespace {
template <class T>
const T* find_named(const std::vector<T>& v, std::string_view n) {
  for (const auto& x : v)
    if (x.name == n) return &x;
  return nullptr;
}
template <class T>
const T* find_pair(const std::vector<std::pair<std::string, T>>& v, std::string_view n) {
  for (const auto& [k, x] : v)
    if (k == n) return &x;
  return nullptr;
}
constexpr std::string_view kStatusNames[] = {
    "PASSED",        "INCORRECT_SHAPE", "INCORRECT_DTYPE", "INCORRECT_NUMERICAL",
    "RUNTIME_ERROR", "COMPILE_ERROR",   "TIMEOUT",
};
}  // namespace

const Axis* Definition::find_axis(std::string_view n) const { return find_named(axes, n); }
const TensorSpec* Definition::find_input(std::string_view n) const { return find_named(inputs, n); }
const TensorSpec* Definition::find_output(std::string_view n) const { return find_named(outputs, n); }
const TensorSpec* Definition::find_tensor(std::string_view n) const {
  const TensorSpec* t = find_input(n);
  return t ? t : find_output(n);
}

bool Definition::operator==(const Definition& o) const {
  return name == o.name && op_type == o.op_type && axes == o.axes && inputs == o.inputs &&
         outputs == o.outputs && reference == o.reference && tags == o.tags &&
         description == o.description && constraints == o.constraints;
}

const std::int64_t* Workload::find_axis(std::string_view n) const { return find_pair(axes, n); }
const InputSpec* Workload::find_input(std::string_view n) const { return find_pair(inputs, n); }

std::string_view eval_status_name(EvalStatus s) noexcept {
  auto i = static_cast<std::size_t>(s);
  return i < std::size(kStatusNames) ? kStatusNames[i] : "?";
}

std::optional<EvalStatus> eval_status_from_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < std::size(kStatusNames); ++i)
    if (kStatusNames[i] == s) return static_cast<EvalStatus>(i);
  return std::nullopt;
}

}  // namespace kb
