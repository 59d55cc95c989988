// What the three tool-call parsers share (hermes_tool_parser.cpp, llama3_tool_parser.cpp,
// mistral_tool_parser.cpp): the extent of a JSON value in text that may still be growing, a
// call read from a parsed object, and the machine that splits text into content and call
// bodies at a marker. A format supplies only its marker and how its body reads.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_call_parser.h"

namespace th::server {

enum class JsonExtent : uint8_t { Complete, Incomplete, Invalid };

struct JsonScan {
  JsonExtent state = JsonExtent::Invalid;
  size_t end = 0;  // with Complete: one past the value's last byte
};

/// @brief Where the object or array starting at s[pos] ('{' or '[') ends, reading strings and
/// nesting only (the value's grammar is checked when it is parsed). Nesting deeper than
/// kMaxToolJsonDepth is Invalid, so the parse after it never recurses deeper.
JsonScan scan_json_value(std::string_view s, size_t pos);
inline constexpr int kMaxToolJsonDepth = 64;

/// @brief The JSON value s[from, to) parsed, or a discarded value when it does not parse.
nlohmann::ordered_json parse_tool_json(std::string_view s);

/// @brief A call from {"name": ..., <one of argument_keys>: {...} or a string holding an
/// object}: the name must be one of `functions`; absent arguments are "{}". False (and *out
/// untouched) otherwise.
bool read_tool_call(const nlohmann::ordered_json& obj, const std::vector<std::string>& functions,
                    std::initializer_list<const char*> argument_keys, ToolCall* out);

/// @brief A call body after the marker: not complete yet, read (with the bytes it took), or not a call.
struct ToolBody {
  enum State : uint8_t { NeedMore, Calls, Malformed } state = NeedMore;
  size_t consumed = 0;
  std::vector<ToolCall> calls{};
};

size_t skip_json_space(std::string_view s, size_t i);

/// @brief The content/body machine. Content is released except a tail that could begin the
/// marker; after the marker the body is held until parse_body says Calls (the calls go out,
/// and whitespace after them is dropped) or Malformed (the marker goes out as content and
/// the body is read again as content). With `bare_start`, output whose first non-blank byte
/// is '{' is read as a body without a marker (Llama 3.1's plain JSON calls).
class MarkedToolParser : public ToolCallParser {
 public:
  MarkedToolParser(std::string marker, bool bare_start, std::vector<std::string> functions)
      : marker_(std::move(marker)), bare_(bare_start), functions_(std::move(functions)) {}
  ToolParseStep push(std::string_view text) override;
  ToolParseStep finish() override;

 protected:
  /// @brief Reads the body at the start of `body`; with `final` no more text comes, so
  /// NeedMore is not an answer.
  virtual ToolBody parse_body(std::string_view body, bool final) const = 0;
  const std::vector<std::string>& functions() const { return functions_; }

 private:
  void run(ToolParseStep& out, bool final);

  const std::string marker_;
  bool bare_;                       // a body may start the output (until content is released)
  const std::vector<std::string> functions_;
  std::string buf_;                 // text not yet released
  bool in_body_ = false;            // buf_ starts a body
  bool marked_ = false;             // ... after the marker (else a bare start)
  bool drop_space_ = false;         // whitespace right after a call is not content
};

}  // namespace th::server
