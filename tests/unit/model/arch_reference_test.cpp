// Every architecture against llama.cpp: tests/data/arch_logits/<case>.txt holds
// llama.cpp's logits (and greedy continuation) for a tiny f32 model that
// `mkmodel --arch` writes (provenance in the README there). The test writes the
// same file again from its seed, checks it is byte for byte the one llama.cpp
// read (FNV-1a of the bytes), runs it on the reference and the CPU backend and
// compares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "format/gguf.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "test_numeric.h"
#include "test_util.h"

namespace th {
namespace {

struct Reference {
  std::string arch;
  int64_t n_ctx = 0;
  std::string fnv1a;
  std::vector<int32_t> tokens;
  std::vector<std::pair<int32_t, float>> greedy;  // id, llama.cpp's top-2 margin
  std::map<int32_t, std::vector<float>> logits;   // by position
};

Reference read_reference(const std::string& path) {
  Reference r;
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "arch") ls >> r.arch;
    else if (key == "n_ctx") ls >> r.n_ctx;
    else if (key == "fnv1a") ls >> r.fnv1a;
    else if (key == "tokens") for (int32_t t; ls >> t;) r.tokens.push_back(t);
    else if (key == "greedy") {
      for (std::string g; ls >> g;) {
        const size_t colon = g.find(':');
        r.greedy.push_back({std::stoi(g.substr(0, colon)), std::stof(g.substr(colon + 1))});
      }
    } else if (key == "pos") {
      int32_t p = 0;
      ls >> p;
      for (float v; ls >> v;) r.logits[p].push_back(v);
    }
  }
  return r;
}

std::string fnv1a_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c; in.get(c);) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

using test::argmax;

struct Case {
  std::string name;
  // Bound on max |ours - llama.cpp| / (logit range at that position). f32 weights: both
  // sides round in f32, in different orders (a dot product of n terms is within n u of
  // exact, u = 2^-24, and far closer for random signs), and the file rounds each value to 7
  // digits (5e-7 relative): measured 1.8e-7 to 2.8e-7 for every non-Gemma case, so 1e-5 leaves
  // a factor 35. Gemma: llama.cpp's GELU reads a table at the input rounded to f16 and returns
  // an f16 (up to 2^-11 relative per activation); over the down projection's 128 random-signed
  // terms that is ~2^-11 / sqrt(128) ~ 4e-5 of the FFN output per layer, compounding over 2-6
  // layers: measured 4e-5 (gemma2), 1e-4 (gemma3); bound 1e-3.
  double tol;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ArchReference : public ::testing::TestWithParam<Case> {};

TEST_P(ArchReference, LogitsAndGreedyMatchLlamaCpp) {
  const Case& c = GetParam();
  const Reference ref = read_reference(test::source_path("tests/data/arch_logits/" + c.name + ".txt"));
  ASSERT_FALSE(ref.tokens.empty());
  ASSERT_EQ(ref.logits.size(), 4u);

  SyntheticSpec spec;
  Result<SyntheticShape> shape = synthetic_shape("tiny");
  ASSERT_TRUE(shape.ok());
  spec.shape = *shape;
  spec.type = DType::F32;
  spec.seed = 1;
  ASSERT_TRUE(apply_synthetic_arch(ref.arch, spec).ok());
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  const std::string path = test::temp_path("arch_" + c.name + ".gguf");
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
  EXPECT_EQ(fnv1a_of_file(path), ref.fnv1a) << "mkmodel no longer writes the file llama.cpp read";
  Result<GgufFile> f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();

  for (bool reference : {true, false}) {
    SCOPED_TRACE(reference ? "reference backend" : "cpu backend");
    std::unique_ptr<Backend> b = reference ? make_reference_backend() : make_cpu_backend();
    auto m = LlamaModel::load(*f, *b, ref.n_ctx);
    ASSERT_TRUE(m.ok()) << m.message();
    const ModelConfig& cfg = (*m)->config();
    ASSERT_EQ(cfg.n_vocab, static_cast<int64_t>(ref.logits.begin()->second.size()));
    auto kv = KvCache::create(*b, cfg.n_layer, cfg.kv_dim(), 64, 4);
    std::vector<int32_t> table;
    const int64_t n_total = static_cast<int64_t>(ref.tokens.size() + ref.greedy.size());
    ASSERT_TRUE(kv->reserve(table, n_total));

    // The prompt in one batch, logits at the reference's positions.
    ForwardBatch fb;
    fb.tables = {table};
    for (size_t p = 0; p < ref.tokens.size(); ++p)
      fb.add(ref.tokens[p], 0, static_cast<int32_t>(p),
             ref.logits.count(static_cast<int32_t>(p)) || p + 1 == ref.tokens.size());
    std::vector<float> logits;
    ASSERT_TRUE((*m)->forward(fb, *kv, &logits).ok());
    size_t row = 0;
    double worst = 0, last_range = 0;
    for (const auto& [pos, want] : ref.logits) {
      const float* got = logits.data() + row++ * cfg.n_vocab;
      const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
      const double range = *hi - *lo;
      double diff = 0;
      for (int64_t v = 0; v < cfg.n_vocab; ++v) diff = std::max(diff, std::fabs(double(got[v]) - want[v]));
      worst = std::max(worst, diff / range);
      EXPECT_LT(diff / range, c.tol) << "position " << pos << ": max |diff| " << diff << ", range " << range;
      last_range = range;
    }
    std::printf("[ %s ] %s: max |diff| / range = %.3g\n", c.name.c_str(), reference ? "reference" : "cpu", worst);

    // Greedy: the ids must agree at every step whose llama.cpp top-2 margin exceeds twice
    // the logit bound; past the first step that does not, the two may diverge legitimately.
    const double bound = 2 * c.tol * last_range;
    int32_t next = argmax(logits.data() + (row - 1) * cfg.n_vocab, cfg.n_vocab);
    int32_t pos = static_cast<int32_t>(ref.tokens.size());
    size_t checked = 0;
    for (const auto& [id, margin] : ref.greedy) {
      if (margin <= bound) break;
      ASSERT_EQ(next, id) << "greedy step " << checked;
      ++checked;
      ForwardBatch one;
      one.tables = {table};
      one.add(next, 0, pos++, true);
      ASSERT_TRUE((*m)->forward(one, *kv, &logits).ok());
      next = argmax(logits.data(), cfg.n_vocab);
    }
    std::printf("[ %s ] %s: greedy ids equal for %zu of %zu steps (margin > %.3g)\n", c.name.c_str(),
                reference ? "reference" : "cpu", checked, ref.greedy.size(), bound);
    EXPECT_GE(checked, 8u) << "too few greedy steps clear the margin to mean anything";
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchReference,
                         ::testing::Values(Case{"llama", 1e-5}, Case{"llama3", 1e-5}, Case{"mixtral", 1e-5},
                                           Case{"qwen2", 1e-5}, Case{"qwen3", 1e-5}, Case{"qwen3moe", 1e-5},
                                           Case{"gemma2", 1e-3}, Case{"gemma3", 1e-3}, Case{"phi3", 1e-5},
                                           Case{"phi3-long", 1e-5}, Case{"qwen2-yarn", 1e-5}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace th
