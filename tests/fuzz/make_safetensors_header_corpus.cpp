// Writes seed inputs for safetensors_header_fuzz into the directory given as argv[1]: files of
// the shapes Hugging Face checkpoints have, written by write_safetensors (every dtype the
// parser names, __metadata__, a scalar, an empty tensor, a tensor per expert), so that the
// fuzzer starts from valid headers and extents rather than from noise.
#include <cstdio>
#include <string>
#include <vector>

#include "corpus_writer.h"
#include "format/safetensors.h"

namespace {

th::SafetensorsTensor tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                             const std::vector<uint8_t>& bytes) {
  th::SafetensorsTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = bytes.data();
  t.nbytes = bytes.size();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  auto dir = th::fuzz::corpus_dir(argc, argv);
  if (!dir) return 2;
  const std::vector<uint8_t> b64(64, 0x3c), b16(16, 0x3f), b4(4, 0x3f), none;  // the data outlives the writes
  const std::vector<std::vector<th::SafetensorsTensor>> files = {
      {tensor("model.norm.weight", "F32", {4}, b16), tensor("model.embed_tokens.weight", "BF16", {4, 8}, b64),
       tensor("lm_head.weight", "F16", {8, 4}, b64)},
      {tensor("scalar", "F32", {}, b4), tensor("empty", "F16", {0, 4}, none),
       tensor("ints", "I64", {2}, b16), tensor("bytes", "U8", {16}, b16), tensor("f64", "F64", {2}, b16)},
      {tensor("model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", {2, 8}, b16),
       tensor("model.layers.0.mlp.experts.1.gate_proj.weight", "BF16", {2, 8}, b16),
       tensor("model.layers.0.mlp.gate.weight", "F32", {2, 8}, b64)},
      {},
  };
  size_t i = 0;
  for (const auto& f : files) {
    const std::string path = (*dir / ("seed_" + std::to_string(i++))).string();
    if (th::Status s = th::write_safetensors(path, f); !s.ok()) {
      std::fprintf(stderr, "make_safetensors_header_corpus: %s\n", s.message().c_str());
      return 1;
    }
  }
  // A header with __metadata__, as torch's writer puts first.
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  std::string img(8, '\0');
  for (int k = 0; k < 8; ++k) img[static_cast<size_t>(k)] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
  img += header + std::string(16, '\0');
  return th::fuzz::write_seed(*dir, i, img) ? 0 : 1;
}
