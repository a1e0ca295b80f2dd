// Stop strings over streamed text: finds the first stop string, and holds back only the tail
// that could still turn into one, so streamed text never has to be taken back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::engine {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {}

  // Appends newly decoded text. After a match, further text is ignored.
  void push(std::string_view text);
  bool matched() const { return match_ != std::string::npos; }
  // Text that is safe to hand out now and was not handed out before. With `final`, everything
  // that remains (up to the match, if any).
  std::string release(bool final);

 private:
  // Length of the longest suffix of text_ (after `from`) that is a proper prefix of a stop string.
  size_t held_back_length() const;

  std::vector<std::string> stops_;
  std::string text_;
  size_t released_ = 0;
  size_t match_ = std::string::npos;
};

}  // namespace deepinfer::engine
