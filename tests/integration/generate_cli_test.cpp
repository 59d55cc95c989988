// `tokenhive generate` and `tokenhive mkmodel` as a user runs them: a real
// process, real model files, stdout and stderr checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "format/gguf.h"
#include "http_test_client.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using test::ProcessResult;
using test::run_process;

using test::stories;

// The last line of stderr must be a rate line; no line of stdout may be noise.
int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(GenerateCli, GreedyFromBosPrintsTheReferenceText) {
  ProcessResult r = run_process({test::binary_path(), "generate", "-m", stories(), "-p", "", "--temp", "0", "-n", "256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_EQ(r.out, want + "\n");
  EXPECT_NE(r.err.find("prompt: 1 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generation: 256 tokens"), std::string::npos) << r.err;
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_EQ(last.rfind("generation: ", 0), 0u) << "stderr must end with the rates: " << last;
  EXPECT_NE(last.find("tokens/s"), std::string::npos);
}

TEST(GenerateCli, PromptIsEchoedAndGreedyContinuesTheReference) {
  // The reference story begins with this sentence; given it as a prompt, greedy
  // decoding must continue exactly as the reference does.
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  ASSERT_EQ(want.rfind(prompt, 0), 0u);
  ProcessResult r = run_process({test::binary_path(), "generate", "-m", stories(), "-p", prompt, "--temp", "0", "-n", "40"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.rfind(prompt, 0), 0u) << r.out;
  // The continuation is a prefix of the reference's remainder (40 tokens of it).
  std::string got = r.out.substr(0, r.out.size() - 1);
  EXPECT_GT(got.size(), prompt.size() + 60);
  EXPECT_EQ(want.substr(0, got.size()), got);
}

TEST(GenerateCli, ThreadCountsGiveTheReferenceText) {
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  for (const char* t : {"1", "2", "3"}) {
    ProcessResult r =
        run_process({test::binary_path(), "generate", "-m", stories(), "-p", "", "--temp", "0", "-n", "256", "-t", t});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want + "\n") << "-t " << t;
  }
}

TEST(GenerateCli, SeededSamplingIsReproducibleAndSeedsDiffer) {
  auto run = [](const char* seed) {
    return run_process({test::binary_path(), "generate", "-m", stories(), "-p", "Tom had a", "-n", "48", "--temp", "1.0",
                        "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", seed});
  };
  ProcessResult a = run("42"), b = run("42"), c = run("43");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.err.find("seed 42"), std::string::npos);
}

TEST(GenerateCli, TinyRandomF16ModelWithFullLlama2VocabGenerates) {
  ProcessResult r = run_process({test::binary_path(), "generate", "-m", test::shared_path("models/llama-2-tiny-random.gguf"),
                                 "-p", "Hello world", "-n", "16", "--temp", "0", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Hello world", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("generation: 16 tokens"), std::string::npos) << r.err;
}

TEST(GenerateCli, BadFlagsAreClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--temp", "-1"}, "temperature"},
      {{"--top-p", "1.5"}, "top_p"},
      {{"-n", "abc"}, "n-predict"},
      {{"--no-such-flag"}, "no-such-flag"},
      {{"-m", "/nonexistent/model.gguf"}, "does not exist"},
      {{"--seed", "-5"}, "seed"},
      {{"-t", "-1"}, "threads"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {test::binary_path(), "generate", "-n", "4"};
    if (c.args[0] != "-m") argv.insert(argv.end(), {"-m", stories()});
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ProcessResult r = run_process(argv, 30);
    EXPECT_NE(r.exit_code, 0) << c.args[0];
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args[0] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args[0];
  }
}

// --device: cpu and auto give the reference text (auto: on the GPU where one answers, whose
// greedy ids are the reference's too); cuda without a GPU is a one-line error naming the flag;
// a bogus device is refused naming the flag; cuda with --tensor-parallel is refused.
TEST(GenerateCli, DeviceFlag) {
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  const bool gpu = cuda_devices().front().rfind("0: ", 0) == 0;
  for (const char* d : {"cpu", "auto", "cuda"}) {
    ProcessResult r = run_process(
        {test::binary_path(), "generate", "-m", stories(), "-p", "", "--temp", "0", "-n", "256", "--device", d}, 60);
    if (std::string(d) == "cuda" && !gpu) {
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_NE(r.err.find("--device cuda: "), std::string::npos) << r.err;
      EXPECT_EQ(line_count(r.err), 1) << r.err;
      EXPECT_TRUE(r.out.empty());
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << d << ": " << r.err;
    EXPECT_EQ(r.out, want + "\n") << d;
    const std::string backend = (std::string(d) == "cpu" || !gpu) ? "backend cpu" : "backend cuda";
    EXPECT_NE(r.err.find(backend), std::string::npos) << d << ": " << r.err;
  }
  ProcessResult bogus = run_process({test::binary_path(), "generate", "-m", stories(), "-n", "4", "--device", "tpu"}, 30);
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("--device"), std::string::npos) << bogus.err;
  ProcessResult tp = run_process(
      {test::binary_path(), "generate", "-m", stories(), "-n", "4", "--device", "cuda", "--tensor-parallel", "2"}, 30);
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.err.find("--tensor-parallel runs on --device cpu only"), std::string::npos) << tp.err;
}

TEST(GenerateCli, BadModelFilesGiveOneLineErrors) {
  const std::string src = test::slurp(stories());
  struct Case {
    std::string name, bytes, needle;
  };
  std::string bad_magic = src;
  bad_magic[0] = 'X';
  std::string bad_version = src;
  bad_version[4] = 9;
  const std::vector<Case> cases = {
      {"truncated_header.gguf", src.substr(0, 100), "truncated"},
      {"truncated_data.gguf", src.substr(0, src.size() - 1000), "runs past the end"},
      {"bad_magic.gguf", bad_magic, "not a GGUF file"},
      {"bad_version.gguf", bad_version, "unsupported GGUF version 9"},
      {"empty.gguf", "", "truncated"},
  };
  for (const Case& c : cases) {
    const std::string path = test::temp_path(c.name);
    std::ofstream(path, std::ios::binary) << c.bytes;
    ProcessResult r = run_process({test::binary_path(), "generate", "-m", path, "-n", "4"}, 30);
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_EQ(line_count(r.err), 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.name << ": " << r.err;
    ::unlink(path.c_str());
  }
}

TEST(MkmodelCli, WritesEveryTypeAndTheModelsGenerate) {
  for (const char* type : {"f16", "q8_0", "q4_0", "q4_k", "q2_k", "q3_k", "iq4_nl", "iq4_xs"}) {
    const std::string path = test::temp_path(std::string("mk_") + type + ".gguf");
    ProcessResult mk = run_process({test::binary_path(), "mkmodel", "--shape", "custom", "--dim", "256", "--layers", "2",
                                    "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--type", type, "-o", path,
                                    // stories260K's 512-token vocabulary: Llama 2's 32000 rows of
                                    // embedding and output took most of the test (38 s under ASan)
                                    "--vocab", test::shared_path("models/stories260K.gguf")});
    ASSERT_EQ(mk.exit_code, 0) << mk.err;
    Result<GgufFile> f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->tensor("blk.1.ffn_up.weight")->dims, (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(f->tensor("token_embd.weight")->dims, (std::vector<int64_t>{256, 512}));
    ProcessResult g = run_process({test::binary_path(), "generate", "-m", path, "-p", "The", "-n", "8", "--temp", "0", "--ignore-eos"});
    ASSERT_EQ(g.exit_code, 0) << type << ": " << g.err;
    EXPECT_NE(g.err.find("generation: 8 tokens"), std::string::npos) << g.err;
    ::unlink(path.c_str());
  }
}

TEST(MkmodelCli, RealShapeAndBadArguments) {
  const std::string path = test::temp_path("mk_110m.gguf");
  ProcessResult mk = run_process({test::binary_path(), "mkmodel", "--shape", "110m", "--type", "q4_0", "-o", path}, 300);
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  Result<GgufFile> f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(*f->get_uint("llama.embedding_length"), 768u);
  EXPECT_EQ(*f->get_uint("llama.block_count"), 12u);
  EXPECT_EQ(*f->get_uint("llama.attention.head_count"), 12u);
  EXPECT_EQ(*f->get_uint("llama.feed_forward_length"), 2048u);
  EXPECT_EQ(f->tensor("blk.11.ffn_down.weight")->type, DType::Q4_0);
  ::unlink(path.c_str());

  ProcessResult bad = run_process({test::binary_path(), "mkmodel", "--shape", "13b", "-o", path});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown shape '13b'"), std::string::npos) << bad.err;
  bad = run_process({test::binary_path(), "mkmodel", "--shape", "110m", "--type", "iq2_xxs", "-o", path});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown --type 'iq2_xxs'"), std::string::npos) << bad.err;
  bad = run_process({test::binary_path(), "mkmodel", "--arch", "mamba2", "-o", path});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown --arch 'mamba2' (llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, mixtral, llama3, mistral, qwen2-yarn)"),
            std::string::npos) << bad.err;
}

}  // namespace
}  // namespace th

namespace th {
namespace {

// An encrypted model (tokenhive model encrypt) generates exactly what the plain one does,
// and refuses to load with a wrong key or none.
TEST(GenerateCli, EncryptedModelGivesTheReferenceText) {
  const std::string kek = test::temp_path("gen.kek"), other = test::temp_path("gen_other.kek"),
                    enc = test::temp_path("stories.enc");
  for (const std::string& p : {kek, other, enc}) ::unlink(p.c_str());
  ASSERT_EQ(run_process({test::binary_path(), "model", "keygen", "-o", kek}).exit_code, 0);
  ASSERT_EQ(run_process({test::binary_path(), "model", "keygen", "-o", other}).exit_code, 0);
  ProcessResult e = run_process({test::binary_path(), "model", "encrypt", "--key-file", kek, "--chunk-mib", "1",
                                 test::shared_path("models/stories260K.gguf"), enc});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  ProcessResult r = run_process({test::binary_path(), "generate", "-m", enc, "--key-file", kek, "-t", "1", "-p", "", "--temp", "0", "-n", "256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string want = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_EQ(r.out, want + "\n");
  ProcessResult wrong = run_process({test::binary_path(), "generate", "-m", enc, "--key-file", other, "-p", "", "-n", "4"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("does not open"), std::string::npos) << wrong.err;
  EXPECT_TRUE(wrong.out.empty());
  ProcessResult none = run_process({test::binary_path(), "generate", "-m", enc, "-p", "", "-n", "4"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("encrypted"), std::string::npos) << none.err;
  // Rekeyed: the new key opens it, the old one no longer does.
  ASSERT_EQ(run_process({test::binary_path(), "model", "rekey", "--key-file", kek, "--new-key-file", other, enc}).exit_code, 0);
  EXPECT_EQ(run_process({test::binary_path(), "generate", "-m", enc, "--key-file", other, "-t", "1", "-p", "", "--temp", "0", "-n", "256"}).out,
            want + "\n");
  EXPECT_EQ(run_process({test::binary_path(), "generate", "-m", enc, "--key-file", kek, "-p", "", "-n", "4"}).exit_code, 1);
  for (const std::string& p : {kek, other, enc}) ::unlink(p.c_str());
}

// mkmodel --format hf writes the same model as a Hugging Face folder (2 shards); `serve -m DIR`
// completes as `serve -m` the GGUF does (qwen2 loads bit for bit alike: the same greedy text).
TEST(GenerateCli, HuggingFaceFolderServesAsItsGguf) {
  const std::string gguf = test::temp_path("hf_e2e.gguf"), dir = test::temp_path("hf_e2e");
  const std::string vocab = test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf");
  for (const auto& extra : {std::vector<std::string>{"-o", gguf}, {"--format", "hf", "--shards", "2", "-o", dir}}) {
    std::vector<std::string> argv = {test::binary_path(), "mkmodel", "--arch", "qwen2", "--type", "f32", "--vocab", vocab};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcessResult m = run_process(argv, 60);
    ASSERT_EQ(m.exit_code, 0) << m.err;
  }
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  // The same greedy completion from the GGUF and from the folder.
  std::vector<std::string> texts;
  for (const std::string& model : {gguf, dir}) {
    test::ServeProcess s({"-m", model, "-t", "1", "--kv-cache-mib", "64"});
    ASSERT_TRUE(s.ok()) << s.log();
    const nlohmann::json body = {{"prompt", "Hello world"}, {"max_tokens", 12}, {"temperature", 0}};
    test::HttpReply r = test::request(s.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    texts.push_back(nlohmann::json::parse(r.body)["choices"][0]["text"].get<std::string>());
  }
  EXPECT_FALSE(texts[0].empty());
  EXPECT_EQ(texts[0], texts[1]);
  std::filesystem::remove_all(dir);
  std::remove(gguf.c_str());
}

}  // namespace
}  // namespace th
