#include "client/stream_resume.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

namespace th::client {
namespace {

using json = nlohmann::json;

json parse(const std::string& s) { return json::parse(s); }

TEST(StreamResume, AMovableStreamGetsASeedAndAsksForIds) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"Hi","stream":true})", 0x1'2345'6789);
  ASSERT_TRUE(q.movable);
  EXPECT_FALSE(q.wants_ids);
  const json b = parse(q.body);
  EXPECT_EQ(b["seed"], 0x2345'6789);  // 31 bits
  EXPECT_EQ(b["return_token_ids"], true);
  EXPECT_EQ(b["prompt"], "Hi");

  const StreamRequest own = prepare_stream_request("/v1/chat/completions",
                                                   R"({"messages":[],"stream":true,"seed":5,"return_token_ids":true})", 9);
  ASSERT_TRUE(own.movable);
  EXPECT_TRUE(own.wants_ids);
  EXPECT_EQ(parse(own.body)["seed"], 5);  // the caller's seed stays
}

TEST(StreamResume, WhatCannotMoveGoesAsItIs) {
  for (const char* body : {R"({"prompt":"Hi"})", R"({"prompt":"Hi","stream":true,"n":2})",
                           R"({"prompt":["a","b"],"stream":true})", R"({"prompt":"Hi","stream":true,"echo":true})",
                           R"({"prompt":"Hi","stream":true,"continuation":{}})", "[1,2]", "not json"}) {
    const StreamRequest q = prepare_stream_request("/v1/completions", body, 7);
    EXPECT_FALSE(q.movable) << body;
    EXPECT_EQ(q.body, body);
  }
  EXPECT_FALSE(prepare_stream_request("/v1/embeddings", R"({"input":"Hi","stream":true})", 7).movable);
  // A prompt of ids is one prompt.
  EXPECT_TRUE(prepare_stream_request("/v1/completions", R"({"prompt":[1,2,3],"stream":true})", 7).movable);
}

TEST(StreamResume, ChunksAreTrackedStrippedAndKeepTheFirstId) {
  const StreamRequest q = prepare_stream_request("/v1/completions", R"({"prompt":"Hi","stream":true})", 7);
  StreamProgress p;
  std::optional<std::string> out = rewrite_event(
      R"({"id":"cmpl-a","created":100,"choices":[{"index":0,"text":" One","prompt_token_ids":[1,5],"token_ids":[9],"finish_reason":null}]})",
      q, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(parse(*out), parse(R"({"id":"cmpl-a","created":100,"choices":[{"index":0,"text":" One","finish_reason":null}]})"));
  out = rewrite_event(R"({"id":"cmpl-b","created":200,"choices":[{"index":0,"text":" dayé","token_ids":[11,12]}]})", q, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(parse(*out)["id"], "cmpl-a");  // a resumed stream keeps the first endpoint's id and time
  EXPECT_EQ(parse(*out)["created"], 100);
  EXPECT_EQ(p.choice(0).prompt_ids, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(p.choice(0).generated, (std::vector<int32_t>{9, 11, 12}));
  EXPECT_EQ(p.choice(0).text_bytes, 4 + 6);  // bytes, not characters
  EXPECT_EQ(p.events, 2);
  EXPECT_TRUE(can_resume(q, p));

  const json again = parse(resume_body(q, p));
  EXPECT_EQ(again["continuation"], parse(R"({"prompt_token_ids":[1,5],"token_ids":[9,11,12],"text_bytes":10})"));
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
