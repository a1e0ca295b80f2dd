#include "deepinfer/engine/stop_checker.h"

#include <algorithm>

namespace deepinfer::engine {

void StopChecker::push(std::string_view text) {
  if (matched() || text.empty()) return;
  const size_t old_size = text_.size();
  text_.append(text);
  for (const std::string& s : stops_) {
    // A new match must end inside the new text.
    const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos && at < match_) match_ = at;
  }
}

size_t StopChecker::held_back_length() const {
  size_t best = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, text_.size() - released_);
    for (size_t len = max_len; len > best; --len) {
      if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

std::string StopChecker::release(bool final) {
  size_t end;
  if (matched()) {
    end = final ? match_ : std::min(match_, text_.size());
  } else {
    end = final ? text_.size() : text_.size() - held_back_length();
  }
  if (end <= released_) return {};
  std::string out = text_.substr(released_, end - released_);
  released_ = end;
  return out;
}

}  // namespace deepinfer::engine
