// What a user coming from vLLM or llama-server expects of `tokenhive serve` (issue #19):
// /health that says 503 unless serving, --version, and every flag from a TOKENHIVE_*
// environment variable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <regex>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

extern char** environ;

namespace th {
namespace {

using json = nlohmann::json;
using test::HttpReply;
using test::request;
using test::ServeProcess;
using test::TestConnection;

using test::stories;

// /health as llama-server's: 200 while serving, 503 while draining (and while loading:
// ServeLimits.NotReadyIs503 holds an ApiService that has no model yet).
// --warmup N runs N requests through the engine before the server says it is ready; they
// are not clients' requests (no request metrics), only the engine's work.
TEST(ServeConventions, WarmupRunsBeforeReadyAndCountsAsNoClientRequest) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--warmup", "4"});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::string log = s.log();
  const size_t warm = log.find("warm-up: 4 requests (");
  ASSERT_NE(warm, std::string::npos) << log;
  EXPECT_LT(warm, log.find("tokenhive serve: ready")) << log;
  EXPECT_NE(log.find("16 generated)", warm), std::string::npos) << log;  // 4 tokens each
  const std::string metrics = request(s.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("\ntokenhive_requests_total{outcome=\"length\"} 0\n"), std::string::npos) << metrics;
  const std::string generated = "\ntokenhive_engine_tokens_generated_total ";
  const size_t at = metrics.find(generated);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stod(metrics.substr(at + generated.size())), 16) << metrics;
}

TEST(ServeConventions, HealthIs200ServingAnd503Draining) {
  // One sequence at a time: six streams of 400 tokens queue behind each other, so the drain
  // lasts long enough (seconds) for /health to be asked during it.
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--shutdown-timeout", "60", "--max-num-seqs", "1"});
  ASSERT_TRUE(s.ok()) << s.log();
  HttpReply h = request(s.port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["status"], "ok");
  std::vector<std::unique_ptr<TestConnection>> streams;
  const std::string body = json{{"prompt", ""}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}}.dump();
  for (int i = 0; i < 6; ++i) {
    streams.push_back(std::make_unique<TestConnection>(s.port(), std::chrono::seconds(60)));
    ASSERT_TRUE(streams.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                     std::to_string(body.size()) + "\r\n\r\n" + body));
  }
  ASSERT_TRUE(streams[0]->read_until("data: "));
  // Every stream admitted before the signal: a request the server has not read when the drain
  // starts is refused with a 503, rightly, and on a loaded machine that can be any of the five.
  // Admitted: running, waiting, or already finished (a stream can end between two reads of
  // /metrics), all from one read; a finished one can count twice for the moment until the
  // engine's step ends, hence at least 6.
  auto admitted = [&] {
    const std::string m = request(s.port(), "GET", "/metrics").body;
    double n = 0;
    for (std::string_view name : {"\ntokenhive_requests_running ", "\ntokenhive_requests_waiting "}) {
      const size_t at = m.find(name);
      if (at != std::string::npos) n += std::stod(m.substr(at + name.size()));
    }
    const std::string finished = "\ntokenhive_requests_total{";
    for (size_t at = m.find(finished); at != std::string::npos; at = m.find(finished, at + 1))
      n += std::stod(m.substr(m.find("} ", at) + 2));
    return n;
  };
  double n = 0;
  for (int i = 0; i < 1000 && (n = admitted()) < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(n, 6);
  ::kill(s.pid(), SIGTERM);
  HttpReply d;
  for (int i = 0; i < 500; ++i) {  // the signal reaches the drain within milliseconds
    d = request(s.port(), "GET", "/health");
    if (d.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(d.status, 503);
  EXPECT_EQ(json::parse(d.body)["status"], "draining");
  for (auto& c : streams) {
    std::string got;
    EXPECT_TRUE(c->read_until("data: [DONE]", &got)) << got;
  }
  EXPECT_EQ(s.wait(30), 0) << s.log();
}


// The version CMakeLists.txt's project() names.
std::string project_version() {
  std::smatch m;
  const std::string cmake = test::slurp(std::string(TH_SOURCE_DIR) + "/CMakeLists.txt");
  return std::regex_search(cmake, m, std::regex("project\\(tokenhive VERSION ([0-9.]+)")) ? m[1].str() : "";
}

TEST(ServeConventions, VersionPrintsTheVersionAndExitsZero) {
  ASSERT_FALSE(project_version().empty());
  for (const char* flag : {"--version", "-V"}) {
    test::ProcessResult r = test::run_process({test::binary_path(), flag}, 30);
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_EQ(r.out, "tokenhive " + project_version() + "\n") << flag;
  }
}

// A port nothing listens on now: bound to 0, read back, closed.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Starts `argv` with this environment less its TOKENHIVE_* variables plus `extra`, stdout and
// stderr to `log_path`; the child's pid, or -1.
pid_t spawn_with_env(std::vector<std::string> argv, std::vector<std::string> extra, const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TOKENHIVE_", 0) != 0) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> cargs, cenv;
  for (std::string& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Flags from TOKENHIVE_* variables; the command line wins (TOKENHIVE_MAX_NUM_SEQS=0 is out of
// range: taken, it would stop serve with exit 2), and --help names the variables.
TEST(ServeConventions, FlagsFromTheEnvironmentAndTheCommandLineWins) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string log_path = test::temp_path("serve_env.log");
  const pid_t pid = spawn_with_env({test::binary_path(), "serve", "-m", stories(), "-t", "1", "--max-num-seqs", "4"},
                                   {"TOKENHIVE_PORT=" + std::to_string(port), "TOKENHIVE_HOST=127.0.0.1",
                                    "TOKENHIVE_SERVED_MODEL_NAME=from-the-env", "TOKENHIVE_KV_CACHE_MIB=64",
                                    "TOKENHIVE_MAX_NUM_SEQS=0"},
                                   log_path);
  ASSERT_GT(pid, 0);
  bool ready = false;
  for (int i = 0; i < 3000 && !ready; ++i) {
    ready = test::slurp(log_path).find("tokenhive serve: ready") != std::string::npos;
    int status = 0;
    if (!ready && ::waitpid(pid, &status, WNOHANG) == pid) break;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (ready) {
    HttpReply m = request(port, "GET", "/v1/models");
    EXPECT_EQ(m.status, 200);
    // No throw on a body that is not JSON (the child must still be stopped below).
    json models = json::parse(m.body, nullptr, /*allow_exceptions=*/false);
    const bool named = models.is_object() && models.contains("data") && models["data"].is_array() &&
                       !models["data"].empty() && models["data"][0].is_object() &&
                       models["data"][0].value("id", "") == "from-the-env";
    EXPECT_TRUE(named) << m.body;
    ::kill(pid, SIGTERM);
  } else {
    ::kill(pid, SIGKILL);
  }
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(ready) << test::slurp(log_path);
  ::unlink(log_path.c_str());

  test::ProcessResult help = test::run_process({test::binary_path(), "serve", "--help"}, 30);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* name : {"TOKENHIVE_PORT", "TOKENHIVE_KV_CACHE_MIB", "TOKENHIVE_SERVED_MODEL_NAME", "TOKENHIVE_PIN"})
    EXPECT_NE(help.out.find(name), std::string::npos) << name << " not in --help";
}

// The router reads its flags from the same TOKENHIVE_* variables (one helper, cli/flag_env.h).
TEST(ServeConventions, RouterFlagsFromTheEnvironment) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string log_path = test::temp_path("router_env.log");
  const pid_t pid = spawn_with_env({test::binary_path(), "router"},
                                   {"TOKENHIVE_PORT=" + std::to_string(port), "TOKENHIVE_HOST=127.0.0.1",
                                    "TOKENHIVE_CELL=http://127.0.0.1:9"},
                                   log_path);
  ASSERT_GT(pid, 0);
  bool listed = false;
  for (int i = 0; i < 500 && !listed; ++i) {
    test::TestConnection probe(port, std::chrono::seconds(1));
    if (probe.send("GET /admin/cells HTTP/1.1\r\nHost: x\r\n\r\n")) {
      std::optional<HttpReply> r = probe.read_response();
      listed = r && r->status == 200 && r->body.find("127.0.0.1:9") != std::string::npos;
    }
    if (!listed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(listed) << test::slurp(log_path);
  ::unlink(log_path.c_str());
  test::ProcessResult help = test::run_process({test::binary_path(), "router", "--help"}, 30);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* name : {"TOKENHIVE_PORT", "TOKENHIVE_CELL", "TOKENHIVE_POLICY"})
    EXPECT_NE(help.out.find(name), std::string::npos) << name;
}

// --cors-origins: an allowed Origin gets its CORS headers on every response (streams and
// errors too) and a preflight 204; another origin, or a server without the flag, gets none
// and OPTIONS stays 405.
TEST(ServeConventions, CorsOnlyForTheConfiguredOrigins) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--cors-origins", "https://app.example, https://b.example"});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::string preflight_headers =
      "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
      "Access-Control-Request-Headers: authorization, content-type\r\n";
  HttpReply p = request(s.port(), "OPTIONS", "/v1/chat/completions", "", preflight_headers);
  EXPECT_EQ(p.status, 204);
  EXPECT_EQ(p.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(p.header("vary"), "Origin");
  EXPECT_NE(p.header("access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_NE(p.header("access-control-allow-headers").find("Authorization"), std::string::npos);
  EXPECT_NE(p.header("access-control-allow-headers").find("Content-Type"), std::string::npos);
  EXPECT_FALSE(p.header("access-control-max-age").empty());

  const std::string body = json{{"prompt", "x"}, {"max_tokens", 2}}.dump();
  HttpReply c = request(s.port(), "POST", "/v1/completions", body, "Origin: https://b.example\r\n");
  EXPECT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.header("access-control-allow-origin"), "https://b.example");
  EXPECT_EQ(c.header("vary"), "Origin");
  const std::string stream = json{{"prompt", "x"}, {"max_tokens", 2}, {"stream", true}}.dump();
  HttpReply st = request(s.port(), "POST", "/v1/completions", stream, "Origin: https://app.example\r\n");
  EXPECT_EQ(st.header("access-control-allow-origin"), "https://app.example");
  HttpReply e = request(s.port(), "GET", "/no/such/route", "", "Origin: https://app.example\r\n");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.header("access-control-allow-origin"), "https://app.example");

  HttpReply other = request(s.port(), "POST", "/v1/completions", body, "Origin: https://evil.example\r\n");
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.header("access-control-allow-origin"), "");
  HttpReply other_pre = request(s.port(), "OPTIONS", "/v1/completions", "",
                                "Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(other_pre.status, 405);
  EXPECT_EQ(other_pre.header("access-control-allow-origin"), "");

  ServeProcess plain({"-m", stories(), "-t", "1", "--kv-cache-mib", "64"});
  ASSERT_TRUE(plain.ok()) << plain.log();
  HttpReply q = request(plain.port(), "OPTIONS", "/v1/chat/completions", "", preflight_headers);
  EXPECT_EQ(q.status, 405);
  EXPECT_EQ(q.header("access-control-allow-origin"), "");
  HttpReply g = request(plain.port(), "GET", "/v1/models", "", "Origin: https://app.example\r\n");
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.header("access-control-allow-origin"), "");
  EXPECT_EQ(g.header("vary"), "");
}

TEST(ServeConventions, CorsStarAllowsEveryOrigin) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--cors-origins", "*"});
  ASSERT_TRUE(s.ok()) << s.log();
  HttpReply g = request(s.port(), "GET", "/v1/models", "", "Origin: http://localhost:3000\r\n");
  EXPECT_EQ(g.header("access-control-allow-origin"), "http://localhost:3000");
  HttpReply none = request(s.port(), "GET", "/v1/models");
  EXPECT_EQ(none.header("access-control-allow-origin"), "");
}

HttpReply post_json(int port, const std::string& path, const json& body, const std::string& headers = "") {
  return request(port, "POST", path, body.dump(), headers);
}

// vLLM's and llama-server's /tokenize and /detokenize: both field names in, both keys out.
TEST(ServeConventions, TokenizeAndDetokenizeInBothShapes) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64"});
  ASSERT_TRUE(s.ok()) << s.log();
  HttpReply v = post_json(s.port(), "/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_EQ(v.status, 200) << v.body;
  json vj = json::parse(v.body);
  ASSERT_TRUE(vj["tokens"].is_array());
  EXPECT_EQ(vj["count"], vj["tokens"].size());
  EXPECT_GT(vj["max_model_len"].get<int>(), 0);
  // vLLM adds special tokens by default, llama-server's "content" does not: one BOS apart.
  HttpReply l = post_json(s.port(), "/tokenize", {{"content", "Once upon a time"}});
  ASSERT_EQ(l.status, 200) << l.body;
  json lj = json::parse(l.body);
  EXPECT_EQ(lj["tokens"].size() + 1, vj["tokens"].size());
  HttpReply nos = post_json(s.port(), "/tokenize", {{"prompt", "Once upon a time"}, {"add_special_tokens", false}});
  EXPECT_EQ(json::parse(nos.body)["tokens"], lj["tokens"]);
  HttpReply pieces = post_json(s.port(), "/tokenize", {{"content", "Once"}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  EXPECT_TRUE(json::parse(pieces.body)["tokens"][0].contains("piece")) << pieces.body;

  // The same count as the chat completion's usage.
  const json messages = {{{"role", "user"}, {"content", "Hello there"}}};
  HttpReply chat = post_json(s.port(), "/tokenize", {{"messages", messages}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  HttpReply done = post_json(s.port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(json::parse(chat.body)["count"], json::parse(done.body)["usage"]["prompt_tokens"]);

  HttpReply d = post_json(s.port(), "/detokenize", {{"tokens", lj["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  json dj = json::parse(d.body);
  // SentencePiece's leading space stays (no BOS before it), as llama-server's pieces join.
  EXPECT_EQ(dj["prompt"], " Once upon a time");
  EXPECT_EQ(dj["content"], " Once upon a time");

  struct Bad {
    std::string path;
    json body;
    std::string param;
  };
  for (const Bad& b : std::vector<Bad>{
           {"/detokenize", {{"tokens", "1 2"}}, "tokens"},
           {"/detokenize", {{"tokens", {1, "x"}}}, "tokens[1]"},
           {"/detokenize", {{"tokens", {1, 2.5}}}, "tokens[1]"},
           {"/detokenize", {{"tokens", {1, 1000000}}}, "tokens[1]"},
           {"/detokenize", {{"tokens", {-1}}}, "tokens[0]"},
           {"/detokenize", {{"tokens", {1}}, {"skip", true}}, "skip"},
           {"/tokenize", {{"prompt", 5}}, "prompt"},
           {"/tokenize", json::object(), "prompt"},
           {"/tokenize", {{"prompt", "a"}, {"content", "a"}}, "content"},
           {"/tokenize", {{"prompt", "a"}, {"add_special_tokens", "yes"}}, "add_special_tokens"},
           {"/tokenize", {{"prompt", "a"}, {"chat_template_kwargs", json::object()}}, "chat_template_kwargs"},
           {"/tokenize", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
       }) {
    HttpReply r = post_json(s.port(), b.path, b.body);
    EXPECT_EQ(r.status, 400) << b.path << " " << b.body.dump() << ": " << r.body;
    if (r.status == 400) {
      EXPECT_EQ(json::parse(r.body)["error"]["param"], b.param) << b.body.dump() << ": " << r.body;
    }
  }
  EXPECT_EQ(post_json(s.port(), "/tokenize", {{"prompt", "a"}, {"model", "other"}}).status, 404);
}

// Keys apply as on the other endpoints.
TEST(ServeConventions, TokenizeNeedsAKeyWhenKeysAreOn) {
  const std::string keys = test::temp_path("conv_keys.txt");
  {
    std::ofstream out(keys);
    out << "sk-conventions-0001 team-a\n";
  }
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--api-keys", keys});
  ASSERT_TRUE(s.ok()) << s.log();
  EXPECT_EQ(post_json(s.port(), "/tokenize", {{"prompt", "a"}}).status, 401);
  EXPECT_EQ(post_json(s.port(), "/detokenize", {{"tokens", {1}}}).status, 401);
  EXPECT_EQ(post_json(s.port(), "/tokenize", {{"prompt", "a"}}, "Authorization: Bearer sk-conventions-0001\r\n").status, 200);
  EXPECT_EQ(post_json(s.port(), "/detokenize", {{"tokens", {1}}}, "Authorization: Bearer sk-conventions-0001\r\n").status, 200);
  ::unlink(keys.c_str());
}

// llama-server's n_predict and vLLM's include_stop_str_in_output, end to end.
TEST(ServeConventions, NPredictAndIncludeStopStrInOutput) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64"});
  ASSERT_TRUE(s.ok()) << s.log();
  HttpReply n = post_json(s.port(), "/v1/completions", {{"prompt", "Once"}, {"n_predict", 3}, {"ignore_eos", true}});
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(json::parse(n.body)["usage"]["completion_tokens"], 3);
  const json greedy = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  HttpReply full = post_json(s.port(), "/v1/completions", greedy);
  ASSERT_EQ(full.status, 200) << full.body;
  const std::string text = json::parse(full.body)["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(6, 3);  // three bytes of the greedy text: it stops there
  const size_t at = text.find(stop);
  json with = greedy;
  with["stop"] = json::array({stop});
  HttpReply cut = post_json(s.port(), "/v1/completions", with);
  EXPECT_EQ(json::parse(cut.body)["choices"][0]["text"], text.substr(0, at)) << cut.body;
  with["include_stop_str_in_output"] = true;
  HttpReply kept = post_json(s.port(), "/v1/completions", with);
  EXPECT_EQ(json::parse(kept.body)["choices"][0]["text"], text.substr(0, at + stop.size())) << kept.body;
  EXPECT_EQ(json::parse(kept.body)["choices"][0]["finish_reason"], "stop");
  HttpReply constrained = post_json(s.port(), "/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= \"a\""}});
  ASSERT_EQ(constrained.status, 200) << constrained.body;
  EXPECT_EQ(json::parse(constrained.body)["choices"][0]["text"], "a");
  EXPECT_EQ(json::parse(constrained.body)["choices"][0]["finish_reason"], "stop");
}

// Tool calls (Hermes-style template) and /v1/embeddings through the official openai npm
// client (tests/oracle/openai_tools_embeddings.mjs: what is tested how is said there).
TEST(ServeConventions, ToolsAndEmbeddingsWithTheOpenAiClient) {
  if (test::slurp(test::source_path("node_modules/openai/package.json")).empty())
    GTEST_FAIL() << "the openai npm package is missing: run scripts/setup.sh";
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--served-model-name", "stories", "--chat-template",
                  test::source_path("tests/data/chat_templates/qwen2.5-instruct.jinja")});
  ASSERT_TRUE(s.ok()) << s.log();
  test::ProcessResult r = test::run_process({"/usr/bin/env", "node", test::source_path("tests/oracle/openai_tools_embeddings.mjs"),
                                             "http://127.0.0.1:" + std::to_string(s.port()), "stories"},
                                            120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok   a streamed tool call"), std::string::npos) << r.out;
  // Embedding requests are in the access log (stderr) like any other.
  EXPECT_NE(s.log().find(R"("path":"/v1/embeddings","status":200)"), std::string::npos);
  EXPECT_NE(s.log().find(R"("path":"/v1/embeddings","status":400)"), std::string::npos);
}

// --chat-template FILE replaces the model's template, chat_template_kwargs reach it as
// variables, and min_tokens holds off a stop token.
TEST(ServeConventions, ChatTemplateFileKwargsAndMinTokens) {
  const std::string file = ::testing::TempDir() + "/conventions_template_" + std::to_string(::getpid()) + ".jinja";
  {
    std::ofstream f(file);
    f << "{% for m in messages %}{{ m.content }}{% endfor %}{% if padded %}{% for i in range(40) %} pad{% endfor %}{% endif %}";
  }
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--chat-template", file});
  ASSERT_TRUE(s.ok()) << s.log();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}, {"max_tokens", 1}};
  HttpReply plain = post_json(s.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(plain.status, 200) << plain.body;
  json with = chat;
  with["chat_template_kwargs"] = {{"padded", true}};
  HttpReply padded = post_json(s.port(), "/v1/chat/completions", with);
  ASSERT_EQ(padded.status, 200) << padded.body;
  EXPECT_GE(json::parse(padded.body)["usage"]["prompt_tokens"].get<int>(),
            json::parse(plain.body)["usage"]["prompt_tokens"].get<int>() + 40);
  with["chat_template_kwargs"] = {{"messages", 1}};
  EXPECT_EQ(json::parse(post_json(s.port(), "/v1/chat/completions", with).body)["error"]["param"], "chat_template_kwargs.messages");

  // min_tokens: the greedy first token as a stop token ends at once, unless min_tokens holds it off.
  const json greedy = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"return_token_ids", true}};
  HttpReply g = post_json(s.port(), "/v1/completions", greedy);
  const int first = json::parse(g.body)["choices"][0]["token_ids"][0];
  json stop = greedy;
  stop["stop_token_ids"] = {first};
  EXPECT_EQ(json::parse(post_json(s.port(), "/v1/completions", stop).body)["usage"]["completion_tokens"], 0);
  stop["min_tokens"] = 4;
  EXPECT_GE(json::parse(post_json(s.port(), "/v1/completions", stop).body)["usage"]["completion_tokens"].get<int>(), 4);
  stop["min_tokens"] = 9;
  EXPECT_EQ(json::parse(post_json(s.port(), "/v1/completions", stop).body)["error"]["param"], "min_tokens");
  ::unlink(file.c_str());

  ServeProcess missing({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--chat-template", file + ".absent"});
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.log().find("--chat-template"), std::string::npos) << missing.log();
}

}  // namespace
}  // namespace th
