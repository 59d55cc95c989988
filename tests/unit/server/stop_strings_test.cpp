#include "server/stop_strings.h"

#include <gtest/gtest.h>

#include <random>

namespace th::server {
namespace {

// Feeds `pieces` and returns (released text, stopped).
std::pair<std::string, bool> run(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopStringFilter f(std::move(stops));
  std::string out;
  for (const std::string& p : pieces) out += f.push(p);
  out += f.flush();
  return {out, f.stopped()};
}

TEST(StopStringFilter, NoStopsPassesEverythingAtOnce) {
  StopStringFilter f({});
  EXPECT_EQ(f.push("hello"), "hello");
  EXPECT_EQ(f.held(), 0u);
  EXPECT_EQ(f.flush(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopStringFilter, StopInsideOnePieceCutsBeforeIt) {
  auto [out, stopped] = run({"END"}, {"abcENDdef"});
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(stopped);
}

TEST(StopStringFilter, StopSplitAcrossPiecesIsHeldThenCut) {
  StopStringFilter f({"\n\n"});
  EXPECT_EQ(f.push("one\n"), "one");  // "\n" might start the stop string
  EXPECT_EQ(f.held(), 1u);
  EXPECT_EQ(f.push("\ntwo"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("more"), "");
  EXPECT_EQ(f.flush(), "");
}

TEST(StopStringFilter, FalseStartIsReleased) {
  StopStringFilter f({"stop"});
  EXPECT_EQ(f.push("a st"), "a ");
  EXPECT_EQ(f.push("ar"), "star");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push("s"), "");
  EXPECT_EQ(f.flush(), "s");
}

TEST(StopStringFilter, EarliestOfSeveralStopsWins) {
  auto [out, stopped] = run({"cd", "b"}, {"abcd"});
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(stopped);
}

TEST(StopStringFilter, MultibyteStopNeverSplitsACharacter) {
  StopStringFilter f({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(f.push("caf\xC3\xA9"), "caf");
  EXPECT_EQ(f.push(" "), "\xC3\xA9 ");
}

// Against a plain reference: the text up to the first occurrence of any stop string,
// over random splits of random texts into pieces.
TEST(StopStringFilter, MatchesPlainSearchOnRandomSplits) {
  std::mt19937 rng(7);
  const std::vector<std::string> stops = {"ab", "bba", "c", "aaaa"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) text += "abcd"[rng() % (iter % 2 ? 2 : 4)];
    size_t first = std::string::npos;
    for (const std::string& s : stops) first = std::min(first, text.find(s));
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + rng() % 4;
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    auto [out, stopped] = run(stops, pieces);
    ASSERT_EQ(stopped, first != std::string::npos) << text;
    ASSERT_EQ(out, text.substr(0, first)) << text;
  }
}

}  // namespace
}  // namespace th::server

namespace th::server {
namespace {

// vLLM's include_stop_str_in_output: the text ends with the (earliest) stop string.
TEST(StopStringFilter, KeepStopEndsTheTextWithTheStopString) {
  StopStringFilter f({"END", "NE"}, /*keep_stop=*/true);
  std::string out = f.push("abcE");
  out += f.push("NDdef");
  out += f.flush();
  EXPECT_EQ(out, "abcEND");
  EXPECT_TRUE(f.stopped());
  StopStringFilter g({"xy"}, true);
  EXPECT_EQ(g.push("1xy2xy"), "1xy");
}

}  // namespace
}  // namespace th::server
