// Stop strings (OpenAI's `stop`): generated text is released only once it
// cannot be the start of a stop string, and generation ends at the first one,
// which is left out of the text as OpenAI does. Pieces go in as the
// detokenizer completes them; what comes out is safe to send.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace th::server {

class StopStringFilter {
 public:
  /// @brief Empty strings in `stops` are ignored; no stops: everything passes at once.
  /// `keep_stop` (vLLM's include_stop_str_in_output): the text ends with the stop string.
  explicit StopStringFilter(std::vector<std::string> stops, bool keep_stop = false);

  /// @brief Appends `text`; returns the text that is now certain to be output (maybe empty).
  /// Once a stop string has completed, returns the text before it and nothing ever after.
  std::string push(std::string_view text);
  /// @brief The end of generation: the text still held back (nothing once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }
  /// @brief Bytes held back now (at most the longest stop string's length minus one).
  size_t held() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  bool keep_stop_ = false;
};

}  // namespace th::server
