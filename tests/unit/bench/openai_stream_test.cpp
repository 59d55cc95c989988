#include "bench/openai_stream.h"

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace th::bench {
namespace {

using nlohmann::json;

// A scripted server: each step sleeps, then delivers one SSE data payload; the stream then
// returns `end` (a transport or HTTP failure when not ok).
struct Step {
  int sleep_ms;
  std::string data;
};

struct FakeServer {
  std::vector<Step> steps;
  Status end = ok_status();
  std::string path, body;  // what the request was
  int delivered = 0;

  StreamFn fn() {
    return [this](const std::string& p, const std::string& b, const std::function<bool(std::string_view)>& on_event) {
      path = p;
      body = b;
      for (const Step& s : steps) {
        std::this_thread::sleep_for(std::chrono::milliseconds(s.sleep_ms));
        ++delivered;
        if (!on_event(s.data)) return Status::error("aborted by the reader");
      }
      return end;
    };
  }
};

std::string text_chunk(const std::string& text) {
  return json({{"id", "cmpl-1"}, {"object", "text_completion"},
               {"choices", {{{"index", 0}, {"text", text}, {"finish_reason", nullptr}}}}})
      .dump();
}

BenchRequest request() {
  BenchRequest r;
  r.index = 3;
  r.prompt = "the time of day";
  r.input_tokens_hint = 4;
  r.max_tokens = 3;
  r.priority = "high";
  return r;
}

TEST(OpenAiStream, BodyIsTheStreamingCompletionsRequest) {
  OpenAiTarget t;
  t.model = "llama";
  const json b = json::parse(openai_request_body(request(), t));
  EXPECT_EQ(b["model"], "llama");
  EXPECT_EQ(b["prompt"], "the time of day");
  EXPECT_EQ(b["max_tokens"], 3);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_FALSE(b.contains("priority"));  // only with a priority mix
  t.send_priority = true;
  t.model.clear();
  const json p = json::parse(openai_request_body(request(), t));
  EXPECT_EQ(p["priority"], -1);
  EXPECT_FALSE(p.contains("model"));
  t.endpoint = "/v1/chat/completions";
  const json c = json::parse(openai_request_body(request(), t));
  EXPECT_FALSE(c.contains("prompt"));
  EXPECT_EQ(c["messages"][0]["role"], "user");
  EXPECT_EQ(c["messages"][0]["content"], "the time of day");
}

// --compute-types: request i sends the (i mod n)-th type; none given, no field.
TEST(OpenAiStream, ComputeTypesRotateByRequestIndex) {
  OpenAiTarget t;
  EXPECT_FALSE(json::parse(openai_request_body(request(), t)).contains("compute_type"));
  t.compute_types = {"fp32", "bf16", "fp16", "fp8"};
  BenchRequest r = request();
  for (int64_t i : {0, 1, 2, 3, 4, 7}) {
    r.index = i;
    EXPECT_EQ(json::parse(openai_request_body(r, t))["compute_type"], t.compute_types[static_cast<size_t>(i % 4)]);
  }
}

// --sampling: greedy is temperature 0, seeded a temperature and a seed of its own per request
// (the base plus the index), mixed alternates; none set, neither field (the server's default).
TEST(OpenAiStream, SamplingMakesReproducibleRequests) {
  OpenAiTarget t;
  BenchRequest r = request();
  const json none = json::parse(openai_request_body(r, t));
  EXPECT_FALSE(none.contains("temperature"));
  EXPECT_FALSE(none.contains("seed"));
  t.sampling = "greedy";
  const json g = json::parse(openai_request_body(r, t));
  EXPECT_EQ(g["temperature"], 0);
  EXPECT_FALSE(g.contains("seed"));
  t.sampling = "seeded";
  t.sampling_seed = 100;
  const json s = json::parse(openai_request_body(r, t));
  EXPECT_EQ(s["temperature"], 1.0);
  EXPECT_EQ(s["seed"], 103);
  t.sampling_seed = 0xffffffffull;  // the seed stays within 31 bits
  EXPECT_EQ(json::parse(openai_request_body(r, t))["seed"], (0xffffffffull + 3) & 0x7fffffff);
  t.sampling = "mixed";
  for (int64_t i : {0, 1, 2, 5}) {
    r.index = i;
    const json m = json::parse(openai_request_body(r, t));
    EXPECT_EQ(sampling_of(t, i), i % 2 == 0 ? "greedy" : "seeded");
    EXPECT_EQ(m.contains("seed"), i % 2 == 1) << i;
    EXPECT_EQ(m["temperature"], i % 2 == 0 ? 0.0 : 1.0) << i;
  }
}

// keep_text: the record holds the text of every content chunk, in order (what --outputs writes).
TEST(OpenAiStream, KeepsTheGeneratedTextWhenAsked) {
  FakeServer s;
  s.steps = {{0, text_chunk("Once")}, {0, text_chunk(" upon")}, {0, text_chunk(" a time")}, {0, "[DONE]"}};
  OpenAiTarget t;
  EXPECT_EQ(run_openai_stream(s.fn(), request(), t).text, "");
  t.keep_text = true;
  const RequestRecord r = run_openai_stream(s.fn(), request(), t);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.text, "Once upon a time");
}

// A stream the server ends with finish_reason "cancelled" (a cell stopping under it) is cut
// short, not complete, even with [DONE] after it: a failed record.
TEST(OpenAiStream, AStreamTheServerCancelledFails) {
  FakeServer s;
  s.steps = {{0, text_chunk("Once")},
             {0, json({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "cancelled"}}}}}).dump()},
             {0, "[DONE]"}};
  const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("finish_reason \"cancelled\""), std::string::npos) << r.error;
}

TEST(OpenAiStream, TimesFirstTokenAndEachChunkAndReadsUsage) {
  FakeServer s;
  s.steps = {{60, text_chunk("Once")},
             {30, text_chunk(" upon")},
             {30, text_chunk(" a time")},
             {0, json({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}}).dump()},
             {0, json({{"choices", json::array()}, {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 4}}}}).dump()},
             {0, "[DONE]"}};
  OpenAiTarget t;
  const RequestRecord r = run_openai_stream(s.fn(), request(), t);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(s.path, "/v1/completions");
  EXPECT_EQ(json::parse(s.body)["max_tokens"], 3);
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.priority, "high");
  EXPECT_EQ(r.output_tokens, 4);  // the usage chunk's count wins over the 3 content chunks
  EXPECT_EQ(r.prompt_tokens, 5);
  ASSERT_EQ(r.token_times_s.size(), 3u);  // the empty finishing text is not a token
  EXPECT_EQ(r.first_token_s, r.token_times_s[0]);
  EXPECT_GE(r.first_token_s - r.send_s, 0.055);
  EXPECT_LT(r.first_token_s - r.send_s, 1.0);
  EXPECT_GE(r.token_times_s[1] - r.token_times_s[0], 0.025);
  EXPECT_GE(r.token_times_s[2] - r.token_times_s[1], 0.025);
  EXPECT_GE(r.end_s, r.token_times_s[2]);
}

TEST(OpenAiStream, WithoutUsageCountsChunksAndTakesTheHint) {
  FakeServer s;
  s.steps = {{0, text_chunk("a")}, {0, "  " + text_chunk("b") + "\r\n"}, {0, ""}, {0, "[DONE]"}};
  const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_EQ(r.prompt_tokens, 4);
}

TEST(OpenAiStream, ChatDeltasAreContent) {
  FakeServer s;
  s.steps = {{0, json({{"choices", {{{"delta", {{"role", "assistant"}}}}}}}).dump()},  // role only: no content
             {10, json({{"choices", {{{"delta", {{"content", "Hi"}}}}}}}).dump()},
             {0, "[DONE]"}};
  OpenAiTarget t;
  t.endpoint = "/v1/chat/completions";
  const RequestRecord r = run_openai_stream(s.fn(), request(), t);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.token_times_s.size(), 1u);
  EXPECT_GE(r.first_token_s - r.send_s, 0.009);
}

TEST(OpenAiStream, FailuresAreRecorded) {
  {
    FakeServer s;  // the transport fails after a token
    s.steps = {{0, text_chunk("a")}};
    s.end = Status::error("HTTP 503: server overloaded\nretry later");
    const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "HTTP 503: server overloaded retry later");  // one line
  }
  {
    FakeServer s;  // an error event mid-stream stops the reading
    s.steps = {{0, text_chunk("a")}, {0, R"({"error": {"message": "out of memory", "type": "server_error"}})"},
               {0, text_chunk("b")}};
    const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "the server sent an error: out of memory");
    EXPECT_EQ(s.delivered, 2);
  }
  {
    FakeServer s;
    s.steps = {{0, "not json"}};
    const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("not a JSON object: not json"), std::string::npos);
  }
  {
    FakeServer s;  // a clean stream with nothing in it
    s.steps = {{0, json({{"choices", json::array()}, {"usage", {{"completion_tokens", 0}}}}).dump()}, {0, "[DONE]"}};
    const RequestRecord r = run_openai_stream(s.fn(), request(), OpenAiTarget{});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "the stream ended without any content");
  }
}

}  // namespace
}  // namespace th::bench
