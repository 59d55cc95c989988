#include "server/openai_format.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace th::server {
namespace {

// Token t's text: "<t>" (three or four bytes), so offsets are easy to check.
std::string piece(int32_t t) { return "<" + std::to_string(t) + ">"; }

TokenEvent event(int32_t token, float lp, std::vector<TokenLogprob> top = {}) {
  TokenEvent e;
  e.token = token;
  e.logprob = lp;
  e.top_logprobs = std::move(top);
  return e;
}

Call call_of(ApiEndpoint ep) {
  Call c;
  c.req.endpoint = ep;
  c.response_id = std::string(id_prefix(ep)) + "r1";
  c.created = 1700000000;
  return c;
}

Choice choice_of(size_t prompt, std::vector<int32_t> tokens, int64_t hit) {
  Choice ch;
  ch.prompt_index = prompt;
  ch.token_ids = std::move(tokens);
  ch.metrics.prefix_hit_tokens = hit;
  return ch;
}

TEST(ApiOpenAiFormat, NamesAndPrefixesPerEndpoint) {
  EXPECT_EQ(object_name(ApiEndpoint::Completions, true), "text_completion");
  EXPECT_EQ(object_name(ApiEndpoint::ChatCompletions, false), "chat.completion");
  EXPECT_EQ(object_name(ApiEndpoint::ChatCompletions, true), "chat.completion.chunk");
  EXPECT_EQ(object_name(ApiEndpoint::Generate, true), "generation.chunk");
  EXPECT_EQ(id_prefix(ApiEndpoint::Completions), "cmpl-");
  EXPECT_EQ(id_prefix(ApiEndpoint::ChatCompletions), "chatcmpl-");
  EXPECT_EQ(id_prefix(ApiEndpoint::Generate), "gen-");
}

TEST(ApiOpenAiFormat, UsageCountsCachedTokensPerPromptAtMostItsLength) {
  Call c = call_of(ApiEndpoint::Completions);
  c.prompt_ids = {{1, 2, 3, 4}, {5, 6}};
  c.choices.push_back(choice_of(0, {7, 8}, 3));
  c.choices.push_back(choice_of(0, {9}, 1));   // the best choice of a prompt counts: 3
  c.choices.push_back(choice_of(1, {10}, 16));  // a whole block hit past the prompt: at most 2
  const WireJson u = usage_json(c);
  EXPECT_EQ(u["prompt_tokens"], 6);
  EXPECT_EQ(u["completion_tokens"], 4);
  EXPECT_EQ(u["total_tokens"], 10);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 5);
}

TEST(ApiOpenAiFormat, CompletionLogprobsOffsetsFollowThePieces) {
  const std::vector<TokenEvent> ev = {event(1, -0.5f, {{1, -0.5f}, {2, -1.5f}}), event(22, -0.25f), event(3, -2.0f)};
  const WireJson j = completion_logprobs(ev, 0, 2, 10, /*with_top=*/true, piece);
  EXPECT_EQ(j["tokens"], WireJson({"<1>", "<22>"}));
  EXPECT_EQ(j["token_logprobs"], WireJson({-0.5, -0.25}));
  EXPECT_EQ(j["text_offset"], WireJson({10, 13}));
  EXPECT_EQ(j["top_logprobs"][0]["<2>"], -1.5);
  EXPECT_TRUE(j["top_logprobs"][1].empty());
  const WireJson none = completion_logprobs(ev, 1, 3, 0, /*with_top=*/false, piece);
  EXPECT_TRUE(none["top_logprobs"][0].is_null());
  EXPECT_EQ(none["text_offset"], WireJson({0, 4}));
  // A range past the events stops at their end.
  EXPECT_EQ(completion_logprobs(ev, 2, 9, 0, false, piece)["tokens"].size(), 1u);
}

TEST(ApiOpenAiFormat, ChatLogprobsCarryBytesAndTops) {
  const std::vector<TokenEvent> ev = {event(7, -0.125f, {{7, -0.125f}, {8, -3.0f}})};
  const WireJson j = chat_logprobs(ev, 0, 1, piece);
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["token"], "<7>");
  EXPECT_EQ(j["content"][0]["bytes"], WireJson({'<', '7', '>'}));
  EXPECT_EQ(j["content"][0]["top_logprobs"][1]["token"], "<8>");
  EXPECT_EQ(j["content"][0]["top_logprobs"][1]["logprob"], -3.0);
}

TEST(ApiOpenAiFormat, StreamEventsSendOnlyWhatIsNewThenTheFinish) {
  Call c = call_of(ApiEndpoint::ChatCompletions);
  c.prompt_ids = {{1}};
  Choice ch = choice_of(0, {5}, 0);
  ch.text = "Hel";
  std::optional<std::string> e = next_event(c, ch, "m", piece);
  ASSERT_TRUE(e);
  WireJson j = WireJson::parse(*e);
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_EQ(j["id"], "chatcmpl-r1");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(next_event(c, ch, "m", piece)) << "nothing new";
  ch.text += "lo";
  ch.text_done = true;
  ch.finish_reason = "stop";
  j = WireJson::parse(*next_event(c, ch, "m", piece));
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "lo");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(next_event(c, ch, "m", piece)) << "the finish is sent once";
}

TEST(ApiOpenAiFormat, AFailedChoiceStreamsAnErrorObjectAndACancelledOneNothing) {
  Call c = call_of(ApiEndpoint::Completions);
  c.prompt_ids = {{1}};
  Choice failed = choice_of(0, {}, 0);
  failed.text_done = true;
  failed.finish_reason = "error";
  failed.error = "boom";
  const std::optional<std::string> e = next_event(c, failed, "m", piece);
  ASSERT_TRUE(e);
  EXPECT_EQ(WireJson::parse(*e)["error"]["message"], "boom");
  Choice cancelled = choice_of(0, {}, 0);
  cancelled.text_done = true;
  cancelled.finish_reason = "cancelled";
  EXPECT_FALSE(next_event(c, cancelled, "m", piece));
  EXPECT_TRUE(cancelled.final_sent);
}

TEST(ApiOpenAiFormat, OpeningChunkIsChatsRoleOrTheEchoedPrompt) {
  Call chat = call_of(ApiEndpoint::ChatCompletions);
  chat.prompt_texts = {"p"};
  chat.choices.push_back(choice_of(0, {}, 0));
  const std::optional<WireJson> role = opening_chunk(chat, "m");
  ASSERT_TRUE(role);
  EXPECT_EQ((*role)["choices"][0]["delta"]["role"], "assistant");
  Call plain = call_of(ApiEndpoint::Completions);
  plain.choices.push_back(choice_of(0, {}, 0));
  EXPECT_FALSE(opening_chunk(plain, "m"));
  plain.req.echo = true;
  plain.prompt_texts = {"Once"};
  EXPECT_EQ((*opening_chunk(plain, "m"))["choices"][0]["text"], "Once");
}

TEST(ApiOpenAiFormat, ResponseBodyOfGenerateHasSeedIdsAndUsage) {
  Call c = call_of(ApiEndpoint::Generate);
  c.seed = 42;
  c.prompt_ids = {{1, 2}};
  Choice ch = choice_of(0, {3, 4}, 0);
  ch.text = "ab";
  ch.finish_reason = "length";
  c.choices.push_back(std::move(ch));
  const WireJson j = response_body(c, "m", piece);
  EXPECT_EQ(j["object"], "generation");
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["choices"][0]["text"], "ab");
  EXPECT_EQ(j["choices"][0]["token_ids"], WireJson({3, 4}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["prompt_token_ids"], WireJson({{1, 2}}));
  EXPECT_EQ(j["usage"]["total_tokens"], 4);
}

}  // namespace
}  // namespace th::server
