#include "client/http_response_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace th::client {
namespace {

struct Parsed {
  Status status;
  int code = 0;
  std::string body;
  bool done = false;
  bool keep_alive = false;
  size_t used = 0;
  std::vector<Header> headers;
};

// Feeds `wire` in pieces of `step` bytes (0: all at once), then EOF when `eof`.
Parsed parse(std::string_view wire, size_t step = 0, bool eof = false, std::string_view method = "GET") {
  HttpResponseParser p;
  p.reset(method);
  Parsed out;
  size_t off = 0;
  while (off < wire.size() && !p.done()) {
    const size_t n = step == 0 ? wire.size() - off : std::min(step, wire.size() - off);
    Result<size_t> used = p.feed(wire.substr(off, n), &out.body);
    if (!used.ok()) {
      out.status = used.status();
      return out;
    }
    off += *used;
    if (*used < n) break;
  }
  if (eof && !p.done()) out.status = p.finish_at_eof();
  out.used = off;
  out.code = p.status();
  out.done = p.done();
  out.keep_alive = p.keep_alive();
  out.headers = p.headers();
  return out;
}

TEST(HttpResponseParser, ContentLengthInAnyPieces) {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhelloNEXT";
  for (size_t step : {0, 1, 2, 7}) {
    Parsed r = parse(wire, step);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.code, 200);
    EXPECT_EQ(r.body, "hello");
    EXPECT_TRUE(r.keep_alive);
    EXPECT_EQ(r.used, wire.size() - 4);  // stops at the response's end
    ASSERT_EQ(r.headers.size(), 2u);
    EXPECT_EQ(r.headers[1].name, "x-a");
    EXPECT_EQ(r.headers[1].value, "b");
  }
}

TEST(HttpResponseParser, Chunked) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
  for (size_t step : {0, 1, 3}) {
    Parsed r = parse(wire, step);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.body, "hello 0123456789");
    EXPECT_EQ(r.used, wire.size());
  }
}

TEST(HttpResponseParser, BareLfLineEnds) {
  Parsed r = parse("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n");
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.body, "abc");
  EXPECT_TRUE(r.done);
}

TEST(HttpResponseParser, UntilCloseAndConnectionClose) {
  Parsed r = parse("HTTP/1.1 200 OK\r\n\r\nsome body", 4, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.body, "some body");
  EXPECT_FALSE(r.keep_alive);
  EXPECT_FALSE(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keep_alive);
}

TEST(HttpResponseParser, NoBodyForHead204304AndInterimResponsesAreSkipped) {
  EXPECT_TRUE(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 0, false, "HEAD").done);
  EXPECT_TRUE(parse("HTTP/1.1 204 No Content\r\n\r\n").done);
  EXPECT_TRUE(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n").done);
  Parsed r = parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(r.code, 201);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.headers.size(), 1u);
}

TEST(HttpResponseParser, Errors) {
  for (const char* bad : {"HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 abc\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "HTTP/1.1 200 OK\r\n folded\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
                          "HTTP/1.1 101 Switching\r\n\r\n"})
    EXPECT_FALSE(parse(bad).status.ok()) << bad;
  EXPECT_TRUE(parse("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc").done);
  EXPECT_FALSE(parse("HTTP/1.1 200 OK\r\n" + std::string(70000, 'a') + "\r\n\r\n").status.ok());
}

TEST(HttpResponseParser, EofBeforeTheEnd) {
  Parsed none = parse("", 0, true);
  EXPECT_EQ(none.status.message(), "connection closed before a response");
  EXPECT_FALSE(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, true).status.ok());
  EXPECT_FALSE(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", 0, true).status.ok());
}

}  // namespace
}  // namespace th::client
