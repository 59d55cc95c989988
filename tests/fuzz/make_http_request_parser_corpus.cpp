// Writes seed inputs for http_request_parser_fuzz into the directory given as
// argv[1]: each is two config bytes (0, 0: default limits, whole pieces) and
// a request stream covering one feature: methods, target forms, headers,
// Content-Length and chunked bodies with extensions and trailers, pipelining,
// Expect, HTTP/1.0, LF-only lines.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "corpus_writer.h"

int main(int argc, char** argv) {
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::filesystem::path& dir = *corpus;
  const std::vector<std::string> seeds = {
      "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /v1/models?x=1 HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer sk-123\r\nContent-Type: "
      "application/json\r\nContent-Length: 31\r\n\r\n{\"prompt\":\"hi\",\"max_tokens\":16}",
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n1A ; q=\"x y\"\r\n"
      "abcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n",
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
      "PUT /c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz",
      "POST /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody",
      "GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\nPOST /x HTTP/1.0\r\nContent-Length: 2\r\n\r\nok",
      "GET /lf HTTP/1.1\nHost: h\nX: y\n\n",
      "\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\nGET http://h:1/p?q HTTP/1.1\r\nHost: h\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n12345",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
  };
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!th::fuzz::write_seed(dir, i, std::string(2, '\0') + seeds[i])) return 1;
  return 0;
}
