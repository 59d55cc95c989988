// Writes seed inputs for proxy_request_fuzz into the directory given as argv[1]:
// the endpoint byte (0 completions, 1 chat, 2 generate), a request body, then
// 0xFF-separated SSE payloads as a cell sends them.
#include <string>
#include <utility>
#include <vector>

#include "corpus_writer.h"

namespace {

// `depth` nested arrays around a 1.
std::string deep(size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }
// One array of `n` small integers.
std::string wide(size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += i ? ",7" : "7";
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<std::filesystem::path> corpus = th::fuzz::corpus_dir(argc, argv);
  if (!corpus) return 2;
  const std::string sep = "\xff";
  const std::vector<std::pair<char, std::string>> seeds = {
      {0, R"({"prompt":"Once upon a time","max_tokens":16,"stream":true})" + sep +
              R"({"id":"cmpl-1","created":1,"choices":[{"index":0,"text":",","token_ids":[432],"prompt_token_ids":[1,403],"finish_reason":null}]})" +
              sep + R"({"id":"cmpl-1","choices":[{"index":0,"text":" there","token_ids":[383],"finish_reason":"length"}]})" + sep + "[DONE]"},
      {1, R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"stream":true,"seed":4})" + sep +
              R"({"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})" + sep +
              R"({"id":"c","choices":[{"index":0,"delta":{"content":"Hello"},"token_ids":[5],"prompt_token_ids":[1,2,3]}]})" + sep +
              R"({"error":{"message":"boom","type":"server_error"}})"},
      {2, R"({"prompt":[1,2,3],"stream":true,"return_token_ids":true,"priority":"high"})" + sep +
              R"({"choices":[{"text":"a","token_ids":["x",-1,99999999999]}]})"},
      {0, R"({"prompt":["a","b"],"n":2,"stream":true,"echo":true})" + sep + R"({"choices":[{"index":1,"text":"z"}],"usage":null})"},
      {0, R"({"prompt":"x","stream":"yes","n":"two","seed":"s"})"},
      {0, "[1,2]"},
      // #15: deep (past every limit, and just at the request's 64) and wide inputs, as a
      // body, a chunk, a heartbeat and an etcd line. One is #15's crash, 100,000 levels
      // (200 KB); the others stay small, so that the fuzzer runs fast.
      {0, "{\"prompt\":" + deep(100'000) + "}"},
      {0, "{\"prompt\":" + deep(63) + ",\"stream\":true}" + sep + "{\"choices\":" + deep(2'000) + "}" + sep +
              "{\"choices\":" + deep(31) + "}"},
      {1, "{\"messages\":" + std::string(2'000, '{')},
      {0, R"({"prompt":"x","stream":true})" + sep + R"({"running":)" + deep(17) + "}" + sep +
              R"({"result":{"header":{"revision":"3"},"events":[)" + deep(20) + "]}}" + sep + R"({"error":)" + deep(16) + "}"},
      {2, "{\"prompt\":" + wide(5'000) + ",\"stream\":true}" + sep + "{\"choices\":[{\"token_ids\":" + wide(5'000) +
              "}]}" + sep + R"({"running":1,"ready":true,"w":)" + wide(5'000) + "}"},
  };
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!th::fuzz::write_seed(*corpus, i, std::string(1, seeds[i].first) + seeds[i].second)) return 1;
  return 0;
}
