// Weight bytes per token and MACs per token, worked out by hand for the real
// shapes the benchmarks use, and the ceilings they imply.
#include "model/forward_cost.h"

#include <gtest/gtest.h>

#include "format/gguf.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

ModelConfig config_of(const SyntheticShape& s, int64_t n_vocab) {
  ModelConfig c;
  c.n_embd = s.n_embd;
  c.n_layer = s.n_layer;
  c.n_head = s.n_head;
  c.n_head_kv = s.n_head_kv;
  c.head_dim = s.n_embd / s.n_head;
  c.n_ff = s.n_ff;
  c.n_vocab = n_vocab;
  return c;
}

ForwardCost cost_of(const char* shape, DType layers, DType output, bool tied = false) {
  const ModelConfig c = config_of(*synthetic_shape(shape), 32000);
  const auto reads = llama_matrix_reads(
      c, [&](const std::string& name) { return name == "output.weight" ? output : layers; }, tied);
  return forward_cost(reads);
}

// TinyLlama 1.1B: n_embd 2048, 22 layers, 32 heads of 64, 4 KV heads (kv_dim 256),
// n_ff 5632, vocab 32000. Per layer: q and o 2048 x 2048 = 4,194,304 each; k and v
// 256 x 2048 = 524,288 each; gate, up, down 5632 x 2048 = 11,534,336 each; together
// 44,040,192. 22 layers: 968,884,224. Output 32000 x 2048 = 65,536,000. MACs per
// token: 1,034,420,224 (2.07 GOP). The embedding is a lookup: one 2048-row per token.
constexpr uint64_t k11bLayerMacs = 968'884'224, k11bOutputMacs = 65'536'000;
constexpr uint64_t k11bMacs = 1'034'420'224;

TEST(ForwardCost, TinyLlama11bQ8_0) {
  const ForwardCost c = cost_of("1.1b", DType::Q8_0, DType::Q8_0);
  EXPECT_EQ(c.macs_per_token(), k11bMacs);
  EXPECT_EQ(c.int8_macs_per_token, k11bMacs);
  EXPECT_EQ(c.float_macs_per_token, 0u);
  // Q8_0: 34 bytes per 32 weights. 1,034,420,224 / 32 = 32,325,632 blocks = 1,099,071,488
  // bytes, plus one embedding row of 2048 / 32 * 34 = 2,176 bytes: 1.099 GB per token.
  // (The file's 1.17 GB also holds the other 31,999 embedding rows, 69.6 MB, which a token never reads.)
  EXPECT_EQ(c.matrix_bytes, 1'099'071'488u);
  EXPECT_EQ(c.lookup_bytes_per_token, 2'176u);
  EXPECT_EQ(c.weight_bytes_per_token(), 1'099'073'664u);
  EXPECT_EQ(c.weight_bytes_per_token() + 31'999u * 2'176u, 1'168'703'488u);  // the file's 1.17 GB of matrices
}

TEST(ForwardCost, TinyLlama11bQ4_0AndQ4_K) {
  // Q4_0: 18 bytes per 32: 32,325,632 blocks * 18 = 581,861,376, plus a 64 * 18 = 1,152-byte row.
  const ForwardCost q4 = cost_of("1.1b", DType::Q4_0, DType::Q4_0);
  EXPECT_EQ(q4.weight_bytes_per_token(), 581'862'528u);
  EXPECT_EQ(q4.int8_macs_per_token, k11bMacs);
  // Q4_K (144 bytes per 256) with a Q6_K output matrix (210 bytes per 256), as mkmodel writes it:
  // layers 968,884,224 / 256 * 144 = 544,997,376; output 65,536,000 / 256 * 210 = 53,760,000;
  // embedding row 2048 / 256 * 144 = 1,152.
  const ForwardCost qk = cost_of("1.1b", DType::Q4_K, DType::Q6_K);
  EXPECT_EQ(qk.matrix_bytes, 544'997'376u + 53'760'000u);
  EXPECT_EQ(qk.lookup_bytes_per_token, 1'152u);
  EXPECT_EQ(qk.int8_macs_per_token, k11bLayerMacs + k11bOutputMacs);
}

TEST(ForwardCost, Stories110mF16IsFloatWork) {
  // 768 wide, 12 layers, n_ff 2048: per layer 4 * 768^2 + 3 * 768 * 2048 = 7,077,888;
  // 12 layers 84,934,656; output 32000 * 768 = 24,576,000; in all 109,510,656 MACs.
  const ForwardCost c = cost_of("110m", DType::F16, DType::F16);
  EXPECT_EQ(c.float_macs_per_token, 109'510'656u);
  EXPECT_EQ(c.int8_macs_per_token, 0u);
  EXPECT_EQ(c.matrix_bytes, 2u * 109'510'656u);
  EXPECT_EQ(c.lookup_bytes_per_token, 2u * 768u);
}

TEST(ForwardCost, TiedOutputReadsTheWholeEmbeddingAsTheOutputMatrix) {
  const ForwardCost untied = cost_of("110m", DType::Q8_0, DType::Q8_0, false);
  const ForwardCost tied = cost_of("110m", DType::Q8_0, DType::Q8_0, true);
  EXPECT_EQ(tied.macs_per_token(), untied.macs_per_token());
  EXPECT_EQ(tied.weight_bytes_per_token(), untied.weight_bytes_per_token());
  const ModelConfig c = config_of(*synthetic_shape("110m"), 32000);
  const auto reads = llama_matrix_reads(c, [](const std::string&) { return DType::Q8_0; }, true);
  EXPECT_EQ(reads.back().name, "token_embd.weight");
  EXPECT_FALSE(reads.back().lookup);
  EXPECT_TRUE(reads.front().lookup);
}

TEST(ForwardCost, CeilingsForTinyLlama11bQ8_0) {
  const ForwardCost c = cost_of("1.1b", DType::Q8_0, DType::Q8_0);
  const MachinePeaks p{28.0, 1000.0, 340.0};
  // Decode: 28e9 / 1,099,073,664 = 25.476 tokens/s.
  EXPECT_NEAR(bandwidth_ceiling_tokens_per_s(c, p, 1), 25.476, 0.001);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(c, p, 1), 25.476, 0.001);
  // Prefill: 1e12 / (2 * 1,034,420,224) = 483.36 tokens/s.
  EXPECT_NEAR(compute_ceiling_tokens_per_s(c, p), 483.36, 0.01);
  // 32 sequences: the weights are read once per step for 32 tokens (plus 32 embedding rows):
  // 32 * 28e9 / (1,099,071,488 + 32 * 2,176) = 815.2 tokens/s, more than compute allows.
  EXPECT_NEAR(bandwidth_ceiling_tokens_per_s(c, p, 32), 815.2, 0.1);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(c, p, 32), 483.36, 0.01);
  // Unknown peaks give 0, not infinity.
  EXPECT_EQ(compute_ceiling_tokens_per_s(c, MachinePeaks{28.0, 0, 340.0}), 0);
  EXPECT_EQ(bandwidth_ceiling_tokens_per_s(c, MachinePeaks{}, 1), 0);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(c, MachinePeaks{28.0, 0, 0}, 32), 815.2, 0.1);
}

TEST(ForwardCost, MixedModelsChargeEachUnitItsShare) {
  // 110m with f16 layers and a q8_0 output: layers on the f32 unit, output on the integer unit.
  const ForwardCost c = cost_of("110m", DType::F16, DType::Q8_0);
  EXPECT_EQ(c.float_macs_per_token, 84'934'656u);
  EXPECT_EQ(c.int8_macs_per_token, 24'576'000u);
  const MachinePeaks p{10.0, 100.0, 50.0};
  const double seconds = 2.0 * 84'934'656 / 50e9 + 2.0 * 24'576'000 / 100e9;
  EXPECT_NEAR(compute_ceiling_tokens_per_s(c, p), 1.0 / seconds, 1e-9);
}

TEST(ForwardCost, FromAFileMatchesTheHandCount) {
  // A tiny synthetic model: 64 wide, 2 layers, 4 heads of 16, 2 KV heads (kv_dim 32), n_ff 96, 32000 vocab.
  for (bool tied : {false, true}) {
    SyntheticSpec spec;
    spec.shape = {"tiny", 64, 2, 4, 2, 96, 256};
    spec.type = DType::Q8_0;
    spec.tied_output = tied;
    Result<GgufFile> vocab = GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
    ASSERT_TRUE(vocab.ok()) << vocab.message();
    const std::string path = ::testing::TempDir() + "/th_forward_cost" + (tied ? "_tied" : "") + ".gguf";
    ASSERT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
    Result<GgufFile> f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    Result<ModelConfig> c = config_from_gguf(*f);
    ASSERT_TRUE(c.ok()) << c.message();
    Result<std::vector<MatrixRead>> reads = llama_matrix_reads(*f, *c);
    ASSERT_TRUE(reads.ok()) << reads.message();
    // Per layer: q, o 64 x 64 = 4096 each; k, v 32 x 64 = 2048 each; gate, up, down 96 x 64 = 6144 each:
    // 30,720. Two layers 61,440; output 32000 x 64 = 2,048,000. In all 2,109,440 MACs.
    const ForwardCost cost = forward_cost(*reads);
    EXPECT_EQ(cost.int8_macs_per_token, 2'109'440u);
    EXPECT_EQ(cost.matrix_bytes, 2'109'440u / 32 * 34);
    EXPECT_EQ(cost.lookup_bytes_per_token, 68u);
    ::remove(path.c_str());
  }
}

TEST(ForwardCost, FusedTensorsAndExpertsCountWhatATokenReads) {
  // mkmodel's tiny models, f32, 512-token vocab: 64 wide, 2 layers, 4 q / 2 kv heads.
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  // phi3 (head 16): attn_qkv 128 x 64 = 8192, o 4096, ffn_up (gate and up) 256 x 64 = 16384,
  // down 8192: 36,864 per layer, 73,728 for two, output 512 x 64 = 32,768: 106,496.
  // qwen3moe (head 32: q 128, kv 64): q 8192, k 4096, v 4096, o 8192; router 4 x 64 = 256;
  // 2 of 4 experts of width 64: gate 8192, up 8192, down 8192: 49,408 per layer; two 98,816;
  // output 32,768: 131,584.
  for (const auto& [arch, macs] : std::vector<std::pair<std::string, uint64_t>>{{"phi3", 106'496u}, {"qwen3moe", 131'584u}}) {
    SyntheticSpec spec;
    spec.shape = *synthetic_shape("tiny");
    spec.type = DType::F32;
    ASSERT_TRUE(apply_synthetic_arch(arch, spec).ok());
    const std::string path = test::temp_path("forward_cost_" + arch + ".gguf");
    ASSERT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
    Result<GgufFile> f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    Result<ModelConfig> c = config_from_gguf(*f);
    ASSERT_TRUE(c.ok()) << c.message();
    Result<std::vector<MatrixRead>> reads = llama_matrix_reads(*f, *c);
    ASSERT_TRUE(reads.ok()) << arch << ": " << reads.message();
    const ForwardCost cost = forward_cost(*reads);
    EXPECT_EQ(cost.float_macs_per_token, macs) << arch;
    EXPECT_EQ(cost.matrix_bytes, macs * 4) << arch;
    ::remove(path.c_str());
  }
}

}  // namespace
}  // namespace th
