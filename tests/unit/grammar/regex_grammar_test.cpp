#include "grammar/regex_grammar.h"

#include <random>
#include <regex>

#include <gtest/gtest.h>

#include "unit/grammar/grammar_test_util.h"

namespace th::grammar {
namespace {

using test::compile;
using test::matches;

std::shared_ptr<const Grammar> regex(const std::string& pattern) {
  Result<std::string> e = regex_to_gbnf(pattern, {});
  EXPECT_TRUE(e.ok()) << pattern << ": " << e.message();
  return e.ok() ? compile("root ::= " + *e + "\n") : nullptr;
}

// std::regex (ECMAScript) is the independent reference: every random string over a small
// alphabet matches the compiled grammar exactly when regex_match accepts it.
TEST(RegexGrammar, AgreesWithStdRegexOnRandomStrings) {
  const char* patterns[] = {
      "a|b",       "(ab)+c?",         "[a-c]{2,3}",     "\\d+(\\.\\d{1,2})?", "[^ab]*b",
      "(a|ab)(c|bcd)", "x{0}y{1,}z?", "(?:a.)*",        "[\\w-]+",          "\\s?\\S",
      "a{2}|b{3,}", "^(a|b)*abb$",   "[.]\\.+",        "(?<n>[a-b])c\\x41", "[\\-a]+",
  };
  const std::string alphabet = "abcdxyz019.-_ A\t";
  std::mt19937 rng(7);
  for (const char* p : patterns) {
    auto g = regex(p);
    std::string stripped = p;  // regex_match matches whole: the anchors are implied
    if (stripped.front() == '^') stripped = stripped.substr(1, stripped.size() - 2);
    for (size_t i = 0; i < stripped.size(); ++i)  // std::regex lacks named groups: plain ones
      if (stripped.compare(i, 5, "(?<n>") == 0) stripped.replace(i, 5, "(");
    const std::regex re(stripped, std::regex::ECMAScript);
    for (int k = 0; k < 3000; ++k) {
      std::string s;
      const int len = static_cast<int>(rng() % 7);
      for (int j = 0; j < len; ++j) s += alphabet[rng() % alphabet.size()];
      EXPECT_EQ(matches(g, s), std::regex_match(s, re)) << "pattern " << p << ", text '" << s << "'";
    }
  }
}

TEST(RegexGrammar, JsonStringModeEscapesQuotesAndDropsControls) {
  RegexOptions o;
  o.json_string = true;
  Result<std::string> e = regex_to_gbnf(".\"[\\\\x]", o);
  ASSERT_TRUE(e.ok()) << e.message();
  auto g = compile("root ::= " + *e + "\n");
  EXPECT_TRUE(matches(g, "a\\\"\\\\"));
  EXPECT_TRUE(matches(g, "\\\\\\\"x"));
  EXPECT_FALSE(matches(g, "a\"x"));
  EXPECT_FALSE(matches(g, "\x01\\\"x"));
}

TEST(RegexGrammar, RefusesWhatItCannotDo) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "back references"}, {"a(?=b)", "lookaround"}, {"\\bword", "boundaries"},
      {"a^b", "anchors"},            {"(a", "'(' without ')'"}, {"[a", "'[' without ']'"},
      {"*a", "nothing to repeat"},   {"a{,3}", "{m}, {m,} or {m,n}"}, {"a{1,1,3}", "{m}, {m,} or {m,n}"}, {"a**", "repetition of a repetition"},
      {"a)", "unexpected ')'"},      {"\\", "cannot end with"},       {"a\xF6\xF6\xF6\xF6", "invalid UTF-8"},
      {"\xED\xA0\x80", "invalid UTF-8"},  {"(a?)*", "can match nothing"}, {"(()|b)+", "can match nothing"},
  };
  for (const auto& [p, why] : cases) {
    Result<std::string> e = regex_to_gbnf(p, {});
    ASSERT_FALSE(e.ok()) << p;
    EXPECT_NE(e.message().find(why), std::string::npos) << p << " -> " << e.message();
  }
}

TEST(RegexGrammar, Choices) {
  Result<std::string> c = choice_to_gbnf({"yes", "no", "maybe \"so\"", "日本"});
  ASSERT_TRUE(c.ok());
  auto g = compile(*c);
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "maybe \"so\""));
  EXPECT_TRUE(matches(g, "日本"));
  EXPECT_FALSE(matches(g, "ye"));
  EXPECT_FALSE(matches(g, "yesno"));
  EXPECT_FALSE(choice_to_gbnf({}).ok());
}

}  // namespace
}  // namespace th::grammar
