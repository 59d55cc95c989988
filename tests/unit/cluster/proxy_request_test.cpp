#include "cluster/proxy_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace th::cluster {
namespace {

using json = nlohmann::json;

ProxyRequest inspect(ProxyEndpoint ep, const std::string& body, uint64_t seed = 77) {
  Result<ProxyRequest> q = inspect_request(ep, body, seed);
  EXPECT_TRUE(q.ok()) << q.message();
  return q.ok() ? std::move(*q) : ProxyRequest{};
}

TEST(ProxyRequest, OnlyANonObjectBodyIsTheRoutersError) {
  for (const char* bad : {"", "{", "[1,2]", "\"x\"", "null", "{\"a\":1} trailing"})
    EXPECT_FALSE(inspect_request(ProxyEndpoint::kCompletions, bad, 1).ok()) << bad;
  // Wrong types are the cell's to refuse (its 400 names the field): the router passes them on.
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":{},"stream":"yes","n":"two","seed":"s","max_tokens":[]})");
  EXPECT_FALSE(q.stream);
  EXPECT_EQ(q.body["seed"], "s");
  EXPECT_EQ(q.body["stream"], "yes");
}

// #15: 100,000 levels of '[' in a body once overflowed the proxy thread's stack (the
// DOM is copied and dumped recursively). The router refuses it without building it.
TEST(ProxyRequest, ADeepBodyIsTheRoutersErrorNotACrash) {
  const std::string deep = "{\"prompt\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  Result<ProxyRequest> q = inspect_request(ProxyEndpoint::kCompletions, deep, 1);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("nested deeper than 64"), std::string::npos) << q.message();
  // 64 levels is the cell's own limit: the router passes it on, and the cell decides.
  const std::string ok = "{\"prompt\":" + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(inspect_request(ProxyEndpoint::kCompletions, ok, 1).ok());
  EXPECT_FALSE(inspect_request(ProxyEndpoint::kChat, "{\"messages\":" + std::string(200'000, '{'), 1).ok());
}

TEST(ProxyRequest, ADeepOrNonJsonChunkMarksTheCellFailed) {
  const ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true})");
  const std::string deep = "{\"choices\":" + std::string(200'000, '[') + std::string(200'000, ']') + "}";
  for (const std::string& bad : {deep, std::string("not json"), std::string("[1,2]"), std::string("{\"choices\":[")}) {
    StreamSnapshot snap;
    EXPECT_FALSE(rewrite_chunk(bad, q, snap).has_value()) << bad.substr(0, 40);
    EXPECT_FALSE(snap.invalid.empty()) << bad.substr(0, 40);
  }
  StreamSnapshot snap;
  EXPECT_TRUE(rewrite_chunk(R"({"id":"a","choices":[{"text":"hi","token_ids":[1]}]})", q, snap).has_value());
  EXPECT_TRUE(snap.invalid.empty()) << snap.invalid;
}

TEST(ProxyRequest, ACellAnswerNeedsAFinalStatusAndAJsonBody) {
  EXPECT_TRUE(check_cell_answer(200, R"({"choices":[]})").ok());
  EXPECT_TRUE(check_cell_answer(429, R"({"error":{"message":"slow down"}})").ok());
  EXPECT_FALSE(check_cell_answer(999, R"({})").ok());
  EXPECT_FALSE(check_cell_answer(600, R"({})").ok());
  EXPECT_FALSE(check_cell_answer(100, R"({})").ok());
  EXPECT_FALSE(check_cell_answer(200, "<html>oops</html>").ok());
  EXPECT_FALSE(check_cell_answer(200, "").ok());
  EXPECT_FALSE(check_cell_answer(200, "{\"a\":" + std::string(200'000, '[')).ok());
}

TEST(ProxyRequest, SeedIsTheRoutersOnlyWhenAbsent) {
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x"})", 0x1'2345'6789).body["seed"], 0x2345'6789);
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","seed":null})", 5).body["seed"], 5);
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","seed":9})", 5).body["seed"], 9);
}

TEST(ProxyRequest, OneStreamedChoiceIsMovableAndAsksForIds) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true})");
  EXPECT_TRUE(q.stream);
  EXPECT_TRUE(q.movable);
  EXPECT_FALSE(q.wants_ids);
  EXPECT_EQ(q.body["return_token_ids"], true);
  // Several choices move too, one by one after the first byte (SeveralChoicesAreTrackedAndMovedOneByOne).
  EXPECT_TRUE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"n":2})").movable);
  EXPECT_TRUE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":["a","b"],"stream":true})").movable);
  EXPECT_TRUE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":[1,2,3],"stream":true})").movable);
  EXPECT_FALSE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"echo":true})").movable);
  EXPECT_FALSE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x"})").movable);
  ProxyRequest plain = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x"})");
  EXPECT_FALSE(plain.body.contains("return_token_ids"));
  EXPECT_TRUE(inspect(ProxyEndpoint::kChat, R"({"messages":[{"role":"user","content":"hi"}],"stream":true})").movable);
  EXPECT_TRUE(inspect(ProxyEndpoint::kGenerate, R"({"prompt":[1]})").wants_ids);
  EXPECT_TRUE(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","return_token_ids":true})").wants_ids);
}

TEST(ProxyRequest, RouteCarriesPriorityCostAndPrefixBlocks) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":")" + std::string(200, 'a') + R"(","max_tokens":10,"priority":"high"})");
  EXPECT_EQ(q.route.priority, -1);
  EXPECT_EQ(q.route.cost_tokens, 200 / 4 + 10);
  EXPECT_EQ(q.route.prefix_blocks.size(), 3u);  // 200 bytes: three full 64-byte blocks
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","priority":"low"})").route.priority, 1);
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","priority":-7})").route.priority, -7);
  EXPECT_EQ(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","n":3,"max_tokens":5})").route.cost_tokens, 15);
  // Chats sharing a long system message share their first blocks.
  const std::string system(300, 's');
  auto chat = [&](const std::string& user) {
    return inspect(ProxyEndpoint::kChat, json{{"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}}}.dump());
  };
  ProxyRequest a = chat("first question"), b = chat("another one");
  ASSERT_GE(a.route.prefix_blocks.size(), 4u);
  EXPECT_EQ(std::vector<uint64_t>(a.route.prefix_blocks.begin(), a.route.prefix_blocks.begin() + 4),
            std::vector<uint64_t>(b.route.prefix_blocks.begin(), b.route.prefix_blocks.begin() + 4));
}

TEST(ProxyRequest, ChunksAreRecordedStrippedAndKeepTheFirstId) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true})");
  StreamSnapshot s;
  std::optional<std::string> first = rewrite_chunk(
      R"({"id":"cmpl-a","created":5,"choices":[{"index":0,"text":"Hi","token_ids":[7],"prompt_token_ids":[1,2],"finish_reason":null}]})", q, s);
  ASSERT_TRUE(first);
  json f = json::parse(*first);
  EXPECT_FALSE(f["choices"][0].contains("token_ids"));
  EXPECT_FALSE(f["choices"][0].contains("prompt_token_ids"));
  EXPECT_EQ(f["choices"][0]["text"], "Hi");
  // The next cell's chunk keeps the first cell's id and created.
  std::optional<std::string> second =
      rewrite_chunk(R"({"id":"cmpl-b","created":9,"choices":[{"index":0,"text":" there","token_ids":[8,9],"finish_reason":"length"}]})", q, s);
  ASSERT_TRUE(second);
  json g = json::parse(*second);
  EXPECT_EQ(g["id"], "cmpl-a");
  EXPECT_EQ(g["created"], 5);
  EXPECT_EQ(s.choice(0).prompt_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(s.choice(0).generated, (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(s.choice(0).text_bytes, 8);
  EXPECT_TRUE(s.choice(0).finished);
  EXPECT_FALSE(rewrite_chunk("[DONE]", q, s));
  EXPECT_TRUE(s.done);
  EXPECT_FALSE(rewrite_chunk("not json", q, s));
  // A client that asked for ids gets them.
  ProxyRequest ids = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"return_token_ids":true})");
  StreamSnapshot t;
  json kept = json::parse(*rewrite_chunk(R"({"id":"c","choices":[{"text":"a","token_ids":[3],"prompt_token_ids":[1]}]})", ids, t));
  EXPECT_EQ(kept["choices"][0]["token_ids"], json::array({3}));
  EXPECT_EQ(kept["choices"][0]["prompt_token_ids"], json::array({1}));
}

TEST(ProxyRequest, ChatRoleGoesOutOnceAndContentCounts) {
  ProxyRequest q = inspect(ProxyEndpoint::kChat, R"({"messages":[{"role":"user","content":"hi"}],"stream":true})");
  StreamSnapshot s;
  EXPECT_TRUE(rewrite_chunk(R"({"id":"a","choices":[{"delta":{"role":"assistant","content":""}}]})", q, s));
  EXPECT_FALSE(rewrite_chunk(R"({"id":"b","choices":[{"delta":{"role":"assistant","content":""}}]})", q, s));
  EXPECT_TRUE(rewrite_chunk(R"({"id":"b","choices":[{"delta":{"content":"héllo"},"token_ids":[4]}]})", q, s));
  EXPECT_EQ(s.choice(0).text_bytes, 6);
}

TEST(ProxyRequest, BrokenIdsOrAnErrorEventMakeAStreamUnmovable) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true})");
  StreamSnapshot s;
  rewrite_chunk(R"({"choices":[{"text":"a","token_ids":[1],"prompt_token_ids":[1]}]})", q, s);
  EXPECT_TRUE(resumable(q, s));
  for (const char* bad : {R"({"choices":[{"text":"a","token_ids":["x"]}]})", R"({"choices":[{"text":"a","token_ids":[-1]}]})",
                          R"({"choices":[{"text":"a","token_ids":{"a":1}}]})", R"({"choices":[{"text":"a","prompt_token_ids":[]}]})"}) {
    StreamSnapshot t = s;
    rewrite_chunk(bad, q, t);
    EXPECT_FALSE(resumable(q, t)) << bad;
  }
  StreamSnapshot e = s;
  EXPECT_TRUE(rewrite_chunk(R"({"error":{"message":"boom"}})", q, e));
  EXPECT_TRUE(e.error_event);
  EXPECT_FALSE(resumable(q, e));
  EXPECT_FALSE(resumable(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"echo":true})"), StreamSnapshot{}));
  EXPECT_TRUE(resumable(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"n":2})"), StreamSnapshot{}));
}

TEST(ProxyRequest, ResumeBodyIsTheRequestPlusTheContinuation) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions, R"({"prompt":"x","stream":true,"max_tokens":9,"seed":3})");
  StreamSnapshot s;
  EXPECT_EQ(json::parse(resume_body(q, s)), json::parse(q.body.dump()));  // nothing known yet: the same request
  rewrite_chunk(R"({"choices":[{"text":"ab","token_ids":[5,6],"prompt_token_ids":[1,2,3]}]})", q, s);
  json r = json::parse(resume_body(q, s));
  EXPECT_EQ(r["prompt"], "x");
  EXPECT_EQ(r["seed"], 3);
  EXPECT_EQ(r["max_tokens"], 9);
  EXPECT_EQ(r["continuation"]["prompt_token_ids"], json::array({1, 2, 3}));
  EXPECT_EQ(r["continuation"]["token_ids"], json::array({5, 6}));
  EXPECT_EQ(r["continuation"]["text_bytes"], 2);
}

// A client resuming a stream through the router (client/failover_client.h) sends a
// continuation; the router extends it, so a cell dying under the resumed stream moves it again.
TEST(ProxyRequest, AContinuationMovesAgainWithWhatItCarried) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions,
                           R"({"prompt":"x","stream":true,"seed":3,"continuation":{"prompt_token_ids":[1,2],"token_ids":[7,8],"text_bytes":4}})");
  ASSERT_TRUE(q.movable);
  StreamSnapshot s = start_snapshot(q);
  EXPECT_TRUE(resumable(q, s));
  rewrite_chunk(R"({"choices":[{"text":"abc","token_ids":[9]}]})", q, s);
  json r = json::parse(resume_body(q, s));
  EXPECT_EQ(r["continuation"], json::parse(R"({"prompt_token_ids":[1,2],"token_ids":[7,8,9],"text_bytes":7})"));
  EXPECT_EQ(r["seed"], 3);

  // One the router cannot read is passed on as it is (the cell's 400 names the field) and never moved.
  for (const char* bad : {R"({"prompt":"x","stream":true,"continuation":{"token_ids":[1]}})",
                          R"({"prompt":"x","stream":true,"continuation":{"prompt_token_ids":[]}})",
                          R"({"prompt":"x","stream":true,"continuation":{"prompt_token_ids":[1],"token_ids":["a"]}})",
                          R"({"prompt":"x","stream":true,"continuation":{"prompt_token_ids":[1],"text_bytes":-1}})",
                          R"({"prompt":"x","stream":true,"continuation":[1]})"}) {
    ProxyRequest b = inspect(ProxyEndpoint::kCompletions, bad);
    EXPECT_FALSE(b.movable) << bad;
    EXPECT_TRUE(start_snapshot(b).choice(0).prompt_ids.empty()) << bad;
  }
}

// n > 1 and several prompts: each choice is tracked by its index, and moved alone as a
// request of one choice (its prompt, its seed) whose chunks come back under its index.
TEST(ProxyRequest, SeveralChoicesAreTrackedAndMovedOneByOne) {
  ProxyRequest q = inspect(ProxyEndpoint::kCompletions,
                           R"({"prompt":["a","b"],"n":2,"stream":true,"seed":10,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(q.movable);
  EXPECT_EQ(choice_count(q), 4);
  EXPECT_TRUE(q.include_usage);
  StreamSnapshot s;
  rewrite_chunk(R"({"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","token_ids":[5],"prompt_token_ids":[1]},{"index":3,"text":"yz","token_ids":[6,7],"prompt_token_ids":[2,2]}]})", q, s);
  rewrite_chunk(R"({"id":"c","choices":[{"index":1,"text":"w","token_ids":[8],"prompt_token_ids":[1],"finish_reason":"stop"}]})", q, s);
  EXPECT_EQ(s.choice(3).generated, (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(s.choice(3).text_bytes, 2);
  EXPECT_TRUE(s.choice(1).finished);
  EXPECT_FALSE(s.all_finished(4));

  // Choice 3 is prompt 1's second draw: prompt "b", n 1, seed 10 + 1, its continuation.
  json three = json::parse(choice_resume_body(q, s, 3));
  EXPECT_EQ(three["prompt"], "b");
  EXPECT_EQ(three["n"], 1);
  EXPECT_EQ(three["seed"], 11);
  EXPECT_EQ(three["continuation"], json::parse(R"({"prompt_token_ids":[2,2],"token_ids":[6,7],"text_bytes":2})"));
  json two = json::parse(choice_resume_body(q, s, 2));  // nothing of it came: it starts over
  EXPECT_EQ(two["prompt"], "b");
  EXPECT_EQ(two["seed"], 10);
  EXPECT_FALSE(two.contains("continuation"));

  // Its own stream's chunks come back as choice 3; its usage chunk is not passed on.
  std::optional<std::string> moved =
      rewrite_chunk(R"({"id":"d","choices":[{"index":0,"text":"!","token_ids":[9],"finish_reason":"length"}],"usage":null})", q, s, 3);
  ASSERT_TRUE(moved);
  json m = json::parse(*moved);
  EXPECT_EQ(m["choices"][0]["index"], 3);
  EXPECT_EQ(m["id"], "c");
  EXPECT_EQ(s.choice(3).generated, (std::vector<int32_t>{6, 7, 9}));
  EXPECT_FALSE(rewrite_chunk(R"({"id":"d","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}})", q, s, 3));
  EXPECT_FALSE(s.usage_sent);

  // The router's usage: prompt tokens once per prompt, every choice's tokens.
  json u = json::parse(*usage_chunk(q, s));
  EXPECT_EQ(u["id"], "c");
  EXPECT_EQ(u["model"], "m");
  EXPECT_EQ(u["choices"], json::array());
  EXPECT_EQ(u["usage"], json::parse(R"({"prompt_tokens":3,"completion_tokens":5,"total_tokens":8})"));
  rewrite_chunk(R"({"id":"c","choices":[],"usage":{"prompt_tokens":3}})", q, s);
  EXPECT_FALSE(usage_chunk(q, s));  // the cell's went out
  EXPECT_FALSE(usage_chunk(inspect(ProxyEndpoint::kCompletions, R"({"prompt":"a","stream":true})"), StreamSnapshot{}));
}

// A chat request with n > 1 moves per choice too; a continuation is of one choice only.
TEST(ProxyRequest, ChatChoicesMoveAloneAndAContinuationNeedsOneChoice) {
  ProxyRequest q = inspect(ProxyEndpoint::kChat, R"({"messages":[{"role":"user","content":"hi"}],"n":3,"stream":true,"seed":4})");
  ASSERT_TRUE(q.movable);
  StreamSnapshot s;
  rewrite_chunk(R"({"id":"c","choices":[{"index":2,"delta":{"role":"assistant","content":""}}]})", q, s);
  rewrite_chunk(R"({"id":"c","choices":[{"index":2,"delta":{"content":"ok"},"token_ids":[3],"prompt_token_ids":[1,2]}]})", q, s);
  json b = json::parse(choice_resume_body(q, s, 2));
  EXPECT_EQ(b["n"], 1);
  EXPECT_EQ(b["seed"], 6);
  EXPECT_EQ(b["messages"], json::parse(q.body["messages"].dump()));
  EXPECT_EQ(b["continuation"]["token_ids"], json::array({3}));
  // The moved choice's cell sends its role chunk again: dropped.
  EXPECT_FALSE(rewrite_chunk(R"({"id":"e","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", q, s, 2));
  EXPECT_FALSE(inspect(ProxyEndpoint::kCompletions,
                       R"({"prompt":"x","n":2,"stream":true,"continuation":{"prompt_token_ids":[1]}})").movable);
}

}  // namespace
}  // namespace th::cluster
