// `tokenhive generate --tensor-parallel N` under a real `mpirun` (Open MPI): the model split
// across processes gives the single process's text, and a bad start (shape that does not
// split, a job of the wrong size, ranks with different or missing model files) is a clear
// error on every rank and a non-zero exit, never a hang. Skipped where mpirun or MPI is
// absent (the build then refuses --tensor-parallel, which the last test checks).
#include <gtest/gtest.h>

#include <cstdlib>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "format/gguf.h"
#include "model/synthetic_model.h"
#include "parallel/communicator.h"
#include "http_test_client.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using test::ProcessResult;

using test::stories;

// Open MPI's mpirun on PATH, or "".
std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path p = std::filesystem::path(dirs.substr(start, end - start)) / "mpirun";
    if (!p.parent_path().empty() && std::filesystem::exists(p)) return p.string();
    start = end + 1;
  }
  return "";
}

// mpirun's flags for this machine: root is allowed (containers, CI), more ranks than cores
// (a 2-core runner), no binding (it would pin every rank of a small job to one core each
// while other tests run), and ranks that yield while they wait in a collective (Open MPI
// spins otherwise: with other tests on both cores, a 256-token request took 9.7 s, not 0.05).
std::vector<std::string> mpirun(const std::string& exe) {
  return {exe, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"};
}

// One rank's command line, appended after "-np N" (or an MPMD part).
std::vector<std::string> generate(int n, const std::string& model, int tokens) {
  return {test::binary_path(), "generate", "--tensor-parallel", std::to_string(n), "-m", model, "-p", "", "--temp", "0",
          "-n", std::to_string(tokens), "-t", "1"};
}

ProcessResult run(std::vector<std::string> argv) { return test::run_process(argv, 60); }

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

class TensorParallelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!mpi_available()) GTEST_SKIP() << "tokenhive was built without MPI (CMake's TH_MPI is off)";
    exe_ = find_mpirun();
    if (exe_.empty()) GTEST_SKIP() << "no mpirun on PATH (Debian: apt-get install openmpi-bin)";
  }
  // mpirun -np n <generate n model tokens>
  ProcessResult run_np(int np, int n, const std::string& model, int tokens = 8) {
    std::vector<std::string> argv = mpirun(exe_);
    argv.insert(argv.end(), {"-np", std::to_string(np)});
    for (const std::string& a : generate(n, model, tokens)) argv.push_back(a);
    return run(argv);
  }
  std::string exe_;
};

TEST_F(TensorParallelCli, TwoRanksGiveTheStoriesReferenceText) {
  ProcessResult r = run_np(2, 2, stories(), 256);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_EQ(r.out, want + "\n");  // rank 0 alone prints
  EXPECT_NE(r.err.find("rank 1 of 2: query heads 4..7 of 8, KV heads 2..3 of 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generation: 256 tokens"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "resident"), 2) << r.err;  // each rank's memory
}

TEST_F(TensorParallelCli, KvHeadsThatDoNotDivideAreRefusedOnEveryRank) {
  ProcessResult r = run_np(3, 3, stories());
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "the model's 4 KV heads do not divide among 3 ranks"), 3) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(TensorParallelCli, MoreRanksThanHeadsAreRefusedOnEveryRank) {
  // The tiny shape: 4 heads, 2 KV heads, so 5 ranks are one too many.
  Result<GgufFile> vocab = GgufFile::open(stories());
  ASSERT_TRUE(vocab.ok());
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  const std::string tiny = test::temp_path("tp_cli_tiny.gguf");
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, tiny).ok());
  ProcessResult r = run_np(5, 5, tiny);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "the model has 4 attention heads, so at most 4 ranks"), 5) << r.err;
}

TEST_F(TensorParallelCli, AJobOfAnotherSizeIsRefusedOnEveryRank) {
  ProcessResult r = run_np(2, 4, stories());
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "--tensor-parallel 4 but this MPI job has 2 ranks"), 2) << r.err;
}

// Every all-reduce algorithm (MPI_Allreduce, our ring, recursive doubling) gives every rank
// the exact sums at 4 ranks (doubling in 2 steps; the ring's chunks of 7 floats uneven, and
// of 4099): bench comm checks each before timing it and ends the job non-zero if one differs.
TEST_F(TensorParallelCli, EveryAllReduceAlgorithmSumsExactlyOnEveryRank) {
  std::vector<std::string> argv = mpirun(exe_);
  argv.insert(argv.end(), {"-np", "4", test::binary_path(), "bench", "comm", "--sizes", "7,4099", "--iters", "10"});
  ProcessResult r = run(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks 4"), std::string::npos) << r.out;
  for (const std::string name : {"MPI_Allreduce ", "ring ", "doubling "}) EXPECT_EQ(count(r.out, name), 2) << r.out;
}

// MPMD: rank 0 and rank 1 started with different -m.
ProcessResult two_models(const std::string& exe, const std::string& a, const std::string& b) {
  std::vector<std::string> argv = mpirun(exe);
  argv.insert(argv.end(), {"-np", "1"});
  for (const std::string& x : generate(2, a, 8)) argv.push_back(x);
  argv.insert(argv.end(), {":", "-np", "1"});
  for (const std::string& x : generate(2, b, 8)) argv.push_back(x);
  return run(argv);
}

TEST_F(TensorParallelCli, RanksWithDifferentModelsAreRefusedOnEveryRank) {
  Result<GgufFile> vocab = GgufFile::open(stories());
  ASSERT_TRUE(vocab.ok());
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  const std::string a = test::temp_path("tp_cli_a.gguf"), b = test::temp_path("tp_cli_b.gguf");
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, a).ok());
  spec.seed = 7;  // the same shape and metadata, other weights
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, b).ok());
  ProcessResult r = two_models(exe_, a, b);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "rank 1 opened a different model than rank 0"), 2) << r.err;
}

TEST_F(TensorParallelCli, ARankThatCannotOpenItsModelFailsEveryRank) {
  const std::string missing = test::temp_path("tp_cli_missing.gguf");
  std::filesystem::remove(missing);
  ProcessResult r = two_models(exe_, stories(), missing);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "rank 1: "), 2) << r.err;
  EXPECT_EQ(count(r.err, "tp_cli_missing.gguf"), 2) << r.err;
}

// serve --tensor-parallel 2: rank 0 serves HTTP and schedules; every batch it runs is
// broadcast to rank 1. Greedy results are the reference text, and the same for a request
// alone as for requests batched together (the scheduler's batches reach rank 1 as plans).
TEST_F(TensorParallelCli, ServeTwoRanksGivesReferenceTextAloneAndBatched) {
  std::vector<std::string> launcher = mpirun(exe_);
  launcher.insert(launcher.end(), {"-np", "2"});
  test::ServeProcess server(launcher, "serve",
                            {"--tensor-parallel", "2", "-m", stories(), "--served-model-name", "stories", "-t", "1",
                             "--kv-cache-mib", "16", "--access-log", ""},
                            60);
  ASSERT_TRUE(server.ok()) << server.log();
  auto complete = [&](const std::string& prompt, int n) {
    const std::string body = nlohmann::json({{"model", "stories"}, {"prompt", prompt}, {"max_tokens", n},
                                             {"temperature", 0}}).dump();
    test::HttpReply r = test::request(server.port(), "POST", "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? nlohmann::json::parse(r.body)["choices"][0]["text"].get<std::string>() : "";
  };
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_EQ(complete("", 256), want);
  const std::vector<std::string> prompts = {"Once upon a time", "Tom had a", "The cat", "Lily and her mom"};
  std::vector<std::string> alone, together(prompts.size());
  for (const std::string& p : prompts) alone.push_back(complete(p, 48));
  std::vector<std::thread> ts;
  for (size_t i = 0; i < prompts.size(); ++i) ts.emplace_back([&, i] { together[i] = complete(prompts[i], 48); });
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(together, alone);
  EXPECT_NE(server.log().find("rank 1 of 2: query heads 4..7"), std::string::npos) << server.log();
  // Every rank's memory, gathered by rank 0 after the warm-up.
  test::HttpReply m = test::request(server.port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("tokenhive_tensor_parallel_resident_bytes{rank=\"1\"}"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("tokenhive_tensor_parallel_weight_bytes{rank=\"0\"}"), std::string::npos) << m.body;
}

// The pid of the rank `rank` among launcher's children (Open MPI puts the rank in each
// one's environment), or -1.
pid_t child_rank(pid_t launcher, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(launcher) + "/task")) {
    std::ifstream children(task.path() / "children");
    pid_t pid = 0;
    while (children >> pid) {
      std::string env = test::slurp("/proc/" + std::to_string(pid) + "/environ");
      for (size_t at = 0; at < env.size(); at = env.find('\0', at) + 1) {
        if (env.compare(at, want.size() + 1, want + '\0') == 0) return pid;
        if (env.find('\0', at) == std::string::npos) break;
      }
    }
  }
  return -1;
}

// A rank that dies mid-stream ends the whole cell, promptly and with a non-zero exit: mpirun
// sees the death and ends rank 0 (SIGTERM: it starts draining; then SIGKILL), so nothing
// waits forever in an all-reduce the dead rank will never join.
TEST_F(TensorParallelCli, ARankKilledMidStreamEndsTheJobWithoutAHang) {
  std::vector<std::string> launcher = mpirun(exe_);
  launcher.insert(launcher.end(), {"-np", "2"});
  test::ServeProcess server(launcher, "serve",
                            {"--tensor-parallel", "2", "-m", stories(), "-t", "1", "--kv-cache-mib", "16",
                             "--access-log", ""},
                            60);
  ASSERT_TRUE(server.ok()) << server.log();
  const pid_t rank1 = child_rank(server.pid(), 1);
  ASSERT_GT(rank1, 0) << "no child of mpirun with OMPI_COMM_WORLD_RANK=1";
  std::thread stream([&] {
    const std::string body = nlohmann::json({{"prompt", "Tom had a"}, {"max_tokens", 2000}, {"temperature", 0},
                                             {"stream", true}, {"ignore_eos", true}}).dump();
    // Not test::request: a cut stream (the expected end) is no complete response.
    test::TestConnection c(server.port(), std::chrono::seconds(30));
    if (c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body))
      (void)c.read_response();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const int code = server.wait(20);  // -1: still there after 20 s (then killed), or a signal
  stream.join();
  EXPECT_GT(code, 0) << server.log();
  EXPECT_NE(server.log().find("exited on signal 9"), std::string::npos) << server.log();
}

// One greedy stream through `c`: the token ids it gave, and whether it ended properly (200,
// a finish reason, [DONE]); `tokens` counts ids as they arrive.
struct StreamOutcome {
  bool ok = false;
  std::vector<int32_t> ids;
  std::string error;
};
StreamOutcome stream_ids(client::HttpClient& c, const nlohmann::json& body, std::atomic<int64_t>& tokens) {
  StreamOutcome o;
  bool done = false, finished = false;
  Result<client::Response> r = c.stream_events("POST", "/v1/completions", body.dump(), [&](const client::SseEvent& e) {
    if (e.data == "[DONE]") return done = true;
    nlohmann::json j = nlohmann::json::parse(e.data, nullptr, false);
    if (!j.is_object() || j.contains("error")) o.error = e.data;
    for (const nlohmann::json& ch : j.value("choices", nlohmann::json::array())) {
      for (const nlohmann::json& id : ch.value("token_ids", nlohmann::json::array())) o.ids.push_back(id.get<int32_t>());
      tokens += static_cast<int64_t>(ch.value("token_ids", nlohmann::json::array()).size());
      if (!ch["finish_reason"].is_null()) finished = true;
    }
    return true;
  });
  if (!r.ok()) o.error = r.message();
  o.ok = r.ok() && r->status == 200 && done && finished && o.error.empty();
  return o;
}

// The cell's state in the router's /admin/cells ("alive", "dead", ...; "" when unknown).
std::string router_cell_state(client::HttpClient& router, const std::string& url) {
  Result<client::Response> r = router.request("GET", "/admin/cells");
  if (!r.ok() || r->status != 200) return "";
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object()) return "";
  for (const nlohmann::json& c : j["cells"])
    if (c["url"] == url) return c["state"];
  return "";
}
bool wait_cell_state(client::HttpClient& router, const std::string& url, const std::string& state) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (router_cell_state(router, url) == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// A TP cell is one cell to the router: it joins like any cell, and when one of its ranks is
// killed mid-stream the cell goes (non-zero exit, /ready 503 on the way) and the router moves
// its streams to a single-process cell, each finishing with the ids of an uninterrupted run.
TEST_F(TensorParallelCli, ARankKilledBehindTheRouterMovesEveryStreamToAnotherCell) {
  const std::vector<std::string> cell = {"-m", stories(), "-t", "1", "--kv-cache-mib", "16", "--access-log", ""};
  test::ServeProcess single(cell);  // not in the router yet: the streams must start on the TP cell
  ASSERT_TRUE(single.ok()) << single.log();
  test::ServeProcess router("router", {}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  std::vector<std::string> launcher = mpirun(exe_);
  launcher.insert(launcher.end(), {"-np", "2"});
  std::vector<std::string> tp_args = cell;
  tp_args.insert(tp_args.end(), {"--tensor-parallel", "2", "--join", router.url()});
  test::ServeProcess tp(launcher, "serve", tp_args, 60);
  ASSERT_TRUE(tp.ok()) << tp.log();
  auto http = [](const std::string& url) -> std::unique_ptr<client::HttpClient> {
    client::HttpClientOptions o;
    o.request_timeout = std::chrono::seconds(60);
    o.retry.max_attempts = 1;  // a failure must show, not be retried away
    Result<std::unique_ptr<client::HttpClient>> c = client::HttpClient::create(url, o);
    return c.ok() ? std::move(*c) : nullptr;
  };
  std::unique_ptr<client::HttpClient> admin = http(router.url());
  ASSERT_TRUE(wait_cell_state(*admin, tp.url(), "alive")) << router.log();

  constexpr int kStreams = 4, kTokens = 300;
  const std::vector<std::string> prompts = {"Once upon a time", "Tom had a", "The cat", "Lily and her mom"};
  auto body = [&](int i) {
    return nlohmann::json({{"prompt", prompts[static_cast<size_t>(i)]}, {"max_tokens", kTokens}, {"temperature", 0},
                           {"ignore_eos", true}, {"stream", true}, {"return_token_ids", true}});
  };
  // The uninterrupted run: each stream on the single-process cell directly.
  std::vector<std::vector<int32_t>> want(kStreams);
  std::atomic<int64_t> tokens{0};
  for (int i = 0; i < kStreams; ++i) {
    StreamOutcome o = stream_ids(*http(single.url()), body(i), tokens);
    ASSERT_TRUE(o.ok) << o.error;
    ASSERT_EQ(o.ids.size(), static_cast<size_t>(kTokens));
    want[static_cast<size_t>(i)] = o.ids;
  }

  tokens = 0;
  std::vector<StreamOutcome> got(kStreams);
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.emplace_back([&, i] { got[static_cast<size_t>(i)] = stream_ids(*http(router.url()), body(i), tokens); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tokens < kStreams * 8 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The other cell joins now, so every stream began on the TP cell.
  Result<client::Response> add =
      admin->request("POST", "/admin/cells", nlohmann::json({{"url", single.url()}}).dump());
  ASSERT_TRUE(add.ok() && add->status / 100 == 2) << (add.ok() ? add->body : add.message());
  ASSERT_TRUE(wait_cell_state(*admin, single.url(), "alive")) << router.log();
  const pid_t rank1 = child_rank(tp.pid(), 1);
  ASSERT_GT(rank1, 0) << "no child of mpirun with OMPI_COMM_WORLD_RANK=1";
  const int64_t tokens_at_kill = tokens;
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  // Rank 0 drains before mpirun ends it: /ready says 503 while the port still answers.
  int ready_503 = 0;
  std::thread ready([&, probe = http(tp.url())] {
    const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < stop) {
      Result<client::Response> r = probe->request("GET", "/ready");
      if (!r.ok()) return;  // gone
      if (r->status == 503) ++ready_503;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const int code = tp.wait(20);
  ready.join();
  for (std::thread& t : streams) t.join();
  std::printf("[ tp ] rank 1 killed after %lld of %d tokens; /ready 503 %d times before the cell went\n",
              static_cast<long long>(tokens_at_kill), kStreams * kTokens, ready_503);
  EXPECT_LT(tokens_at_kill, kStreams * kTokens - kStreams * 8);  // the kill was mid-stream
  EXPECT_NE(code, 0) << tp.log();
  EXPECT_GT(ready_503, 0) << tp.log();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(got[static_cast<size_t>(i)].ok) << got[static_cast<size_t>(i)].error;
    EXPECT_EQ(got[static_cast<size_t>(i)].ids, want[static_cast<size_t>(i)]);
  }
  Result<client::Response> m = admin->request("GET", "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->body.find("\ntokenhive_router_migrations_total 0\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("\ntokenhive_router_migrations_total "), std::string::npos) << m->body;
}

TEST(TensorParallelCliWithoutMpi, IsRefusedWithAMessageOrRunsAlone) {
  // One rank needs no MPI at all; more without MPI in the build are refused, saying why.
  ProcessResult one = test::run_process(generate(1, stories(), 4), 60);
  EXPECT_EQ(one.exit_code, 0) << one.err;
  if (mpi_available()) GTEST_SKIP() << "built with MPI: the refusal below is for builds without it";
  ProcessResult r = test::run_process(generate(2, stories(), 4), 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tensor parallelism needs MPI, and this tokenhive was built without it"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace th
