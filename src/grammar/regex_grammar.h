// Regular expressions (vLLM's guided_regex, JSON schema's "pattern") and
// choice lists (guided_choice) as GBNF. The regex subset: literals and
// escapes (\n \t \r \f \v \\ \. \uHHHH, ...), `.`, [classes] with ranges and
// negation, \d \w \s \D \W \S, groups ( ) (?: ) (?<name> ), `|`, and `*`,
// `+`, `?`, {m}, {m,}, {m,n} (lazy `?` suffixes accepted: they change which
// match a search finds, not which strings match). Refused, by name: back
// references, lookaround, word boundaries, anchors anywhere but at the ends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace th::grammar {

struct RegexOptions {
  // Inside a JSON string: `"` and `\` are written escaped (\" and \\), and control
  // characters are left out of classes and `.`, so every match is a valid JSON string body.
  bool json_string = false;
  int max_depth = 64;
};

/// @brief A GBNF expression (no rule name) matching what the whole `pattern` matches; a
/// leading ^ and trailing $ are dropped. `*anchored_start` / `*anchored_end` tell whether
/// they were there (JSON schema patterns search; guided_regex matches whole).
Result<std::string> regex_to_gbnf(std::string_view pattern, const RegexOptions& options, bool* anchored_start = nullptr,
                                  bool* anchored_end = nullptr);

/// @brief GBNF text whose root matches exactly one of `choices` (not empty).
Result<std::string> choice_to_gbnf(const std::vector<std::string>& choices);

}  // namespace th::grammar
