#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include "unit/grammar/grammar_test_util.h"

namespace th::grammar {
namespace {

using test::compile;
using test::matches;
using test::prefix_ok;

constexpr const char* kArithmetic = R"g(
# arithmetic, as llama.cpp's grammars/arithmetic.gbnf describes it
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";

TEST(GbnfParser, ArithmeticAcceptsAndRejects) {
  auto g = compile(kArithmetic);
  EXPECT_TRUE(matches(g, "1+2=3\n"));
  EXPECT_TRUE(matches(g, "(a +b2)*c = 42\nx=1\n"));  // ws follows terms only
  EXPECT_FALSE(matches(g, "1+2=3"));      // the newline is required
  EXPECT_FALSE(matches(g, "1++2=3\n"));   // two operators
  EXPECT_FALSE(matches(g, "(1=2\n"));     // unbalanced
  EXPECT_FALSE(matches(g, "A=1\n"));      // identifiers are lower case
  EXPECT_TRUE(prefix_ok(g, "(a +"));
  EXPECT_FALSE(prefix_ok(g, "(a +)"));
}

TEST(GbnfParser, LiteralsClassesAndEscapes) {
  auto g = compile(R"(root ::= "\x41\u00e9\U0001F600\n\"\\" [^a-c\]] "é" [α-ω]+)");
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\n\"\\dé\xCE\xB1\xCF\x89"));
  EXPECT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\n\"\\bé\xCE\xB1"));  // b is in a-c
  EXPECT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\n\"\\]é\xCE\xB1"));  // ] is negated
  EXPECT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\n\"\\dé"));          // + needs one
  // A negated class takes whole characters of any length, never a surrogate or a bare byte.
  auto any = compile("root ::= [^x]{2}");
  EXPECT_TRUE(matches(any, "\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(any, "\xED\xA0\x80" "a"));  // an encoded surrogate
  EXPECT_FALSE(matches(any, "\x80" "a"));
  EXPECT_TRUE(matches(compile("root ::= . ."), "\n\xC3\xA9"));
}

TEST(GbnfParser, Repetitions) {
  auto g = compile("root ::= \"ab\"{2,3} [0-9]? (\"x\" | \"y\"){1,} \"z\"{2}");
  EXPECT_TRUE(matches(g, "ababxzz"));
  EXPECT_TRUE(matches(g, "ababab7yxyzz"));
  EXPECT_FALSE(matches(g, "abxzz"));         // ab at least twice
  EXPECT_FALSE(matches(g, "abababababxzz"));  // at most three times
  EXPECT_FALSE(matches(g, "ababzz"));         // x|y at least once
  EXPECT_FALSE(matches(g, "ababxz"));
  auto exact = compile("root ::= [a]{0} \"b\"{3,3}");
  EXPECT_TRUE(matches(exact, "bbb"));
  EXPECT_FALSE(matches(exact, "abbb"));
}

TEST(GbnfParser, MultiLineRulesAndGroups) {
  auto g = compile("root ::=\n  item (\n    \",\" item\n  )*\n\nitem ::= \"a\" |\n  \"b\" # comment\n");
  EXPECT_TRUE(matches(g, "a,b,a"));
  EXPECT_FALSE(matches(g, "a,"));
  auto empty = compile("root ::= \"\" | \"x\"");
  EXPECT_TRUE(matches(empty, ""));
  EXPECT_TRUE(matches(empty, "x"));
}

TEST(GbnfParser, RightRecursionStaysShallow) {
  // 10000 items through a right-recursive rule: the tail call keeps the stack at one node.
  auto g = compile("root ::= \"a\" root | \"\"");
  EXPECT_TRUE(matches(g, std::string(10000, 'a')));
}

struct BadGrammar {
  const char* text;
  const char* message;
};

TEST(GbnfParser, BadGrammarsSayWhatAndWhere) {
  const BadGrammar cases[] = {
      {"", "there is no rule 'root'"},
      {"rot ::= \"a\"", "there is no rule 'root'"},
      {"root ::= item", "rule 'item' is used but not defined"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
      {"root ::= x\nx ::= \"e\"? root", "left-recursive"},
      {"root ::= (\"a\"?)*", "can match nothing"},
      {"root ::= \"abc", "line 1, column 14: a literal is not closed"},
      {"root ::= [abc", "a character class is not closed"},
      {"root ::= \"\\q\"", "unknown escape '\\q'"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 10: rule 'root' is defined twice"},
      {"root = \"a\"", "expected '::=' after rule name 'root'"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root ::= \"a\"{2,1}", "out of range"},
      {"root ::= \"a\"{5000}", "out of range"},
      {"root ::= \"a\"{99999999999}", "too large"},
      {"root ::= \"a\"**", "a repetition must follow an item"},
      {"root ::= [z-a]", "runs backwards"},
      {"root ::= \"\\xZZ\"", "expected a hex digit"},
      {"root ::= \"\\U00110000\"", "above U+10FFFF"},
      {"root ::= \"\xFF\"", "invalid UTF-8"},
      {"root ::= \"\xF6\x80\x80\x80\"", "invalid UTF-8"},
      {"root ::= \"a\" b ::= \"c\"", "a newline is missing"},
      {"root ::= | @", "unexpected '@'"},
      {"root ::= \"\\\n\"", "unknown escape '\\?'"},  // a control character echoed as '?'
      {"root ::= \"a\" \xF6", "unexpected '?'"},
  };
  for (const BadGrammar& c : cases) {
    Result<Grammar> g = parse_gbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_NE(g.message().find(c.message), std::string::npos) << c.text << " -> " << g.message();
    EXPECT_EQ(g.message().find('\n'), std::string::npos) << g.message();
  }
}

TEST(GbnfParser, LimitsBoundTheExpansion) {
  // A few kilobytes of text that would expand to 600000 elements.
  std::string big = "root ::=";
  for (int i = 0; i < 600; ++i) big += " \"a\"{1000}";
  Result<Grammar> g = parse_gbnf(big);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("too large"), std::string::npos) << g.message();
  GrammarLimits small;
  small.max_text_bytes = 8;
  EXPECT_FALSE(parse_gbnf("root ::= \"abcdef\"", small).ok());
  std::string deep = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  Result<Grammar> d = parse_gbnf(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("nest deeper"), std::string::npos) << d.message();
}

}  // namespace
}  // namespace th::grammar
