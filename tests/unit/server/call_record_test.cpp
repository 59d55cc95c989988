#include "server/call_record.h"

#include <gtest/gtest.h>

namespace th::server {
namespace {

TEST(ApiCallRecord, OneRecordFeedsBothLogsAlike) {
  ApiKey key;
  key.key = "sk-test-0123456789";
  key.tenant = "acme";
  Call c;
  c.key = &key;
  c.tenant = "acme";
  c.request_id = "r-1";
  c.path = "/v1/completions";
  c.client = "127.0.0.1:4242";
  c.req.priority = 5;
  c.received = ApiClock::now();
  c.status = 200;
  c.bytes_out = 321;
  c.prompt_ids = {{1, 2, 3}};
  c.prompt_texts = {"abc"};
  Choice ch;
  ch.token_ids = {4, 5};
  ch.text = "de";
  ch.finish_reason = "stop";
  ch.metrics.prefix_hit_tokens = 2;
  ch.metrics.queue_seconds = 0.002;
  ch.metrics.ttft_seconds = 0.010;
  c.choices.push_back(std::move(ch));
  const CallRecord r = call_record(c, "m");
  const AccessRecord a = access_record(r);
  const audit::AuditEntry e = audit_entry(r);
  EXPECT_EQ(a.request_id, e.request_id);
  EXPECT_EQ(a.tenant, "acme");
  EXPECT_EQ(e.tenant, "acme");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(a.finish_reason, "stop");
  EXPECT_EQ(e.outcome, "stop");
  EXPECT_EQ(a.prompt_tokens, 3);
  EXPECT_EQ(e.prompt_tokens, 3u);
  EXPECT_EQ(a.completion_tokens, 2);
  EXPECT_EQ(e.completion_tokens, 2u);
  EXPECT_EQ(a.cached_tokens, 2);
  EXPECT_DOUBLE_EQ(a.queue_ms, 2.0);
  EXPECT_DOUBLE_EQ(a.ttft_ms, 10.0);
  EXPECT_EQ(a.bytes_out, 321);
  EXPECT_EQ(a.client, "127.0.0.1:4242");
  EXPECT_EQ(e.priority, 5);
  EXPECT_EQ(e.key_id, audit::audit_key_id(key.key));
  EXPECT_EQ(e.route, "/v1/completions");
  EXPECT_EQ(e.prompt_sha256, audit::audit_texts_digest(std::vector<std::string>{"abc"}));
  EXPECT_EQ(e.output_sha256, audit::audit_texts_digest(std::vector<std::string>{"de"}));
}

TEST(ApiCallRecord, ACallThatSentNothingIs499AndARefusalHasNoFinishReason) {
  Call c;
  c.path = "/v1/chat/completions";
  c.received = ApiClock::now();
  EXPECT_EQ(access_record(call_record(c, "m")).status, 499);
  EXPECT_EQ(audit_entry(call_record(c, "m")).outcome, "error");
  const CallRecord r = refusal_record("r-2", "POST", "/v1/completions", "10.0.0.7:5", nullptr, "m", 429, "rate_limited", 99);
  const AccessRecord a = access_record(r);
  EXPECT_EQ(a.status, 429);
  EXPECT_TRUE(a.finish_reason.empty());
  EXPECT_TRUE(a.tenant.empty());
  EXPECT_EQ(a.bytes_out, 99);
  EXPECT_EQ(a.client, "10.0.0.7:5");
  EXPECT_EQ(audit_entry(r).outcome, "rate_limited");
  EXPECT_EQ(audit_entry(r).prompt_sha256, audit::Hash{});
}

}  // namespace
}  // namespace th::server
