// libFuzzer target for HttpRequestParser. The first two bytes pick the limits
// (small ones, so that 413/414/431 are reachable in a short input) and a piece
// size; the rest is the byte stream. The stream is parsed whole, cut at a
// fuzzer-chosen point, and in pieces of that size: all three must give the
// same requests and the same error, every error must be a status the parser
// documents, and no request may exceed the limits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_request_parser.h"

namespace {

using th::http::HttpLimits;
using th::http::HttpRequest;
using th::http::HttpRequestParser;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "http_request_parser_fuzz: %s\n", what);
  std::abort();
}

struct Outcome {
  std::vector<std::string> requests;  // a canonical dump of each
  int error = 0;
  bool started = false;
};

std::string dump(const HttpRequest& r) {
  std::string s = r.method + ' ' + r.target + ' ' + r.path + '?' + r.query + ' ' +
                  std::to_string(r.version_minor) + (r.keep_alive ? 'k' : 'c') + (r.expects_continue ? 'e' : '-');
  for (const auto& h : r.headers) s += '\n' + h.name + ':' + h.value;
  return s + "\n\n" + r.body;
}

void check(const HttpRequest& r, const HttpLimits& limits) {
  if (r.body.size() > limits.max_body_bytes) die("body over the limit");
  if (r.headers.size() > limits.max_headers) die("more headers than the limit");
  if (r.method.empty() || r.target.empty() || r.path.empty()) die("empty method, target or path");
  for (const auto& h : r.headers) {
    if (h.name.empty()) die("empty header name");
    for (char c : h.name)
      if (c >= 'A' && c <= 'Z') die("header name not lower-cased");
    for (char c : h.value)
      if (c == '\r' || c == '\n' || c == '\0') die("CR, LF or NUL in a header value");
  }
}

Outcome run(std::string_view input, const HttpLimits& limits, const std::vector<size_t>& cuts) {
  HttpRequestParser p(limits);
  Outcome out;
  size_t begin = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(input.size());
  for (size_t end : ends) {
    std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    while (true) {
      const size_t used = p.feed(piece);
      if (used > piece.size()) die("consumed more than it was given");
      piece.remove_prefix(used);
      if (p.state() == HttpRequestParser::State::kComplete) {
        HttpRequest r = p.take();
        check(r, limits);
        out.requests.push_back(dump(r));
        continue;
      }
      if (p.state() == HttpRequestParser::State::kError) {
        const int s = p.error().status;
        if (s != 400 && s != 413 && s != 414 && s != 417 && s != 431 && s != 501 && s != 505)
          die("undocumented error status");
        if (p.error().reason == nullptr || p.error().reason[0] == '\0') die("error without a reason");
        out.error = s;
        return out;
      }
      if (!piece.empty()) die("needs more but left bytes unread");
      break;
    }
  }
  out.started = p.started();
  return out;
}

bool same(const Outcome& a, const Outcome& b) {
  return a.requests == b.requests && a.error == b.error && a.started == b.started;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  HttpLimits limits;
  if (data[0] & 1) {
    limits.max_header_bytes = 64 + (data[0] >> 1);
    limits.max_headers = 1 + (data[0] >> 5);
    limits.max_body_bytes = data[1] >> 2;
    limits.max_chunk_line_bytes = 8 + (data[1] & 31);
  }
  const size_t piece = 1 + (data[1] & 15);
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  const Outcome whole = run(input, limits, {});
  const size_t cut = input.empty() ? 0 : (static_cast<size_t>(data[0]) * 257 + data[1]) % (input.size() + 1);
  if (!same(whole, run(input, limits, {cut}))) die("a cut changed the result");
  std::vector<size_t> cuts;
  for (size_t i = piece; i < input.size(); i += piece) cuts.push_back(i);
  if (!same(whole, run(input, limits, cuts))) die("small pieces changed the result");
  return 0;
}
