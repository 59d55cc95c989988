#include "client/stream_resume.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

namespace th::client {
namespace {

using json = nlohmann::json;

json parse_json(const std::string& s) { return json::parse(s); }

TEST(StreamResume, AMovableStreamGetsASeedAndAsksForIds) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"Hi","stream":true})", 0x1'2345'6789);
  ASSERT_TRUE(q.movable);
  EXPECT_FALSE(q.wants_ids);
  const json b = parse_json(q.body);
  EXPECT_EQ(b["seed"], 0x2345'6789);  // 31 bits
  EXPECT_EQ(b["return_token_ids"], true);
  EXPECT_EQ(b["prompt"], "Hi");

  const StreamRequest own = prepare_stream_request("/v1/chat/completions",
                                                   R"({"messages":[],"stream":true,"seed":5,"return_token_ids":true})", 9);
  ASSERT_TRUE(own.movable);
  EXPECT_TRUE(own.wants_ids);
  EXPECT_EQ(parse_json(own.body)["seed"], 5);  // the caller's seed stays
}

TEST(StreamResume, WhatCannotMoveGoesAsItIs) {
  for (const char* body : {R"({"prompt":"Hi"})", R"({"prompt":"Hi","stream":true,"echo":true})",
                           R"({"prompt":"Hi","stream":true,"continuation":{}})", "[1,2]", "not json"}) {
    const StreamRequest q = prepare_stream_request("/v1/completions", body, 7);
    EXPECT_FALSE(q.movable) << body;
    EXPECT_EQ(q.body, body);
  }
  EXPECT_FALSE(prepare_stream_request("/v1/embeddings", R"({"input":"Hi","stream":true})", 7).movable);
  // A prompt of ids is one prompt.
  const StreamRequest ids = prepare_stream_request("/v1/completions", R"({"prompt":[1,2,3],"stream":true})", 7);
  EXPECT_TRUE(ids.movable);
  EXPECT_EQ(ids.choices(), 1);
}

// n > 1 and several prompts move too, choice by choice (the server's continuation is of one).
TEST(StreamResume, SeveralChoicesAreMovable) {
  const StreamRequest q = prepare_stream_request(
      "/v1/completions", R"({"prompt":["a",[1,2],"c"],"n":2,"stream":true,"stream_options":{"include_usage":true}})", 7);
  ASSERT_TRUE(q.movable);
  EXPECT_EQ(q.n, 2);
  EXPECT_EQ(q.prompts, 3u);
  EXPECT_EQ(q.choices(), 6);
  EXPECT_TRUE(q.include_usage);
  EXPECT_EQ(parse_json(q.body)["seed"], 7);
  const StreamRequest chat = prepare_stream_request("/v1/chat/completions", R"({"messages":[],"n":3,"stream":true})", 7);
  ASSERT_TRUE(chat.movable);
  EXPECT_EQ(chat.choices(), 3);
  EXPECT_FALSE(chat.include_usage);
  // A bad n is the server's to refuse (before any byte): read as 1 here, and 1024 at most.
  EXPECT_EQ(choices_per_prompt(nlohmann::ordered_json::parse(R"({"n":"two"})")), 1);
  EXPECT_EQ(choices_per_prompt(nlohmann::ordered_json::parse(R"({"n":-3})")), 1);
  EXPECT_EQ(choices_per_prompt(nlohmann::ordered_json::parse(R"({"n":100000})")), 1024);
  EXPECT_EQ(prompt_count(nlohmann::ordered_json::parse(R"({"prompt":[]})"), false), 1u);
  EXPECT_EQ(prompt_count(nlohmann::ordered_json::parse(R"({"prompt":["a","b"]})"), true), 1u);
}

// Each choice is tracked by its index; choice i goes on alone as a request of n 1 with its
// prompt (i / n), seed + i % n and its own continuation, and its chunks come back as choice i.
TEST(StreamResume, SeveralChoicesResumeOneByOne) {
  const StreamRequest q = prepare_stream_request(
      "/v1/completions",
      R"({"prompt":["a","b"],"n":2,"best_of":2,"stream":true,"seed":10,"stream_options":{"include_usage":true}})", 7);
  StreamProgress p;
  ASSERT_TRUE(rewrite_event(R"({"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","token_ids":[5],"prompt_token_ids":[1]},{"index":3,"text":"yz","token_ids":[6,7],"prompt_token_ids":[2,2]}]})",
                            q, p));
  ASSERT_TRUE(rewrite_event(R"({"id":"c","choices":[{"index":1,"text":"w","token_ids":[8],"prompt_token_ids":[1],"finish_reason":"stop"}]})",
                            q, p));
  EXPECT_TRUE(can_resume(q, p));
  EXPECT_FALSE(p.all_finished(static_cast<size_t>(q.choices())));

  const json three = parse_json(choice_resume_body(q, p, 3));
  EXPECT_EQ(three["prompt"], "b");
  EXPECT_EQ(three["n"], 1);
  EXPECT_FALSE(three.contains("best_of"));  // the server takes it only equal to n
  EXPECT_EQ(three["seed"], 11);
  EXPECT_EQ(three["return_token_ids"], true);
  EXPECT_EQ(three["continuation"], parse_json(R"({"prompt_token_ids":[2,2],"token_ids":[6,7],"text_bytes":2})"));
  const json two = parse_json(choice_resume_body(q, p, 2));  // nothing of it came: it starts over
  EXPECT_EQ(two["prompt"], "b");
  EXPECT_EQ(two["seed"], 10);
  EXPECT_FALSE(two.contains("continuation"));

  // Choice 3's own stream: re-indexed, the first chunk's id kept, its usage chunk dropped.
  std::optional<std::string> out =
      rewrite_event(R"({"id":"d","choices":[{"index":0,"text":"!","token_ids":[9],"finish_reason":"length"}]})", q, p, 3);
  ASSERT_TRUE(out);
  EXPECT_EQ(parse_json(*out), parse_json(R"({"id":"c","choices":[{"index":3,"text":"!","finish_reason":"length"}]})"));
  EXPECT_EQ(p.choice(3).generated, (std::vector<int32_t>{6, 7, 9}));
  EXPECT_FALSE(rewrite_event(R"({"id":"d","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}})", q, p, 3));
  EXPECT_FALSE(p.usage_sent);

  // The usage chunk the reader makes: prompt tokens once per prompt, every choice's tokens.
  std::optional<std::string> usage = final_usage_chunk(q, p);
  ASSERT_TRUE(usage);
  EXPECT_EQ(parse_json(*usage), parse_json(R"({"id":"c","object":"text_completion","created":1,"model":"m","choices":[],
                                    "usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}})"));
  rewrite_event(R"({"id":"c","choices":[],"usage":{"prompt_tokens":3}})", q, p);  // an endpoint's own went out
  EXPECT_FALSE(final_usage_chunk(q, p));
  EXPECT_FALSE(final_usage_chunk(prepare_stream_request("/v1/completions", R"({"prompt":"a","stream":true})", 7),
                                 StreamProgress{}));  // not asked for
}

TEST(StreamResume, AChatChoiceMovedAloneSendsItsRoleOnce) {
  const StreamRequest q =
      prepare_stream_request("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"n":3,"stream":true,"seed":4})", 9);
  StreamProgress p;
  rewrite_event(R"({"id":"c","choices":[{"index":2,"delta":{"role":"assistant","content":""}}]})", q, p);
  rewrite_event(R"({"id":"c","choices":[{"index":2,"delta":{"content":"ok"},"token_ids":[3],"prompt_token_ids":[1,2]}]})", q, p);
  const json b = parse_json(choice_resume_body(q, p, 2));
  EXPECT_EQ(b["n"], 1);
  EXPECT_EQ(b["seed"], 6);
  EXPECT_EQ(b["messages"], parse_json(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(b["continuation"]["token_ids"], json::array({3}));
  // Choice 2's server sends its role again: dropped; choice 0's first role goes on.
  EXPECT_FALSE(rewrite_event(R"({"id":"e","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", q, p, 2));
  std::optional<std::string> first =
      rewrite_event(R"({"id":"e","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", q, p, 0);
  ASSERT_TRUE(first);
  EXPECT_EQ(parse_json(*first)["id"], "c");
}

// One choice that has generated ids but no prompt ids stops the whole stream from moving.
TEST(StreamResume, EveryUnfinishedChoiceMustBeResumable) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"x","n":2,"stream":true})", 7);
  StreamProgress p;
  rewrite_event(R"({"choices":[{"index":0,"text":"a","token_ids":[4],"prompt_token_ids":[1]}]})", q, p);
  EXPECT_TRUE(can_resume(q, p));  // choice 1 has nothing yet: it starts over
  rewrite_event(R"({"choices":[{"index":1,"text":"b","token_ids":[5]}]})", q, p);
  EXPECT_FALSE(can_resume(q, p));
  rewrite_event(R"({"choices":[{"index":1,"text":"","finish_reason":"stop"}]})", q, p);
  EXPECT_TRUE(can_resume(q, p));  // ... unless it finished: nothing of it is left to resume
}

TEST(StreamResume, ChunksAreTrackedStrippedAndKeepTheFirstId) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"Hi","stream":true})", 7);
  StreamProgress p;
  std::optional<std::string> out = rewrite_event(
      R"({"id":"cmpl-a","created":100,"choices":[{"index":0,"text":" One","prompt_token_ids":[1,5],"token_ids":[9],"finish_reason":null}]})",
      q, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(parse_json(*out), parse_json(R"({"id":"cmpl-a","created":100,"choices":[{"index":0,"text":" One","finish_reason":null}]})"));
  out = rewrite_event(R"({"id":"cmpl-b","created":200,"choices":[{"index":0,"text":" dayé","token_ids":[11,12]}]})", q, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(parse_json(*out)["id"], "cmpl-a");  // a resumed stream keeps the first endpoint's id and time
  EXPECT_EQ(parse_json(*out)["created"], 100);
  EXPECT_EQ(p.choice(0).prompt_ids, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(p.choice(0).generated, (std::vector<int32_t>{9, 11, 12}));
  EXPECT_EQ(p.choice(0).text_bytes, 4 + 6);  // bytes, not characters
  EXPECT_EQ(p.events, 2);
  EXPECT_TRUE(can_resume(q, p));

  const json again = parse_json(resume_body(q, p));
  EXPECT_EQ(again["continuation"], parse_json(R"({"prompt_token_ids":[1,5],"token_ids":[9,11,12],"text_bytes":10})"));
  EXPECT_EQ(again["seed"], 7);
  EXPECT_EQ(again["prompt"], "Hi");

  EXPECT_EQ(rewrite_event("[DONE]", q, p), "[DONE]");
  EXPECT_TRUE(p.done);
  EXPECT_FALSE(can_resume(q, p));
}

TEST(StreamResume, ChatDropsARepeatedRoleChunkAndCountsContentBytes) {
  const StreamRequest q = prepare_stream_request("/v1/chat/completions", R"({"messages":[],"stream":true})", 7);
  StreamProgress p;
  EXPECT_TRUE(rewrite_event(R"({"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]})", q, p));
  EXPECT_TRUE(can_resume(q, p));
  EXPECT_EQ(resume_body(q, p), q.body);  // no ids yet: the request starts over
  EXPECT_FALSE(rewrite_event(R"({"id":"d","choices":[{"index":0,"delta":{"role":"assistant"}}]})", q, p));
  EXPECT_TRUE(rewrite_event(R"({"id":"d","choices":[{"index":0,"delta":{"content":"ab"},"token_ids":[3],"prompt_token_ids":[1]}]})", q, p));
  EXPECT_EQ(p.choice(0).text_bytes, 2);
}

TEST(StreamResume, WhatStopsAStreamFromMoving) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"Hi","stream":true})", 7);
  {
    StreamProgress p;  // generated ids without the prompt's
    rewrite_event(R"({"choices":[{"text":"a","token_ids":[4]}]})", q, p);
    EXPECT_FALSE(can_resume(q, p));
  }
  {
    StreamProgress p;
    rewrite_event(R"({"choices":[{"text":"a","token_ids":[-4],"prompt_token_ids":[1]}]})", q, p);
    EXPECT_TRUE(p.unreadable);
    EXPECT_FALSE(can_resume(q, p));
  }
  {
    StreamProgress p;
    EXPECT_EQ(rewrite_event("garbage", q, p), "garbage");  // passed on; the caller decides
    EXPECT_FALSE(can_resume(q, p));
  }
  {
    StreamProgress p;
    rewrite_event(R"({"error":{"message":"out of memory"}})", q, p);
    EXPECT_FALSE(can_resume(q, p));
  }
  {
    StreamProgress p;  // 100,000 levels: not parsed (nlohmann would recurse on them)
    const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
    EXPECT_EQ(rewrite_event(deep, q, p), deep);
    EXPECT_TRUE(p.unreadable);
  }
}

}  // namespace
}  // namespace th::client
