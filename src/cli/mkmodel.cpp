// tokenhive mkmodel: synthetic GGUF files of every supported architecture, real shapes, random weights.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "cli/parse_flags.h"
#include "cli/verbs.h"
#include "format/gguf.h"
#include "format/hf_folder.h"
#include "model/model_path.h"
#include "model/synthetic_model.h"

namespace th::cli {

int run_mkmodel(int argc, char** argv) {
  CLI::App app{"Write a synthetic GGUF model of a real shape with random weights, of any supported architecture.",
               "tokenhive mkmodel"};
  std::string shape_name = "tiny", type_name = "f16", out, vocab_path, arch = "llama", format = "gguf";
  int shards = 1;
  SyntheticShape custom;
  uint64_t seed = 1;
  bool tied = false;
  app.add_option("--shape", shape_name, "tiny (default) | 110m | 1.1b | 7b (or 'custom' with the shape flags)");
  app.add_option("--type", type_name, "f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q2_k | q3_k | q4_k | q5_k | q6_k | iq4_nl | iq4_xs");
  app.add_option("-o,--output", out, "output file (a folder with --format hf)")->required();
  app.add_option("--format", format, "gguf (default) | hf: a Hugging Face folder (every --arch; f32/f16/bf16)")
      ->check(CLI::IsMember({"gguf", "hf"}));
  app.add_option("--shards", shards, "hf: safetensors files (more than 1: with model.safetensors.index.json)")
      ->check(CLI::Range(1, 99));
  app.add_option("--vocab", vocab_path,
                 "GGUF whose tokenizer to use (default: the Llama-2 32000-token vocab in ../shared; with --format hf, "
                 "GPT-2's byte-level BPE one)");
  app.add_option("--arch", arch,
                 "llama | llama3 (Llama 3.1 rope factors) | mistral (sliding window) | mixtral | qwen2 | qwen3 | qwen3moe | gemma2 | gemma3 | phi3");
  app.add_option("--seed", seed, "weights' random seed");
  app.add_flag("--tied", tied, "no output.weight: the embedding doubles as the output matrix");
  app.add_option("--dim", custom.n_embd, "custom: embedding size")->check(CLI::Range(1, 65536));
  app.add_option("--layers", custom.n_layer, "custom: layers")->check(CLI::Range(1, 1024));
  app.add_option("--heads", custom.n_head, "custom: attention heads")->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", custom.n_head_kv, "custom: KV heads")->check(CLI::Range(1, 1024));
  app.add_option("--ffn", custom.n_ff, "custom: feed-forward size")->check(CLI::Range(1, 1 << 20));
  if (std::optional<int> rc = parse_flags(app, "mkmodel", argc, argv)) return *rc;
  auto usage_error = [](const std::string& m) {
    std::fprintf(stderr, "tokenhive mkmodel: %s\n", m.c_str());
    return 2;
  };

  SyntheticSpec spec;
  spec.seed = seed;
  spec.tied_output = tied;
  if (shape_name == "custom") {
    if (!custom.n_embd || !custom.n_layer || !custom.n_head || !custom.n_ff)
      return usage_error("--shape custom needs --dim, --layers, --heads and --ffn");
    if (!custom.n_head_kv) custom.n_head_kv = custom.n_head;
    custom.name = "custom";
    spec.shape = custom;
  } else {
    Result<SyntheticShape> s = synthetic_shape(shape_name);
    if (!s.ok()) return usage_error(s.message());
    spec.shape = *s;
  }
  static const std::map<std::string, DType> kTypes = {
      {"f32", DType::F32},   {"f16", DType::F16},   {"bf16", DType::BF16}, {"q8_0", DType::Q8_0},
      {"q4_0", DType::Q4_0}, {"q4_1", DType::Q4_1}, {"q5_0", DType::Q5_0}, {"q5_1", DType::Q5_1},
      {"q2_k", DType::Q2_K}, {"q3_k", DType::Q3_K}, {"q4_k", DType::Q4_K}, {"q5_k", DType::Q5_K},
      {"q6_k", DType::Q6_K}, {"iq4_nl", DType::IQ4_NL}, {"iq4_xs", DType::IQ4_XS}};
  auto t = kTypes.find(type_name);
  if (t == kTypes.end()) return usage_error("unknown --type '" + type_name + "'");
  spec.type = t->second;
  if (Status s = apply_synthetic_arch(arch, spec); !s.ok()) return usage_error(s.message());

  if (vocab_path.empty()) {
    const std::string shared = find_shared_dir();
    if (shared.empty()) return usage_error("no --vocab given and no ../shared folder (set $TOKENHIVE_SHARED)");
    vocab_path = shared + (format == "hf" ? "/testdata/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf"
                                          : "/testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf");
  }
  Result<GgufFile> vocab = GgufFile::open(vocab_path);
  if (!vocab.ok()) {
    std::fprintf(stderr, "tokenhive mkmodel: %s\n", vocab.message().c_str());
    return 1;
  }
  // A folder is the GGUF written first, then converted (the inverse of what serve -m DIR reads).
  std::error_code ec;
  if (format == "hf" && !std::filesystem::create_directories(out, ec) && ec)
    return usage_error("cannot create " + out + ": " + ec.message());
  const std::string gguf_path = format == "hf" ? out + "/.mkmodel.gguf.tmp" : out;
  Status s = write_synthetic_model(spec, *vocab, gguf_path);
  if (s.ok() && format == "hf") {
    Result<GgufFile> g = GgufFile::open(gguf_path);
    s = g.ok() ? write_hf_folder(*g, out, {shards, synthetic_hf_rope_scaling(spec)}) : Status::error(g.message());
    std::remove(gguf_path.c_str());
  }
  if (!s.ok()) {
    std::fprintf(stderr, "tokenhive mkmodel: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "tokenhive mkmodel: wrote %s (%s, %s, %s, %s)\n", out.c_str(), arch.c_str(),
               spec.shape.name.c_str(), type_name.c_str(), format.c_str());
  return 0;
}

}  // namespace th::cli
