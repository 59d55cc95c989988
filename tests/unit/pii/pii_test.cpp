#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "pii/pii_recognizers.h"
#include "pii/pii_redactor.h"

namespace th::pii {
namespace {

// ---- the corpus: tests/data/pii/corpus.tsv -------------------------------------------------

struct CorpusRow {
  PiiKind kind;
  std::string text;
  std::vector<std::string> expected;  // empty: a near-miss
};

PiiKind kind_named(const std::string& name) {
  for (int k = 0; k < kPiiKindCount; ++k)
    if (pii_kind_name(static_cast<PiiKind>(k)) == name) return static_cast<PiiKind>(k);
  ADD_FAILURE() << "unknown kind " << name;
  return PiiKind::kEmail;
}

std::vector<CorpusRow> load_corpus() {
  std::ifstream in(std::string(TH_SOURCE_DIR) + "/tests/data/pii/corpus.tsv");
  EXPECT_TRUE(in) << "cannot open tests/data/pii/corpus.tsv";
  std::vector<CorpusRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    EXPECT_NE(t2, std::string::npos) << line;
    CorpusRow row{kind_named(line.substr(0, t1)), line.substr(t1 + 1, t2 - t1 - 1), {}};
    std::string exp = line.substr(t2 + 1);
    for (size_t at = 0; !exp.empty() && at <= exp.size();) {
      const size_t bar = std::min(exp.find('|', at), exp.size());
      row.expected.push_back(exp.substr(at, bar - at));
      at = bar + 1;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

struct Counts {
  int tp = 0, fp = 0, fn = 0, positives = 0, near_misses = 0;
  double precision() const { return tp + fp == 0 ? 1.0 : double(tp) / (tp + fp); }
  double recall() const { return tp + fn == 0 ? 1.0 : double(tp) / (tp + fn); }
};

// Matches found vs expected, as multisets of matched strings.
void score(const CorpusRow& row, const std::vector<PiiSpan>& spans, PiiKind kind, Counts& c) {
  std::multiset<std::string> want(row.expected.begin(), row.expected.end());
  for (const PiiSpan& s : spans) {
    if (s.kind != kind) continue;
    auto it = want.find(row.text.substr(s.begin, s.end - s.begin));
    if (it != want.end()) {
      ++c.tp;
      want.erase(it);
    } else {
      ++c.fp;
      ADD_FAILURE() << pii_kind_name(kind) << " false positive '" << row.text.substr(s.begin, s.end - s.begin)
                    << "' in: " << row.text;
    }
  }
  c.fn += static_cast<int>(want.size());
  for (const std::string& w : want)
    ADD_FAILURE() << pii_kind_name(kind) << " missed '" << w << "' in: " << row.text;
}

// Each recognizer alone on its rows. Thresholds: precision and recall 1.0 on this corpus
// (every row is a rule the recognizer states; a miss is a bug, not noise).
TEST(PiiCorpus, PrecisionAndRecallPerRecognizer) {
  const std::vector<CorpusRow> rows = load_corpus();
  ASSERT_GE(rows.size(), 150u);
  std::map<PiiKind, Counts> by_kind;
  Counts all;
  for (const CorpusRow& row : rows) {
    Counts& c = by_kind[row.kind];
    (row.expected.empty() ? c.near_misses : c.positives) += 1;
    score(row, find_pii(row.text, pii_bit(row.kind)), row.kind, c);
  }
  std::printf("%-6s %9s %11s %4s %4s %4s %9s %6s\n", "kind", "positives", "near-misses", "tp", "fp", "fn", "precision",
              "recall");
  for (const auto& [kind, c] : by_kind) {
    std::printf("%-6s %9d %11d %4d %4d %4d %9.3f %6.3f\n", std::string(pii_kind_name(kind)).c_str(), c.positives,
                c.near_misses, c.tp, c.fp, c.fn, c.precision(), c.recall());
    all.tp += c.tp, all.fp += c.fp, all.fn += c.fn, all.positives += c.positives, all.near_misses += c.near_misses;
    EXPECT_GE(c.positives, 7) << pii_kind_name(kind);
    EXPECT_GE(c.near_misses, 10) << pii_kind_name(kind);
    EXPECT_GE(c.precision(), 1.0) << pii_kind_name(kind);
    EXPECT_GE(c.recall(), 1.0) << pii_kind_name(kind);
  }
  std::printf("%-6s %9d %11d %4d %4d %4d %9.3f %6.3f\n", "all", all.positives, all.near_misses, all.tp, all.fp, all.fn,
              all.precision(), all.recall());
  EXPECT_EQ(by_kind.size(), static_cast<size_t>(kPiiKindCount));
}

// All recognizers at once: every expected value is still found as its kind (no other kind
// takes it over), and near-misses stay unmasked by any kind's match of that row's shape.
TEST(PiiCorpus, AllKindsTogetherKeepEachRowsAnswer) {
  Counts c;
  for (const CorpusRow& row : load_corpus()) score(row, find_pii(row.text), row.kind, c);
  EXPECT_EQ(c.fp, 0);
  EXPECT_EQ(c.fn, 0);
}

// ---- the scan ------------------------------------------------------------------------------

TEST(PiiScan, MixedTextMasksEveryKind) {
  const std::string text =
      "Hi, I'm Li Wei (liwei@example.cn, 电话13812345678). My ID is 11010519491231002X; card 4111 1111 1111 1111, "
      "IBAN DE89 3704 0044 0532 0130 00. Server 10.0.0.1 / 2001:db8::1. Version 1.2.3.4.5 costs $12.99 at 12:30.";
  Redactor r;
  EXPECT_EQ(r.redact(text),
            "Hi, I'm Li Wei ([EMAIL], 电话[PHONE]). My ID is [CN_ID]; card [CARD], IBAN [IBAN]. Server [IPV4] / "
            "[IPV6]. Version 1.2.3.4.5 costs $12.99 at 12:30.");
}

TEST(PiiScan, SpansAreOrderedAndDisjoint) {
  const std::string text = "a@b.co 13812345678 8.8.8.8 +44 20 7946 0958 x@y.io";
  const std::vector<PiiSpan> spans = find_pii(text);
  ASSERT_EQ(spans.size(), 5u);
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].end, spans[i].begin);
  EXPECT_EQ(spans[0], (PiiSpan{0, 6, PiiKind::kEmail}));
  EXPECT_EQ(spans[3].kind, PiiKind::kPhone);
}

TEST(PiiScan, LongestMatchWinsThenTieOrder) {
  // A QQ address whose local part is a mobile number: the e-mail is longer.
  EXPECT_EQ(find_pii("13812345678@qq.com"), (std::vector<PiiSpan>{{0, 18, PiiKind::kEmail}}));
  // Restricting kinds leaves the shorter match.
  EXPECT_EQ(find_pii("13812345678@qq.com", pii_bit(PiiKind::kPhone)),
            (std::vector<PiiSpan>{{0, 11, PiiKind::kPhone}}));
  EXPECT_TRUE(find_pii("13812345678@qq.com", 0).empty());
}

TEST(PiiScan, NonFinalScanStopsAtTheFirstUndecidedPosition) {
  // "john" could still become john@x.com.
  PiiScan s = scan_pii("hello john", 0, false);
  EXPECT_EQ(s.decided, 6u);
  // A full stop after a number could still be a decimal point.
  s = scan_pii("call 13812345678.", 0, false);
  EXPECT_EQ(s.decided, 5u);
  s = scan_pii("call 13812345678. ", 0, false);
  EXPECT_EQ(s.decided, 18u);
  ASSERT_EQ(s.spans.size(), 1u);
  EXPECT_EQ(s.spans[0], (PiiSpan{5, 16, PiiKind::kPhone}));
  // Bytes that cannot start anything are decided at once.
  s = scan_pii("你好，", 0, false);
  EXPECT_EQ(s.decided, std::string("你好，").size());
}

TEST(PiiScan, HoldBackBoundsAreStated) {
  EXPECT_EQ(pii_hold_back_bound(), 319u);
  EXPECT_EQ(pii_hold_back_bound(pii_bit(PiiKind::kEmail)), 319u);
  EXPECT_LE(pii_hold_back_bound(kAllPiiKinds & ~pii_bit(PiiKind::kEmail)), 50u);
  EXPECT_EQ(pii_hold_back_bound(pii_bit(PiiKind::kCnId)), 20u);
  EXPECT_EQ(pii_hold_back_bound(0), 0u);
}

// ---- streaming -----------------------------------------------------------------------------

std::string stream(Redactor& r, const std::vector<std::string_view>& pieces, size_t bound, size_t* max_held) {
  StreamingRedactor s(r);
  std::string out;
  for (std::string_view p : pieces) {
    out += s.push(p);
    if (max_held) *max_held = std::max(*max_held, s.held());
    EXPECT_LE(s.held(), bound);
  }
  return out + s.flush();
}

std::vector<std::string> streaming_texts() {
  std::vector<std::string> texts = {
      "Hi, I'm Li Wei (liwei@example.cn, 电话13812345678). My ID is 11010519491231002X; card 4111 1111 1111 1111, "
      "IBAN DE89 3704 0044 0532 0130 00. Server 10.0.0.1 / 2001:db8::1. Version 1.2.3.4.5 costs $12.99.",
      "+1 (415) 555-2671, +44 (0)20 7946 0958; 138-1234-5678 and 138 1234 5678 or 13812345678,13987654321.",
      "fe80::1ff:fe23:4567:890a [2001:db8::ff00:42:8329]:443 ::ffff:192.0.2.128 12:30:45 std::vector",
      "a@b.co.uk. x..y@z.com first.last%x@example.io,second@example.dev 3782 822463 10005 6212 3456 7890 1234 007",
  };
  std::string corpus;
  for (const CorpusRow& row : load_corpus()) corpus += row.text + (corpus.size() % 3 ? "\n" : " ");
  texts.push_back(corpus);
  return texts;
}

TEST(StreamingRedactor, EverySplitPointEqualsWholeText) {
  for (RedactMode mode : {RedactMode::kMask, RedactMode::kPseudonymize}) {
    for (const std::string& text : streaming_texts()) {
      Redactor whole_r({mode});
      const std::string whole = whole_r.redact(text);
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        Redactor r({mode});
        const std::string_view sv(text);
        ASSERT_EQ(stream(r, {sv.substr(0, cut), sv.substr(cut)}, pii_hold_back_bound(), nullptr), whole)
            << "cut at " << cut;
      }
    }
  }
}

TEST(StreamingRedactor, RandomMultiSplitsAndByteByByteEqualWholeText) {
  std::mt19937 rng(1234);
  for (const std::string& text : streaming_texts()) {
    for (PiiKinds kinds : {kAllPiiKinds, pii_bit(PiiKind::kPhone) | pii_bit(PiiKind::kCard), PiiKinds{0}}) {
      Redactor whole_r({RedactMode::kPseudonymize, kinds});
      const std::string whole = whole_r.redact(text);
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<std::string_view> pieces;
        const std::string_view sv(text);
        const size_t max_piece = trial == 0 ? 1 : 1 + rng() % 24;
        for (size_t at = 0; at < sv.size();) {
          const size_t n = trial == 0 ? 1 : rng() % (max_piece + 1);  // empty pieces too
          pieces.push_back(sv.substr(at, n));
          at += n;
        }
        Redactor r({RedactMode::kPseudonymize, kinds});
        ASSERT_EQ(stream(r, pieces, pii_hold_back_bound(kinds), nullptr), whole) << "trial " << trial;
      }
    }
  }
}

TEST(StreamingRedactor, HoldsBackOnlyTheWordBeingWritten) {
  Redactor r;
  StreamingRedactor s(r);
  EXPECT_EQ(s.push("The quick brown "), "The quick brown ");
  EXPECT_EQ(s.push("fox"), "");  // fox@... is still possible
  EXPECT_EQ(s.held(), 3u);
  EXPECT_EQ(s.push(" jumps, 你好"), "fox jumps, 你好");
  EXPECT_EQ(s.push("mail me: ann"), "mail me: ");
  EXPECT_EQ(s.push("@example.com"), "");
  EXPECT_EQ(s.push(" thanks"), "[EMAIL] ");  // thanks@... is still possible
  EXPECT_EQ(s.flush(), "thanks");
}

TEST(StreamingRedactor, WholeCharactersInGiveWholeCharactersOut) {
  // Pieces as a detokenizer gives them: whole UTF-8 characters. Every release point is a
  // candidate's first byte (ASCII) or the end of what came in, so no output splits one.
  const std::string text = "联系张三：zhang.san@例子.com，电话１３８ 13812345678，卡号4111111111111111。";
  Redactor r;
  StreamingRedactor s(r);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    const std::string piece = s.push(std::string_view(text).substr(i, n));
    if (!piece.empty()) {
      const auto last = static_cast<unsigned char>(piece.back());
      EXPECT_FALSE(last >= 0xc0) << "output ends inside a character";
      EXPECT_FALSE((static_cast<unsigned char>(piece.front()) & 0xc0) == 0x80) << "output starts inside a character";
    }
    out += piece;
    i += n;
  }
  out += s.flush();
  EXPECT_EQ(out, "联系张三：zhang.san@例子.com，电话１３８ [PHONE]，卡号[CARD]。");
}

TEST(StreamingRedactor, AdversarialHoldBackStaysWithinTheBound) {
  // The longest reads: a 64-byte local part and a long domain; long digit runs; long groups.
  const std::string local(64, 'a');
  std::string domain;
  while (domain.size() < 250) domain += "abcdefghi.";
  const std::vector<std::string> texts = {
      local + "@" + domain + "com and more",
      local + "@" + domain + domain + " and more",
      std::string(300, '1') + " " + std::string(300, 'a'),
      "+1 (2) 3 (4) 5-6.7 8 9 1 2 3 4 5 6 7 8 9 1 2",
      "4111 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
      "1111:2222:3333:4444:5555:6666:255.255.255.255 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      "MT84 MALT 0110 0001 2345 MTLC AST0 01S and more",
  };
  for (const std::string& text : texts) {
    Redactor whole_r;
    const std::string whole = whole_r.redact(text);
    Redactor r;
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
    size_t max_held = 0;
    EXPECT_EQ(stream(r, bytes, pii_hold_back_bound(), &max_held), whole);
    std::printf("max held %zu of %zu bytes: %.40s...\n", max_held, text.size(), text.c_str());
  }
}

// ---- pseudonyms and restore ----------------------------------------------------------------

TEST(Redactor, PseudonymsAreStablePerValueAndRestore) {
  Redactor r({RedactMode::kPseudonymize});
  const std::string text =
      "Ann <ann@x.org> and Bob <bob@y.org>; Ann again: ann@x.org, ANN@X.ORG. Call +86 138-1234-5678 or "
      "+8613812345678, card 4111-1111-1111-1111.";
  const std::string red = r.redact(text);
  // Same spelling, same token; another spelling is another value (restore must give it back).
  EXPECT_EQ(red,
            "Ann <<EMAIL_1>> and Bob <<EMAIL_2>>; Ann again: <EMAIL_1>, <EMAIL_3>. Call <PHONE_1> or <PHONE_2>, card "
            "<CARD_1>.");
  EXPECT_EQ(r.pseudonym_count(), 6u);
  EXPECT_EQ(r.restore(red), text);
  // A model's reply that uses the tokens.
  EXPECT_EQ(r.restore("I wrote to <EMAIL_2> and <EMAIL_9>; <CARD_1>"),
            "I wrote to bob@y.org and <EMAIL_9>; 4111-1111-1111-1111");
  // The same Redactor keeps its numbering for the next text (a request's later turn).
  EXPECT_EQ(r.redact("bob@y.org, carol@z.org"), "<EMAIL_2>, <EMAIL_4>");
  // Another Redactor (another request or tenant) knows none of them.
  Redactor other({RedactMode::kPseudonymize});
  EXPECT_EQ(other.restore("<EMAIL_1>"), "<EMAIL_1>");
}

TEST(Redactor, RoundTripsWhenTheTextHasNoTokenLookalikes) {
  std::mt19937 rng(7);
  const std::vector<std::string> parts = {"ann@x.org", " ", "13812345678", ", ", "8.8.8.8", "2001:db8::1",
                                          "GB82 WEST 1234 5698 7654 32", "你好", "\n", "4111111111111111", "bob@y.org"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    std::string spaced;
    for (int k = 0; k < 20; ++k) {
      const std::string& part = parts[rng() % parts.size()];
      text += part;  // glued: values run into each other and change what matches
      spaced += part + " ";
    }
    Redactor r({RedactMode::kPseudonymize});
    const std::string red = r.redact(text);
    EXPECT_EQ(r.restore(red), text);
    const std::string red_spaced = r.redact(spaced);
    EXPECT_TRUE(find_pii(red_spaced).empty()) << red_spaced;
    EXPECT_EQ(r.restore(red_spaced), spaced);
  }
}

TEST(StreamingRestorer, EverySplitPointEqualsWholeRestore) {
  Redactor r({RedactMode::kPseudonymize});
  (void)r.redact("ann@x.org 13812345678 11010519491231002X 8.8.8.8");
  const std::string reply = "Dear <EMAIL_1>, your <CN_ID_1> and <PHONE_1> from <IPV4_1>; not <EMAIL_2> <EMAIL_ <a> <";
  const std::string whole = r.restore(reply);
  EXPECT_EQ(whole, "Dear ann@x.org, your 11010519491231002X and 13812345678 from 8.8.8.8; not <EMAIL_2> <EMAIL_ <a> <");
  for (size_t a = 0; a <= reply.size(); ++a) {
    for (size_t b = a; b <= reply.size(); b += 3) {
      StreamingRestorer s(r);
      const std::string_view sv(reply);
      std::string out = s.push(sv.substr(0, a));
      out += s.push(sv.substr(a, b - a));
      EXPECT_LT(s.held(), kMaxPiiTokenLength);
      out += s.push(sv.substr(b));
      out += s.flush();
      ASSERT_EQ(out, whole) << a << " " << b;
    }
  }
}

TEST(RedactForLog, MasksEverything) {
  EXPECT_EQ(redact_for_log("user ann@x.org from 203.0.113.7 paid with 5555555555554444"),
            "user [EMAIL] from [IPV4] paid with [CARD]");
  EXPECT_EQ(redact_for_log("nothing here 1.2.3"), "nothing here 1.2.3");
  EXPECT_EQ(redact_for_log(""), "");
}

// ---- throughput ----------------------------------------------------------------------------

TEST(PiiThroughput, ReportsMegabytesPerSecond) {
  std::string text;
  const std::string prose =
      "The quick brown fox jumps over the lazy dog, version 1.2.3 released on 2024-01-15 at 12:30:45 for $12.99. "
      "敏捷的棕色狐狸跳过了懒狗。 ";
  while (text.size() < (4u << 20)) {
    text += prose;
    if (text.size() % 7 == 0) text += "contact ann@example.com or 13812345678. ";
  }
  // CPU time, not wall time: the build machines are shared.
  Redactor r;
  const std::clock_t t0 = std::clock();
  const std::string out = r.redact(text);
  const double s = double(std::clock() - t0) / CLOCKS_PER_SEC;
  std::printf("redact: %.1f MB/s (CPU time) over %.1f MB\n", text.size() / s / 1e6, text.size() / 1e6);
  Redactor r2;
  StreamingRedactor st(r2);
  std::string streamed;
  const std::clock_t t1 = std::clock();
  for (size_t i = 0; i < text.size(); i += 4) streamed += st.push(std::string_view(text).substr(i, 4));
  streamed += st.flush();
  const double s2 = double(std::clock() - t1) / CLOCKS_PER_SEC;
  std::printf("streaming (4-byte pieces): %.1f MB/s\n", text.size() / s2 / 1e6);
  EXPECT_EQ(streamed, out);
}

}  // namespace
}  // namespace th::pii
