// Writes seed inputs for gguf_fuzz into the directory given as argv[1]:
// small writer-made files that reach every value type, every tensor type and
// the alignment paths, plus the real stories260K.gguf and a small file with
// its metadata (the 512-entry vocabulary) but a single tensor. Small seeds
// keep the fuzzer fast; the real ones give it a layout it did not invent.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "tensor/dtype.h"

namespace th {
namespace {

namespace fs = std::filesystem;

std::string shared_dir() {
  const char* env = std::getenv("TOKENHIVE_SHARED");
  return env && *env ? env : TH_SHARED_DIR;
}

bool save(const fs::path& dir, const std::string& name, const GgufWriter& w) {
  if (Status s = w.write((dir / name).string()); !s.ok()) {
    std::fprintf(stderr, "make_gguf_corpus: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

GgufArray int_array(GgufType t, std::vector<int64_t> v) {
  GgufArray a;
  a.elem_type = t;
  a.ints = std::move(v);
  return a;
}

GgufWriter every_value_type() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add("u8", {GgufType::UINT8, int64_t{255}});
  w.add("i8", {GgufType::INT8, int64_t{-1}});
  w.add("u16", {GgufType::UINT16, int64_t{65535}});
  w.add("i16", {GgufType::INT16, int64_t{-2}});
  w.add_u32("u32", 7);
  w.add_i32("i32", -7);
  w.add("u64", {GgufType::UINT64, int64_t{1} << 40});
  w.add("i64", {GgufType::INT64, int64_t{-3}});
  w.add_f32("f32", 0.25f);
  w.add("f64", {GgufType::FLOAT64, 0.5});
  w.add_bool("b", true);
  GgufArray strs;
  strs.elem_type = GgufType::STRING;
  strs.strings = {"<s>", "", "hello"};
  w.add_array("strs", strs);
  GgufArray floats;
  floats.elem_type = GgufType::FLOAT32;
  floats.floats = {1, -1};
  w.add_array("floats", floats);
  GgufArray bools;
  bools.elem_type = GgufType::BOOL;
  bools.bools = {1, 0};
  w.add_array("bools", bools);
  w.add_array("ints", int_array(GgufType::INT32, {1, -2, 3}));
  GgufArray nested;
  nested.elem_type = GgufType::ARRAY;
  nested.arrays = {int_array(GgufType::UINT8, {1, 2}), int_array(GgufType::UINT64, {})};
  w.add_array("nested", nested);
  const float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  w.add_tensor("t.f32", {4, 2}, DType::F32, f, sizeof f);
  return w;
}

// One small tensor of each type tokenhive knows, so the fuzzer starts from
// every block size.
GgufWriter every_tensor_type() {
  GgufWriter w;
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeInfo* info = dtype_info(id);
    if (!info) continue;
    const std::vector<uint8_t> data(info->type_size, 0);
    w.add_tensor(std::string(info->name), {info->block_size}, info->type, data.data(), data.size());
  }
  return w;
}

}  // namespace
}  // namespace th

int main(int argc, char** argv) {
  using namespace th;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_gguf_corpus OUTDIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  std::error_code ec;
  fs::create_directories(dir, ec);
  bool ok = true;

  ok &= save(dir, "seed-every-value-type.gguf", every_value_type());
  ok &= save(dir, "seed-every-tensor-type.gguf", every_tensor_type());
  GgufWriter aligned = every_value_type();
  aligned.set_alignment(64);
  const float f[2] = {1, 2};
  aligned.add_tensor("t.second", {2}, DType::F32, f, sizeof f);
  ok &= save(dir, "seed-aligned-64.gguf", aligned);
  GgufWriter empty;
  ok &= save(dir, "seed-empty.gguf", empty);

  const fs::path stories = fs::path(shared_dir()) / "models/stories260K.gguf";
  Result<GgufFile> g = GgufFile::open(stories.string());
  if (!g.ok()) {
    std::fprintf(stderr, "make_gguf_corpus: %s (skipping the stories260K seeds)\n", g.message().c_str());
  } else {
    // The shared copy is read-only and copy_file keeps that: make ours writable
    // so that the next run can replace it.
    const fs::path seed = dir / "seed-stories260K.gguf";
    fs::remove(seed, ec);
    fs::copy_file(stories, seed, ec);
    if (!ec) fs::permissions(seed, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
    if (ec) {
      std::fprintf(stderr, "make_gguf_corpus: copying %s: %s\n", stories.c_str(), ec.message().c_str());
      ok = false;
    }
    // The real vocabulary and hyperparameters at a hundredth of the size.
    GgufWriter meta;
    for (const auto& [key, value] : g->metadata()) meta.add(key, value);
    const GgufTensor* norm = g->tensor("output_norm.weight");
    if (norm) meta.add_tensor(norm->name, norm->dims, norm->type, norm->data, norm->nbytes);
    ok &= save(dir, "seed-stories260K-metadata.gguf", meta);
  }
  return ok ? 0 : 1;
}
