#include "http/http_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http/loop_mailbox.h"
#include "http/response_exchange.h"
#include "http/response_writer.h"

namespace th::http {
namespace {

TEST(HttpResponse, ErrorBodyHasOpenAisShape) {
  HttpResponse r = error_response(400, ApiError{"max_tokens must be positive", "", "max_tokens", std::nullopt});
  EXPECT_EQ(r.status, 400);
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.size(), 1u);
  EXPECT_EQ(j["error"]["message"], "max_tokens must be positive");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(nlohmann::json::parse(error_response(401, "no key").body)["error"]["type"], "authentication_error");
  EXPECT_EQ(nlohmann::json::parse(error_response(503, "loading").body)["error"]["type"], "server_error");
  // Invalid UTF-8 echoed into a message does not throw.
  EXPECT_NO_THROW(error_response(400, std::string("bad \xff\xfe byte")));
}

TEST(HttpResponse, RetryAfterAndSetHeaderReplace) {
  HttpResponse r = error_response(429, "slow down");
  set_retry_after(r, std::chrono::seconds(7));
  set_retry_after(r, std::chrono::seconds(2));
  int n = 0;
  for (const HttpHeader& h : r.headers)
    if (h.name == "Retry-After") {
      ++n;
      EXPECT_EQ(h.value, "2");
    }
  EXPECT_EQ(n, 1);
}

TEST(HttpResponse, HeadDropsFramingAndUnsafeHeaders) {
  const std::vector<HttpHeader> headers = {
      {"Content-Type", "text/plain"}, {"Content-Length", "999"}, {"connection", "keep-alive"},
      {"X-Split", "a\r\nInjected: yes"}, {"Bad Name", "v"},       {"X-Ok", "fine"},
  };
  const std::string head = serialize_head(200, headers, BodyFraming::kContentLength, 5, true, 1, "id-1");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(head.find("Content-Type: text/plain\r\n"), std::string::npos);
  EXPECT_NE(head.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_EQ(head.find("999"), std::string::npos);
  EXPECT_EQ(head.find("Injected"), std::string::npos);
  EXPECT_EQ(head.find("Bad Name"), std::string::npos);
  EXPECT_NE(head.find("X-Ok: fine\r\n"), std::string::npos);
  EXPECT_NE(head.find("X-Request-Id: id-1\r\n"), std::string::npos);
  EXPECT_EQ(head.find("Connection"), std::string::npos);  // keep-alive is HTTP/1.1's default
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));
  const std::string closing = serialize_head(204, {}, BodyFraming::kContentLength, 0, false, 0, "");
  EXPECT_EQ(closing.find("Content-Length"), std::string::npos);  // 204 has no body
  EXPECT_NE(closing.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(serialize_head(200, {}, BodyFraming::kChunked, 0, true, 0, "").find("Connection: keep-alive"),
            std::string::npos);
}

// A mailbox no loop reads: closed at the end, as a loop closes its own, which
// drops the exchanges posted to it (they hold the mailbox, it holds them).
struct TestMailbox {
  TestMailbox() : mailbox(LoopMailbox::create().value()) {}
  ~TestMailbox() { mailbox->close(); }
  std::shared_ptr<LoopMailbox> mailbox;
};

// The writer's wire format without a server: what the loop would take.
TEST(HttpResponse, WriterStreamsChunksAndEndsOnce) {
  TestMailbox mb;
  auto ex = std::make_shared<ResponseExchange>(mb.mailbox, 1, "rid", 1, true);
  bool closed_called = false;
  {
    ResponseWriter w(ex);
    w.on_close([&] { closed_called = true; });
    EXPECT_FALSE(w.write("too early"));
    EXPECT_TRUE(w.start_sse());
    EXPECT_FALSE(w.send(text_response(200, "x")));  // already started
    EXPECT_TRUE(w.send_event("{\"a\":1}"));
    EXPECT_TRUE(w.write(""));  // nothing, and no terminating chunk
    EXPECT_TRUE(w.end());
    EXPECT_FALSE(w.end());
    EXPECT_EQ(w.request_id(), "rid");
  }
  ResponseExchange::Output o = ex->take_output();
  EXPECT_TRUE(o.done);
  EXPECT_FALSE(o.close_after);
  const size_t body = o.bytes.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_NE(o.bytes.find("Content-Type: text/event-stream"), std::string::npos);
  EXPECT_EQ(o.bytes.substr(body + 4), "f\r\ndata: {\"a\":1}\n\n\r\n0\r\n\r\n");
  ex->mark_closed();
  EXPECT_FALSE(closed_called);  // the response was complete: nothing to cancel
}

TEST(HttpResponse, AbandonedWriterBecomes500OrACutStream) {
  TestMailbox mb;
  auto never = std::make_shared<ResponseExchange>(mb.mailbox, 1, "a", 1, true);
  { ResponseWriter w(never); }
  ResponseExchange::Output o = never->take_output();
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.bytes.rfind("HTTP/1.1 500", 0), 0u);

  auto cut = std::make_shared<ResponseExchange>(mb.mailbox, 2, "b", 1, true);
  {
    ResponseWriter w(cut);
    w.start_stream();
    w.write("partial");
  }
  o = cut->take_output();
  EXPECT_TRUE(o.done);
  EXPECT_TRUE(o.close_after);
  EXPECT_EQ(o.bytes.find("0\r\n\r\n"), std::string::npos);

  // After the client is gone every call fails and on_close runs at once.
  auto gone = std::make_shared<ResponseExchange>(mb.mailbox, 3, "c", 1, true);
  ResponseWriter w(gone);
  w.start_sse();
  int calls = 0;
  w.on_close([&] { ++calls; });
  gone->mark_closed();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(w.closed());
  EXPECT_FALSE(w.send_event("x"));
  w.on_close([&] { ++calls; });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace th::http
