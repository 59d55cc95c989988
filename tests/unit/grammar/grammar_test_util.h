// Shared by the grammar tests: compile GBNF (failing the test on an error) and match.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace th::grammar::test {

inline std::shared_ptr<const Grammar> compile(std::string_view gbnf) {
  Result<Grammar> g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.message() << "\n" << gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

/// @brief The whole of `text` is a sentence of `g`.
inline bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  Matcher m(g);
  return m.accept(text) && m.complete();
}

/// @brief `text` can be continued into a sentence of `g` (or is one).
inline bool prefix_ok(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text);
}

}  // namespace th::grammar::test
