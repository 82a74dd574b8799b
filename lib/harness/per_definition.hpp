// What a solution works out from a definition once (its supports() verdict,
// constants read from the reference text) and would otherwise redo on every
// call: reading the reference allocates, and an engine calling a kernel on
// its hot path must not pay for that. Kept per definition name and returned
// only while the definition is still equal to the one it was worked out for
// (Definition::operator==, which compares without allocating), so a changed
// definition of the same name is worked out afresh.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "schema/model.hpp"

namespace kb {

template <class T>
class PerDefinition {
 public:
  // make(d) the first time for this definition; a copy of the kept value after.
  template <class Make>
  T get(const Definition& d, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(std::string_view(d.name)); it != entries_.end() && it->second.first == d)
      return it->second.second;
    T value = std::forward<Make>(make)(d);
    entries_.insert_or_assign(d.name, std::pair<Definition, T>(d, value));
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<Definition, T>, std::less<>> entries_;
};

// The PerDefinition<T> of `key` (one solution: its supports function or its
// Implementation), created on first use. Map nodes never move, so the
// reference stays valid.
template <class Key, class T>
PerDefinition<T>& per_definition_of(Key key) {
  static std::mutex mutex;
  static std::map<Key, PerDefinition<T>> memos;
  std::lock_guard<std::mutex> lock(mutex);
  return memos[key];
}

}  // namespace kb
