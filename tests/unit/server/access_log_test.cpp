#include "server/access_log.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/http_request.h"

namespace th::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

AccessRecord full_record() {
  AccessRecord r;
  r.time = system_clock::time_point(milliseconds(1700000000123));
  r.request_id = "9f3ac1d2-17";
  r.method = "POST";
  r.path = "/v1/completions";
  r.status = 200;
  r.tenant = "acme";
  r.prompt_tokens = 12;
  r.completion_tokens = 30;
  r.cached_tokens = 8;
  r.queue_ms = 1.25;
  r.ttft_ms = 40.5;
  r.e2e_ms = 610.0001234;
  r.finish_reason = "stop";
  r.bytes_out = 1234;
  r.client = "10.0.0.7:51234";
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path() {
  char path[] = "/tmp/th_access_log_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  return path;
}

TEST(AccessLog, Rfc3339UtcWithMilliseconds) {
  EXPECT_EQ(rfc3339_utc_ms(system_clock::time_point()), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_utc_ms(system_clock::time_point(milliseconds(1700000000123))), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(rfc3339_utc_ms(system_clock::time_point(milliseconds(951782400007))), "2000-02-29T00:00:00.007Z");
  EXPECT_EQ(rfc3339_utc_ms(system_clock::time_point(milliseconds(-1))), "1969-12-31T23:59:59.999Z");
}

TEST(AccessLog, FormatsOneLineWithEveryFieldInOrder) {
  EXPECT_EQ(AccessLog::format(full_record()),
            R"({"time":"2023-11-14T22:13:20.123Z","request_id":"9f3ac1d2-17","method":"POST",)"
            R"("path":"/v1/completions","status":200,"tenant":"acme","prompt_tokens":12,)"
            R"("completion_tokens":30,"cached_tokens":8,"queue_ms":1.25,"ttft_ms":40.5,)"
            R"("e2e_ms":610.0,"finish_reason":"stop","bytes_out":1234,"client":"10.0.0.7:51234"})"
            "\n");
}

TEST(AccessLog, AbsentFieldsAreNullAndEveryKeyIsAlwaysThere) {
  AccessRecord r;
  r.method = "GET";
  r.path = "/v1/models";
  r.status = 401;
  nlohmann::json j = nlohmann::json::parse(AccessLog::format(r));
  EXPECT_EQ(j.size(), 15u);
  for (const char* k : {"request_id", "tenant", "queue_ms", "ttft_ms", "e2e_ms", "finish_reason", "client"})
    EXPECT_TRUE(j.at(k).is_null()) << k;
  EXPECT_EQ(j.at("status"), 401);
  EXPECT_EQ(j.at("prompt_tokens"), 0);
}

TEST(AccessLog, EscapesAndSurvivesBadUtf8) {
  AccessRecord r = full_record();
  r.path = "/v1/\"quoted\"\n\xff\xfe";
  std::string line = AccessLog::format(r);
  ASSERT_EQ(line.find('\n'), line.size() - 1);  // one line, whatever the input
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j.at("path"), "/v1/\"quoted\"\n\xef\xbf\xbd\xef\xbf\xbd");
}

// The record has no place for text; the one way text could leak is the
// request target, and the query is cut off. The test runs a request the way
// the server will: the record built from the HttpRequest and the results.
TEST(AccessLog, NoPromptOrCompletionTextEverAppears) {
  const std::string prompt = "PROMPT-TEXT-7f1c the quick brown fox";
  const std::string completion = "COMPLETION-TEXT-a9e2 jumps over";
  const std::string api_key = "sk-secret-key-0123456789";
  http::HttpRequest req;
  req.method = "POST";
  req.target = "/v1/completions?prompt=PROMPT-TEXT-7f1c";
  req.path = "/v1/completions";
  req.query = "prompt=PROMPT-TEXT-7f1c";
  req.headers = {{"authorization", "Bearer " + api_key}, {"content-type", "application/json"}};
  req.body = R"({"model":"m","prompt":")" + prompt + R"("})";
  req.id = "abcd0123-1";
  std::string response_body = R"({"choices":[{"text":")" + completion + R"("}]})";

  AccessRecord r;
  r.time = system_clock::now();
  r.request_id = req.id;
  r.method = req.method;
  r.path = req.target;  // even given the whole target, the query is dropped
  r.status = 200;
  r.tenant = "acme";
  r.prompt_tokens = 9;
  r.completion_tokens = 5;
  r.bytes_out = static_cast<int64_t>(response_body.size());
  r.finish_reason = "length";

  std::string path = temp_path();
  {
    Result<std::unique_ptr<AccessLog>> log = AccessLog::open(path);
    ASSERT_TRUE(log.ok()) << log.message();
    (*log)->write(r);
  }
  std::string written = read_file(path);
  std::remove(path.c_str());
  ASSERT_FALSE(written.empty());
  for (const std::string& secret : {std::string("PROMPT-TEXT"), std::string("COMPLETION-TEXT"), std::string("quick"),
                                    std::string("jumps"), api_key, std::string("sk-secret")})
    EXPECT_EQ(written.find(secret), std::string::npos) << secret << " in " << written;
  nlohmann::json j = nlohmann::json::parse(written);
  EXPECT_EQ(j.at("path"), "/v1/completions");
  // The keys are exactly the documented ones: a new field is a deliberate change here.
  std::set<std::string> keys;
  for (auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"time", "request_id", "method", "path", "status", "tenant", "prompt_tokens",
                                         "completion_tokens", "cached_tokens", "queue_ms", "ttft_ms", "e2e_ms",
                                         "finish_reason", "bytes_out", "client"}));
}

void hammer(AccessLog& log, int threads, int per_thread) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&log, t, per_thread] {
      AccessRecord r = full_record();
      r.path = cat("/v1/", std::string(3000, 'p'));  // lines longer than a pipe buffer's atomic write
      for (int i = 0; i < per_thread; ++i) {
        r.request_id = std::to_string(t) + "-" + std::to_string(i);
        log.write(r);
      }
    });
  for (std::thread& t : ts) t.join();
}

void expect_whole_lines(const std::string& text, size_t expected) {
  std::set<std::string> ids;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "torn line: " << line.substr(0, 80);
    ids.insert(j.at("request_id").get<std::string>());
  }
  EXPECT_EQ(ids.size(), expected);
}

TEST(AccessLog, ConcurrentWritersToAPathNeverInterleave) {
  std::string path = temp_path();
  {
    Result<std::unique_ptr<AccessLog>> log = AccessLog::open(path);
    ASSERT_TRUE(log.ok()) << log.message();
    hammer(**log, 8, 200);
    EXPECT_EQ((*log)->write_errors(), 0u);
  }
  {
    // Reopening appends.
    Result<std::unique_ptr<AccessLog>> log = AccessLog::open(path);
    ASSERT_TRUE(log.ok());
    AccessRecord r = full_record();
    r.request_id = "appended";
    (*log)->write(r);
  }
  expect_whole_lines(read_file(path), 8 * 200 + 1);
  std::remove(path.c_str());
}

TEST(AccessLog, ConcurrentWritersToAFileStarNeverInterleave) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  AccessLog log(f);
  hammer(log, 8, 200);
  std::string text;
  std::rewind(f);
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  expect_whole_lines(text, 8 * 200);
}

TEST(AccessLog, FailuresAreCountedNotThrown) {
  std::FILE* f = std::fopen("/dev/null", "r");  // writes fail
  ASSERT_NE(f, nullptr);
  AccessLog log(f);
  log.write(full_record());
  log.write(full_record());
  EXPECT_EQ(log.write_errors(), 2u);
  std::fclose(f);
  Result<std::unique_ptr<AccessLog>> bad = AccessLog::open("/nonexistent-dir/access.log");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/nonexistent-dir/access.log: cannot open the access log"), std::string::npos);
}

}  // namespace
}  // namespace th::server
