// GBNF, llama.cpp's grammar text: `name ::= alternatives` rules, `|`, sequences,
// "literals" and [character classes] with escapes (\n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH), [^negated] classes with ranges, `.` (any character),
// (groups), and `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` comments. Newlines
// end a rule except inside parentheses and after `::=` or `|`. The rule named
// `root` is the start.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace th::grammar {

/// @brief The grammar `text` describes, or one line naming the first problem and where
/// ("line 3, column 7: expected '::='"). Bounded by `limits` however the text is written.
Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace th::grammar
