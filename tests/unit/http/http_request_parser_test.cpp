#include "http/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace th::http {
namespace {

using namespace std::string_literals;

// What a byte stream parses to: the complete requests, then the error (if any).
struct Parsed {
  std::vector<HttpRequest> requests;
  int error_status = 0;
  std::string error_reason;
  bool pending = false;  // a partial request at the end
};

// Feeds `input` in pieces cut at `cuts` (ascending offsets), taking every
// complete request, as a connection would.
Parsed parse_cut(std::string_view input, const std::vector<size_t>& cuts, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  Parsed out;
  size_t begin = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(input.size());
  for (size_t end : ends) {
    std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    while (true) {
      const size_t used = p.feed(piece);
      piece.remove_prefix(used);
      if (p.state() == HttpRequestParser::State::kComplete) {
        out.requests.push_back(p.take());
        continue;
      }
      if (p.state() == HttpRequestParser::State::kError) {
        out.error_status = p.error().status;
        out.error_reason = p.error().reason;
        return out;
      }
      EXPECT_TRUE(piece.empty());
      break;
    }
  }
  out.pending = p.started();
  return out;
}

Parsed parse(std::string_view input, HttpLimits limits = {}) { return parse_cut(input, {}, limits); }

int error_of(std::string_view input, HttpLimits limits = {}) { return parse(input, limits).error_status; }

void expect_same(const Parsed& a, const Parsed& b, const std::string& where) {
  ASSERT_EQ(a.requests.size(), b.requests.size()) << where;
  EXPECT_EQ(a.error_status, b.error_status) << where;
  EXPECT_EQ(a.pending, b.pending) << where;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const HttpRequest &x = a.requests[i], &y = b.requests[i];
    EXPECT_EQ(x.method, y.method) << where;
    EXPECT_EQ(x.target, y.target) << where;
    EXPECT_EQ(x.path, y.path) << where;
    EXPECT_EQ(x.query, y.query) << where;
    EXPECT_EQ(x.version_minor, y.version_minor) << where;
    EXPECT_EQ(x.body, y.body) << where;
    EXPECT_EQ(x.keep_alive, y.keep_alive) << where;
    EXPECT_EQ(x.expects_continue, y.expects_continue) << where;
    ASSERT_EQ(x.headers.size(), y.headers.size()) << where;
    for (size_t h = 0; h < x.headers.size(); ++h) {
      EXPECT_EQ(x.headers[h].name, y.headers[h].name) << where;
      EXPECT_EQ(x.headers[h].value, y.headers[h].value) << where;
    }
  }
}

const char* const kValidStreams[] = {
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /v1/models?limit=3&x HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/7.88\r\nAccept: */*\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
    "{\"prompt\":\"hi\"}\r\n",
    "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\nY: u\r\n\r\n",
    // three pipelined requests, the last with a body
    "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"
    "PUT /c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz",
    "GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET /lf HTTP/1.1\nHost: h\nX: y\n\n",
    "\r\n\r\nGET /after-blank-lines HTTP/1.1\r\nHost: h\r\n\r\n",
    // a partial request at the end
    "GET /done HTTP/1.1\r\nHost: h\r\n\r\nPOST /partial HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345",
};

TEST(HttpRequestParser, EverySplitPointGivesTheSameResult) {
  for (std::string_view input : kValidStreams) {
    const Parsed whole = parse(input);
    EXPECT_EQ(whole.error_status, 0) << input << ": " << whole.error_reason;
    ASSERT_FALSE(whole.requests.empty()) << input;
    for (size_t cut = 0; cut <= input.size(); ++cut)
      expect_same(whole, parse_cut(input, {cut}), std::string(input) + " cut at " + std::to_string(cut));
    std::vector<size_t> every;
    for (size_t i = 1; i < input.size(); ++i) every.push_back(i);
    expect_same(whole, parse_cut(input, every), std::string(input) + " byte by byte");
  }
}

TEST(HttpRequestParser, ParsesFields) {
  Parsed p = parse(kValidStreams[1]);
  ASSERT_EQ(p.requests.size(), 1u);
  const HttpRequest& r = p.requests[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/models?limit=3&x");
  EXPECT_EQ(r.path, "/v1/models");
  EXPECT_EQ(r.query, "limit=3&x");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(r.headers.size(), 3u);
  EXPECT_EQ(r.headers[1].name, "user-agent");  // names lower-cased
  EXPECT_EQ(r.header("USER-AGENT").value_or(""), "curl/7.88");
  EXPECT_FALSE(r.header("cookie").has_value());
  EXPECT_FALSE(p.pending);
}

TEST(HttpRequestParser, ContentLengthBody) {
  Parsed p = parse(kValidStreams[2]);
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "{\"prompt\":\"hi\"}\r\n");
}

TEST(HttpRequestParser, ChunkedBodyWithExtensionsAndTrailers) {
  Parsed p = parse(kValidStreams[3]);
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "helloabcdefghijklmnopqrstuvwxyz");
  EXPECT_FALSE(p.requests[0].header("x-trailer").has_value());  // trailers are dropped
  // Extensions with BWS and a quoted value; upper-case hex; LF-only lines.
  p = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
            "a ; x=\"q v\"\r\n0123456789\r\n00\n\n");
  ASSERT_EQ(p.requests.size(), 1u) << p.error_reason;
  EXPECT_EQ(p.requests[0].body, "0123456789");
}

TEST(HttpRequestParser, Pipelined) {
  Parsed p = parse(kValidStreams[4]);
  ASSERT_EQ(p.requests.size(), 3u);
  EXPECT_EQ(p.requests[0].path, "/a");
  EXPECT_EQ(p.requests[1].path, "/b");
  EXPECT_EQ(p.requests[2].method, "PUT");
  EXPECT_EQ(p.requests[2].body, "xyz");
  p = parse(kValidStreams[8]);
  EXPECT_EQ(p.requests.size(), 1u);
  EXPECT_TRUE(p.pending);
}

TEST(HttpRequestParser, FeedStopsAtTheEndOfEachRequest) {
  HttpRequestParser p;
  const std::string two = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
  const size_t used = p.feed(two);
  EXPECT_EQ(used, two.size() / 2);
  ASSERT_EQ(p.state(), HttpRequestParser::State::kComplete);
  EXPECT_EQ(p.feed(two.substr(used)), 0u);  // nothing more until take()
  EXPECT_EQ(p.take().path, "/1");
  EXPECT_EQ(p.feed(two.substr(used)), two.size() / 2);
  EXPECT_EQ(p.take().path, "/2");
  EXPECT_FALSE(p.started());
}

TEST(HttpRequestParser, KeepAliveSemantics) {
  auto ka = [](const char* s) {
    Parsed p = parse(s);
    EXPECT_EQ(p.requests.size(), 1u) << s << p.error_reason;
    return p.requests.empty() ? false : p.requests[0].keep_alive;
  };
  EXPECT_TRUE(ka("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_FALSE(ka("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(ka("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n"));
  EXPECT_FALSE(ka("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_TRUE(ka("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
  EXPECT_FALSE(ka("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"));
  // HTTP/1.2..1.9 are HTTP/1.1 to us.
  EXPECT_TRUE(ka("GET / HTTP/1.9\r\nHost: h\r\n\r\n"));
}

TEST(HttpRequestParser, ExpectContinue) {
  HttpRequestParser p;
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n";
  EXPECT_EQ(p.feed(head), head.size());
  EXPECT_TRUE(p.in_body());
  EXPECT_TRUE(p.expects_continue());
  p.feed("body");
  ASSERT_EQ(p.state(), HttpRequestParser::State::kComplete);
  EXPECT_EQ(p.take().body, "body");
  // No body: nothing to continue. HTTP/1.0: Expect is ignored.
  Parsed q = parse("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_EQ(q.requests.size(), 1u);
  EXPECT_FALSE(q.requests[0].expects_continue);
  q = parse("POST / HTTP/1.0\r\nExpect: something-else\r\nContent-Length: 1\r\n\r\nx");
  ASSERT_EQ(q.requests.size(), 1u);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\nContent-Length: 1\r\n\r\nx"), 417);
}

TEST(HttpRequestParser, TargetForms) {
  Parsed p = parse("GET http://example.com:80/p/q?r=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
                   "GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n"
                   "GET http://h?x HTTP/1.1\r\nHost: h\r\n\r\n"
                   "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 4u) << p.error_reason;
  EXPECT_EQ(p.requests[0].path, "/p/q");
  EXPECT_EQ(p.requests[0].query, "r=1");
  EXPECT_EQ(p.requests[1].path, "/");
  EXPECT_EQ(p.requests[2].path, "/");
  EXPECT_EQ(p.requests[2].query, "x");
  EXPECT_EQ(p.requests[3].path, "*");
}

TEST(HttpRequestParser, LineFeedOnlyIsAcceptedBareCarriageReturnIsNot) {
  Parsed p = parse("POST /x HTTP/1.1\nHost: h\nContent-Length: 2\n\nok");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "ok");
  EXPECT_EQ(error_of("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\r\n\r\n"), 400);
}

struct BadCase {
  const char* name;
  std::string input;
  int status;
};

TEST(HttpRequestParser, EachMalformedInputGetsItsStatus) {
  const std::string cl = "POST / HTTP/1.1\r\nHost: h\r\n";
  const std::string te = cl + "Transfer-Encoding: chunked\r\n\r\n";
  const std::vector<BadCase> cases = {
      {"no spaces", "GET\r\n\r\n", 400},
      {"one space", "GET /\r\n\r\n", 400},
      {"two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"trailing space", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
      {"leading space", " GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"HTTP/0.9", "GET /\r\n\r\n", 400},
      {"lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400},
      {"version garbage", "GET / HTTP/1.1x\r\nHost: h\r\n\r\n", 400},
      {"version short", "GET / HTTP/1\r\nHost: h\r\n\r\n", 400},
      {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
      {"HTTP/0.9 spelled", "GET / HTTP/0.9\r\n\r\n", 505},
      {"method with slash", "GE/T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"method with NUL", "GE\0T / HTTP/1.1\r\nHost: h\r\n\r\n"s, 400},
      {"method too long", std::string(40, 'A') + " / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"method non-ASCII", "G\xc3\xa9T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"target control byte", "GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"target non-ASCII", "GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"target relative", "GET a/b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"target star not OPTIONS", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"target empty authority", "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"no Host in 1.1", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"folding", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n  b\r\n\r\n", 400},
      {"folding tab", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400},
      {"no colon", "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
      {"empty name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400},
      {"NUL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n"s, 400},
      {"NUL in name", "GET / HTTP/1.1\r\nHost: h\r\nX\0: ab\r\n\r\n"s, 400},
      {"DEL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400},
      {"negative CL", cl + "Content-Length: -1\r\n\r\n", 400},
      {"non-numeric CL", cl + "Content-Length: 12a\r\n\r\n", 400},
      {"hex CL", cl + "Content-Length: 0x10\r\n\r\n", 400},
      {"empty CL", cl + "Content-Length: \r\n\r\n", 400},
      {"comma-only CL", cl + "Content-Length: ,\r\n\r\n", 400},
      {"plus CL", cl + "Content-Length: +5\r\n\r\n", 400},
      {"overflowing CL", cl + "Content-Length: 99999999999999999999999\r\n\r\n", 400},
      {"conflicting CLs", cl + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"conflicting CL list", cl + "Content-Length: 3, 4\r\n\r\nabcd", 400},
      {"CL and TE", cl + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"TE not chunked last", cl + "Transfer-Encoding: chunked, gzip\r\n\r\n", 400},
      {"TE gzip only", cl + "Transfer-Encoding: gzip\r\n\r\n", 400},
      {"TE chunked twice", cl + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"TE gzip then chunked", cl + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"chunk size not hex", te + "xyz\r\n", 400},
      {"chunk size empty", te + "\r\n", 400},
      {"chunk size negative", te + "-5\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk size leading space", te + " 5\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk size trailing junk", te + "5 x\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk size overflow", te + "10000000000000000\r\n", 400},
      {"chunk longer than size", te + "3\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk ext control byte", te + "3;a\x01\r\nabc\r\n0\r\n\r\n", 400},
      {"chunk line too long", te + "3;" + std::string(2000, 'e') + "\r\n", 400},
      {"bad trailer", te + "0\r\nno colon\r\n\r\n", 400},
      {"trailer folding", te + "0\r\nA: b\r\n c\r\n\r\n", 400},
      {"unknown expectation", cl + "Expect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 417},
  };
  for (const BadCase& c : cases) {
    Parsed p = parse(c.input);
    EXPECT_EQ(p.error_status, c.status) << c.name << " (reason: " << p.error_reason << ")";
    EXPECT_TRUE(p.requests.empty()) << c.name;
    // The same at every split point: the error does not depend on how bytes arrive.
    for (size_t cut = 0; cut <= c.input.size(); ++cut)
      EXPECT_EQ(parse_cut(c.input, {cut}).error_status, c.status) << c.name << " cut at " << cut;
  }
}

TEST(HttpRequestParser, HeaderLimits) {
  HttpLimits limits;
  limits.max_header_bytes = 256;
  limits.max_headers = 4;
  const std::string ok = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
  EXPECT_EQ(error_of(ok, limits), 0);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits), 431);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nBig: " + std::string(300, 'x') + "\r\n\r\n", limits), 431);
  EXPECT_EQ(error_of("GET /" + std::string(300, 'x') + " HTTP/1.1\r\nHost: h\r\n\r\n", limits), 414);
  // A head exactly at the limit passes; one byte more does not.
  std::string exact = "GET / HTTP/1.1\r\nHost: h\r\nPad: ";
  exact += std::string(256 - exact.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(exact.size(), 256u);
  EXPECT_EQ(error_of(exact, limits), 0);
  exact.insert(exact.find("pp"), "p");
  EXPECT_EQ(error_of(exact, limits), 431);
  // An endless header line is cut off at the limit, not buffered.
  HttpRequestParser p(limits);
  p.feed("GET / HTTP/1.1\r\nX: ");
  for (int i = 0; i < 100 && p.state() == HttpRequestParser::State::kNeedMore; ++i) p.feed(std::string(64, 'y'));
  EXPECT_EQ(p.state(), HttpRequestParser::State::kError);
  EXPECT_EQ(p.error().status, 431);
  // Blank lines before a request count against the limit too.
  EXPECT_EQ(error_of(std::string(300, '\n'), limits), 414);
}

TEST(HttpRequestParser, BodyLimits) {
  HttpLimits limits;
  limits.max_body_bytes = 10;
  const std::string cl = "POST / HTTP/1.1\r\nHost: h\r\n";
  EXPECT_EQ(error_of(cl + "Content-Length: 10\r\n\r\n0123456789", limits), 0);
  // 413 as soon as the header is read: no body byte needs to arrive.
  EXPECT_EQ(error_of(cl + "Content-Length: 11\r\n\r\n", limits), 413);
  const std::string te = cl + "Transfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(error_of(te + "5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n", limits), 0);
  EXPECT_EQ(error_of(te + "5\r\n01234\r\n6\r\n", limits), 413);
  EXPECT_EQ(error_of(te + "b\r\n", limits), 413);
  EXPECT_EQ(error_of(te + "ffffffffffffffff\r\n", limits), 413);
  // Many tiny chunks add up.
  std::string many = te;
  for (int i = 0; i < 11; ++i) many += "1\r\nx\r\n";
  EXPECT_EQ(error_of(many, limits), 413);
}

TEST(HttpRequestParser, ResetsBetweenRequests) {
  HttpRequestParser p;
  const std::string first = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nx";
  ASSERT_EQ(p.feed(first), first.size());
  HttpRequest a = p.take();
  EXPECT_TRUE(a.expects_continue);
  p.feed("GET / HTTP/1.0\r\n\r\n");
  HttpRequest b = p.take();
  EXPECT_FALSE(b.expects_continue);
  EXPECT_TRUE(b.headers.empty());
  EXPECT_TRUE(b.body.empty());
  EXPECT_EQ(b.version_minor, 0);
}

}  // namespace
}  // namespace th::http
