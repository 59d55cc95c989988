#include "bench/workload.h"

#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace th::bench {
namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name + "_" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::unique_ptr<Workload> make(const WorkloadOptions& o) {
  Result<std::unique_ptr<Workload>> w = make_workload(o);
  EXPECT_TRUE(w.ok()) << w.message();
  return w.ok() ? std::move(w).value() : nullptr;
}

TEST(Workload, LengthRangeIsVllms) {
  EXPECT_EQ(length_range(100, 0.5, 1), std::make_pair(int64_t{50}, int64_t{150}));
  EXPECT_EQ(length_range(10, 0.25, 1), std::make_pair(int64_t{7}, int64_t{13}));  // floor(7.5), ceil(12.5)
  EXPECT_EQ(length_range(128, 0.0, 1), std::make_pair(int64_t{128}, int64_t{128}));
  EXPECT_EQ(length_range(1, 0.9, 1), std::make_pair(int64_t{1}, int64_t{2}));  // never below 1
}

TEST(Workload, RandomLengthsStayWithinTheRangeAndCoverIt) {
  WorkloadOptions o;
  o.input_len = 200;
  o.output_len = 40;
  o.range_ratio = 0.25;
  o.seed = 7;
  auto w = make(o);
  std::set<int64_t> ins, outs;
  for (int64_t i = 0; i < 2000; ++i) {
    BenchRequest r = w->request(i);
    EXPECT_EQ(r.index, i);
    EXPECT_GE(r.input_tokens_hint, 150);
    EXPECT_LE(r.input_tokens_hint, 250);
    EXPECT_GE(r.max_tokens, 30);
    EXPECT_LE(r.max_tokens, 50);
    EXPECT_EQ(static_cast<int64_t>(words(r.prompt).size()), r.input_tokens_hint);
    EXPECT_TRUE(r.ignore_eos);
    EXPECT_EQ(r.priority, "normal");
    ins.insert(r.input_tokens_hint);
    outs.insert(r.max_tokens);
  }
  EXPECT_EQ(*ins.begin(), 150);
  EXPECT_EQ(*ins.rbegin(), 250);
  EXPECT_EQ(outs.size(), 21u);  // every length in [30, 50]
}

TEST(Workload, SameSeedSameRequestsInAnyOrder) {
  WorkloadOptions o;
  o.input_len = 64;
  o.range_ratio = 0.5;
  o.seed = 42;
  auto a = make(o), b = make(o);
  for (int64_t i = 9; i >= 0; --i) {  // b asked in the other order
    EXPECT_EQ(a->request(9 - i).prompt, b->request(9 - i).prompt);
    EXPECT_EQ(a->request(i).max_tokens, b->request(i).max_tokens);
  }
  o.seed = 43;
  auto c = make(o);
  EXPECT_NE(a->request(0).prompt, c->request(0).prompt);
  EXPECT_NE(a->request(0).prompt, a->request(1).prompt);
}

TEST(Workload, SharedPrefixesAreReallyShared) {
  WorkloadOptions o;
  o.kind = "shared-prefix";
  o.prefix_len = 100;
  o.num_prefixes = 4;
  o.input_len = 20;
  o.output_len = 8;
  o.seed = 3;
  auto w = make(o);
  std::set<std::string> prefixes;
  for (int64_t i = 0; i < 40; ++i) {
    BenchRequest r = w->request(i);
    const std::vector<std::string> wi = words(r.prompt);
    ASSERT_EQ(static_cast<int64_t>(wi.size()), r.input_tokens_hint);
    EXPECT_EQ(r.input_tokens_hint, 120);
    const std::vector<std::string> head(wi.begin(), wi.begin() + 100);
    const std::vector<std::string> same = words(w->request(i + 4).prompt);
    EXPECT_EQ(head, std::vector<std::string>(same.begin(), same.begin() + 100)) << i;
    EXPECT_NE(r.prompt, w->request(i + 4).prompt);  // the suffixes differ
    std::string p;
    for (const std::string& x : head) p += x + " ";
    prefixes.insert(p);
  }
  EXPECT_EQ(prefixes.size(), 4u);  // four distinct prefixes, each used
}

TEST(Workload, PriorityMixParsesAndIsFollowed) {
  Result<PriorityMix> mix = parse_priority_mix("high=0.1,normal=0.8,low=0.1");
  ASSERT_TRUE(mix.ok()) << mix.message();
  EXPECT_NEAR(mix->weight[0], 0.1, 1e-12);
  EXPECT_NEAR(mix->weight[1], 0.8, 1e-12);
  Result<PriorityMix> two = parse_priority_mix("high=1,low=3");  // normalized; normal left out
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(two->weight[0], 0.25, 1e-12);
  EXPECT_EQ(two->weight[1], 0.0);
  for (const char* bad : {"high", "urgent=1", "high=-1", "high=x", "high=0,low=0", "high=1,high=2", "high=1e999"})
    EXPECT_FALSE(parse_priority_mix(bad).ok()) << bad;
  EXPECT_NE(parse_priority_mix("urgent=1").message().find("unknown class 'urgent'"), std::string::npos);

  WorkloadOptions o;
  o.input_len = 4;
  o.priorities = *mix;
  auto w = make(o);
  std::map<std::string, int> n;
  for (int64_t i = 0; i < 20000; ++i) n[w->request(i).priority]++;
  EXPECT_NEAR(n["high"] / 20000.0, 0.1, 0.01);
  EXPECT_NEAR(n["normal"] / 20000.0, 0.8, 0.015);
  EXPECT_NEAR(n["low"] / 20000.0, 0.1, 0.01);
  EXPECT_EQ(w->request(17).priority, make(o)->request(17).priority);
}

TEST(Workload, JsonlReadsPromptsAndCycles) {
  const std::string path = temp_file("ok.jsonl",
                                     "{\"prompt\": \"Hello there\", \"max_tokens\": 5}\n"
                                     "\r\n"
                                     "{\"prompt\": \"Why?\", \"max_tokens\": 9, \"priority\": \"high\"}\r\n");
  WorkloadOptions o;
  o.kind = "jsonl";
  o.dataset_path = path;
  auto w = make(o);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->request(0).prompt, "Hello there");
  EXPECT_EQ(w->request(0).max_tokens, 5);
  EXPECT_EQ(w->request(1).prompt, "Why?");
  EXPECT_EQ(w->request(1).priority, "high");
  EXPECT_EQ(w->request(2).prompt, "Hello there");  // cycled
  EXPECT_EQ(w->request(2).index, 2);
  std::remove(path.c_str());
}

TEST(Workload, JsonlErrorsNameTheLine) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"{\"prompt\": \"a\", \"max_tokens\": 1}\n{\"prompt\": \"b\", \"max_tokens\": 1\n", ":2: not valid JSON"},
      {"[1, 2]\n", ":1: must be a JSON object"},
      {"{\"max_tokens\": 3}\n", ":1: \"prompt\" must be a string"},
      {"\n\n{\"prompt\": \"a\", \"max_tokens\": 0}\n", ":3: \"max_tokens\" must be an integer >= 1"},
      {"{\"prompt\": \"a\", \"max_tokens\": 2.5}\n", ":1: \"max_tokens\" must be an integer >= 1"},
      {"{\"prompt\": \"a\", \"max_tokens\": 2, \"priority\": \"urgent\"}\n", ":1: \"priority\" must be"},
      {"\n  \n", ": no prompts"},
  };
  for (const Case& c : cases) {
    const std::string path = temp_file("bad.jsonl", c.text);
    WorkloadOptions o;
    o.kind = "jsonl";
    o.dataset_path = path;
    Result<std::unique_ptr<Workload>> w = make_workload(o);
    ASSERT_FALSE(w.ok()) << c.text;
    EXPECT_EQ(w.message().rfind(path, 0), 0u) << w.message();
    EXPECT_NE(w.message().find(c.expect), std::string::npos) << w.message();
    std::remove(path.c_str());
  }
  WorkloadOptions o;
  o.kind = "jsonl";
  o.dataset_path = "/nonexistent/x.jsonl";
  EXPECT_NE(make_workload(o).message().find("cannot open"), std::string::npos);
  o.dataset_path = "";
  EXPECT_FALSE(make_workload(o).ok());
}

TEST(Workload, BadOptionsAreRefused) {
  WorkloadOptions o;
  o.range_ratio = 1.0;
  EXPECT_FALSE(make_workload(o).ok());
  o.range_ratio = 0;
  o.input_len = 0;
  EXPECT_FALSE(make_workload(o).ok());
  o.input_len = 10;
  o.kind = "shared-prefix";
  o.num_prefixes = 0;
  EXPECT_FALSE(make_workload(o).ok());
  o.kind = "sharegpt";
  EXPECT_FALSE(make_workload(o).ok());
}

}  // namespace
}  // namespace th::bench
