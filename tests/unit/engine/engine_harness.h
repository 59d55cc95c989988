// What the engine tests share: loading a model, the backend they compute on
// (built here only, so the CPU backend's options change one line), a tiny
// synthetic model, driving an engine until it is idle, and the reference a
// batched run must equal: each request alone through Generator.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace th::test {

inline std::unique_ptr<Backend> make_test_backend() { return make_cpu_backend(); }

struct LoadedModel {
  GgufFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tok;
};

inline LoadedModel load_model(const std::string& path) {
  LoadedModel l;
  Result<GgufFile> f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok()) return l;
  l.file = std::move(f).value();
  l.backend = make_test_backend();
  auto m = LlamaModel::load(l.file, *l.backend);
  EXPECT_TRUE(m.ok()) << m.message();
  if (m.ok()) l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(l.file);
  EXPECT_TRUE(t.ok()) << t.message();
  if (t.ok()) l.tok = std::make_unique<Tokenizer>(std::move(t).value());
  return l;
}

inline std::string stories_path() { return shared_path("models/stories260K.gguf"); }

/// A two-layer Llama with the 32000-token Llama-2 vocab, written once per test process.
inline std::string tiny_synthetic_path() {
  static const std::string path = [] {
    SyntheticSpec spec;
    spec.shape = {"tiny", 64, 2, 4, 2, 96, 256};
    spec.type = DType::Q8_0;
    spec.seed = 11;
    Result<GgufFile> vocab = GgufFile::open(shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
    EXPECT_TRUE(vocab.ok()) << vocab.message();
    const std::string p = ::testing::TempDir() + "/th_engine_tiny_" + std::to_string(::getpid()) + ".gguf";
    Status s = write_synthetic_model(spec, *vocab, p);
    EXPECT_TRUE(s.ok()) << s.message();
    return p;
  }();
  return path;
}

/// The request's tokens when it runs alone, through Generator (no engine, no sharing).
inline std::vector<int32_t> run_alone(const LoadedModel& l, const GenerateRequest& r, int64_t n_ctx) {
  Generator gen(*l.model, *l.backend, end_of_generation_ids(*l.tok));
  GenerateOptions o;
  o.sampling = r.sampling;
  o.max_tokens = r.max_tokens;
  o.n_ctx = n_ctx;
  o.ignore_eos = r.ignore_eos;
  std::vector<int32_t> out;
  auto st = gen.run(r.prompt, o, [&](int32_t t) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

/// What a stream delivered.
struct Collected {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  std::optional<FinishReason> finish;
  std::string error;
};

inline void collect(RequestStream& s, Collected& c) {
  for (TokenEvent& e : s.drain()) {
    if (e.token >= 0) {
      c.tokens.push_back(e.token);
      c.positions.push_back(e.position);
    }
    if (e.finish) {
      EXPECT_FALSE(c.finish) << "two final events";
      c.finish = e.finish;
      c.error = e.error;
    }
  }
}

/// Steps until the engine has nothing to do (at most max_steps steps).
inline void run_until_idle(Engine& e, int max_steps = 100000) {
  for (int i = 0; i < max_steps && e.has_work(); ++i) {
    Status s = e.step();
    ASSERT_TRUE(s.ok()) << s.message();
  }
  EXPECT_FALSE(e.has_work()) << "the engine did not finish in " << max_steps << " steps";
}

}  // namespace th::test
