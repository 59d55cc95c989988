#include "format/gguf.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "test_util.h"

namespace th {
namespace {

TEST(Gguf, ReadsStories260K) {
  Result<GgufFile> g = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(*g->get_string("general.architecture"), "llama");
  EXPECT_EQ(*g->get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(*g->get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(*g->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  Result<const GgufArray*> tokens = g->get_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ((*tokens)->strings.size(), 512u);
  EXPECT_EQ((*tokens)->strings[1], "<s>");
  ASSERT_EQ(g->tensors().size(), 3u + 5u * 9u);
  const GgufTensor* q = g->tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::F32);
  EXPECT_EQ(q->dims, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(q->nbytes, 64u * 64u * 4u);
  EXPECT_FALSE(g->get_string("llama.embedding_length").ok());
  Result<std::string> missing = g->get_string("no.such.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing metadata key 'no.such.key'"), std::string::npos);
}

TEST(Gguf, WriterRoundTripsEveryValueType) {
  GgufWriter w;
  w.set_alignment(64);
  w.add_string("s", "hello");
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -7);
  w.add_f32("f32", 0.5f);
  w.add_bool("b", true);
  w.add("u8", {GgufType::UINT8, int64_t{255}});
  w.add("i8", {GgufType::INT8, int64_t{-128}});
  w.add("u16", {GgufType::UINT16, int64_t{65535}});
  w.add("i16", {GgufType::INT16, int64_t{-32768}});
  w.add("u64", {GgufType::UINT64, int64_t{1} << 62});
  w.add("i64", {GgufType::INT64, int64_t{-5}});
  w.add("f64", {GgufType::FLOAT64, 0.1});
  GgufArray strs;
  strs.elem_type = GgufType::STRING;
  strs.strings = {"a", "", "ccc"};
  w.add_array("strs", strs);
  GgufArray nested;
  nested.elem_type = GgufType::ARRAY;
  GgufArray inner;
  inner.elem_type = GgufType::INT32;
  inner.ints = {1, -2, 3};
  nested.arrays = {inner, inner};
  w.add_array("nested", nested);
  const float data[6] = {1, 2, 3, 4, 5, 6};
  w.add_tensor("t", {3, 2}, DType::F32, data, sizeof data);
  w.add_tensor("u", {2}, DType::F32, data, 8);

  const std::vector<uint8_t> bytes = w.to_bytes();
  Result<GgufFile> g = GgufFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->alignment(), 64u);
  EXPECT_EQ(*g->get_string("s"), "hello");
  EXPECT_EQ(*g->get_uint("u32"), 4000000000u);
  EXPECT_EQ(*g->get_int("i32"), -7);
  EXPECT_EQ(*g->get_float("f32"), 0.5);
  EXPECT_TRUE(*g->get_bool("b"));
  EXPECT_EQ(*g->get_uint("u8"), 255u);
  EXPECT_EQ(*g->get_int("i8"), -128);
  EXPECT_EQ(*g->get_uint("u16"), 65535u);
  EXPECT_EQ(*g->get_int("i16"), -32768);
  EXPECT_EQ(*g->get_uint("u64"), uint64_t{1} << 62);
  EXPECT_EQ(*g->get_int("i64"), -5);
  EXPECT_EQ(*g->get_float("f64"), 0.1);
  EXPECT_FALSE(g->get_uint("i64").ok());
  EXPECT_EQ((*g->get_array("strs"))->strings, (std::vector<std::string>{"a", "", "ccc"}));
  const GgufArray* n = *g->get_array("nested");
  ASSERT_EQ(n->arrays.size(), 2u);
  EXPECT_EQ(n->arrays[1].ints, (std::vector<int64_t>{1, -2, 3}));
  const GgufTensor* t = g->tensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->n_rows(), 2);
  EXPECT_EQ(reinterpret_cast<const float*>(t->data)[5], 6.0f);
  EXPECT_EQ((t->data - bytes.data()) % 64, 0);
  EXPECT_EQ(reinterpret_cast<const float*>(g->tensor("u")->data)[1], 2.0f);
}

// Metadata copied from another file may carry general.alignment: the writer
// must lay the tensors out by it, or its output is refused as misaligned.
TEST(Gguf, WriterLaysOutByAlignmentMetadata) {
  const float data[3] = {1, 2, 3};
  for (uint32_t a : {8u, 64u, 4096u}) {
    SCOPED_TRACE(a);
    GgufWriter w;
    w.add_u32("general.alignment", a);
    w.add_tensor("t", {3}, DType::F32, data, sizeof data);
    w.add_tensor("u", {3}, DType::F32, data, sizeof data);
    const std::vector<uint8_t> bytes = w.to_bytes();
    Result<GgufFile> g = GgufFile::parse(bytes.data(), bytes.size());
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(g->alignment(), a);
    EXPECT_EQ((g->tensor("u")->data - bytes.data()) % a, 0);
    EXPECT_EQ(reinterpret_cast<const float*>(g->tensor("u")->data)[2], 3.0f);
    // write() streams the same layout.
    const std::string path = testing::TempDir() + "/tokenhive_align_" + std::to_string(getpid()) + ".gguf";
    ASSERT_TRUE(w.write(path).ok());
    Result<GgufFile> f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(reinterpret_cast<const float*>(f->tensor("u")->data)[2], 3.0f);
    std::remove(path.c_str());
  }
  // One the reader refuses is written, but not laid out by.
  GgufWriter w;
  w.add_u32("general.alignment", 0x80000000u);
  w.add_tensor("t", {3}, DType::F32, data, sizeof data);
  EXPECT_LT(w.to_bytes().size(), 4096u);
}

TEST(Gguf, ReadsVersion2) {
  // v2 has v3's layout (64-bit counts and lengths); only the version field differs.
  GgufWriter w;
  w.add_u32("answer", 42);
  const float data[4] = {1, 2, 3, 4};
  w.add_tensor("t", {4}, DType::F32, data, sizeof data);
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes[4] = 2;
  Result<GgufFile> g = GgufFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->version(), 2u);
  EXPECT_EQ(*g->get_uint("answer"), 42u);
  EXPECT_EQ(reinterpret_cast<const float*>(g->tensor("t")->data)[3], 4.0f);
}

}  // namespace
}  // namespace th
