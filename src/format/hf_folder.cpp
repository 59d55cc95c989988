#include "format/hf_folder.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/hf_config.h"
#include "format/hf_tokenizer.h"
#include "format/safetensors.h"
#include "tensor/quant.h"

namespace th {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// tokenizer.json of a 150k-token vocabulary is about 11 MB; past this is not a real file.
constexpr uintmax_t kMaxJsonBytes = 256ull << 20;

Result<std::string> read_text(const std::string& path, bool required) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    if (!required) return std::string();
    return Status::errorf(path, ": missing");
  }
  if (fs::file_size(path, ec) > kMaxJsonBytes) return Status::errorf(path, ": larger than ", kMaxJsonBytes, " bytes");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in) return Status::errorf(path, ": cannot read");
  return s.str();
}

struct Located {
  const SafetensorsTensor* t;
  std::string file;
};

// The safetensors files: the index's shards, else model.safetensors. Fills `by_name`.
Status open_weights(const std::string& dir, std::vector<SafetensorsFile>& files, std::map<std::string, Located>& by_name) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::vector<std::string> names;
  std::map<std::string, std::string> weight_map;
  TH_ASSIGN_OR_RETURN(std::string index_text, read_text(index_path, false));
  if (!index_text.empty()) {
    const json j = json::parse(index_text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return Status::errorf(index_path, ": not a JSON object with a weight_map");
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) return Status::errorf(index_path, ": weight_map entry '", tensor, "' is not a file name");
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        return Status::errorf(index_path, ": weight_map names '", f, "', not a file in the folder");
      weight_map[tensor] = f;
      if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
    }
  } else {
    if (!fs::exists(dir + "/model.safetensors"))
      return Status::errorf(dir, ": no model.safetensors nor model.safetensors.index.json");
    names.push_back("model.safetensors");
  }
  files.reserve(names.size());  // Located points into the vector's tensors: no reallocation
  for (const std::string& n : names) {
    TH_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(dir + "/" + n));
    files.push_back(std::move(f));
    for (const SafetensorsTensor& t : files.back().tensors) {
      auto w = weight_map.find(t.name);
      if (!weight_map.empty() && (w == weight_map.end() || w->second != n)) continue;  // the index decides
      if (!by_name.emplace(t.name, Located{&t, dir + "/" + n}).second)
        return Status::errorf(dir, "/", n, ": tensor '", t.name, "' is in two files");
    }
  }
  for (const auto& [tensor, file] : weight_map)
    if (!by_name.count(tensor))
      return Status::errorf(dir, "/", file, ": missing tensor '", tensor, "' (listed in model.safetensors.index.json)");
  return ok_status();
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A tensor found and checked against its row (dtype, shape) for layer `l`, expert `e`.
Result<const Located*> find_checked(const HfConfig& c, const HfTensorRow& row, const std::string& hf,
                                    const std::map<std::string, Located>& by_name, const std::string& weights_name) {
  auto it = by_name.find(c.tensor_prefix + hf);
  if (it == by_name.end()) {
    if (row.optional) return static_cast<const Located*>(nullptr);
    return Status::errorf(weights_name, ": missing tensor '", c.tensor_prefix + hf, "'");
  }
  const SafetensorsTensor& t = *it->second.t;
  if (!t.supported)
    return Status::errorf(it->second.file, ": tensor '", it->first, "' has dtype ", t.dtype, " (supported: F32, F16, BF16)");
  std::vector<int64_t> want{c.dim(row.rows)};
  if (row.cols != HfDim::None) want.push_back(c.dim(row.cols));
  if (t.shape != want)
    return Status::errorf(it->second.file, ": tensor '", it->first, "' has shape ", shape_text(t.shape), ", expected ",
                          shape_text(want), " (from config.json)");
  return &it->second;
}

// Tensors whose data is made at load (gemma's norms + 1, experts stacked unless they already
// lie back to back, phi3's rope factors): filled into one anonymous map once it is sized.
struct Derived {
  size_t tensor, offset;
  std::function<void(uint8_t*)> fill;
};

class Mapper {
 public:
  Mapper(const HfConfig& c, const std::map<std::string, Located>& by_name, std::string weights_name)
      : c_(c), by_name_(by_name), weights_name_(std::move(weights_name)) {}

  Status add_row(const HfTensorRow& row, int64_t l) {
    const std::string gguf = hf_layer_name(row.gguf, l);
    if (row.gguf == "output.weight" && c_.tied) return ok_status();  // the embedding serves
    if (row.op == HfOp::Experts) return add_experts(row, l, gguf);
    TH_ASSIGN_OR_RETURN(const Located* at, find_checked(c_, row, hf_layer_name(row.hf, l), by_name_, weights_name_));
    if (!at) return ok_status();
    const SafetensorsTensor& t = *at->t;
    GgufTensor g{.name = gguf, .dims = std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()), .type = t.type, .data = t.data, .nbytes = t.nbytes};
    if (row.op == HfOp::PlusOne) {
      const int64_t n = t.shape[0];
      g.type = DType::F32;
      g.nbytes = static_cast<size_t>(n) * sizeof(float);
      derive(std::move(g), [src = t.data, type = t.type, n](uint8_t* dst) {
        float* f = reinterpret_cast<float*>(dst);
        dequantize_row(type, src, f, n);
        for (int64_t i = 0; i < n; ++i) f[i] += 1.0f;
      });
      return ok_status();
    }
    out_.push_back(std::move(g));
    return ok_status();
  }

  void add_vector(const std::string& name, const std::vector<float>& v) {
    GgufTensor g{.name = name, .dims = {static_cast<int64_t>(v.size())}, .type = DType::F32, .nbytes = v.size() * sizeof(float)};
    derive(std::move(g), [&v](uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * sizeof(float)); });
  }

  // The tensors, with the derived ones' data in `map` (its size 0 when there are none).
  Result<std::vector<GgufTensor>> finish(MappedFile& map) {
    if (derived_bytes_ > 0) {
      TH_ASSIGN_OR_RETURN(map, MappedFile::anonymous(derived_bytes_, weights_name_ + " (derived tensors)"));
      for (const Derived& d : derived_) {
        d.fill(map.mutable_data() + d.offset);
        out_[d.tensor].data = map.data() + d.offset;
      }
    }
    return std::move(out_);
  }

 private:
  void derive(GgufTensor g, std::function<void(uint8_t*)> fill) {
    derived_.push_back(Derived{out_.size(), derived_bytes_, std::move(fill)});
    derived_bytes_ += (g.nbytes + 63) / 64 * 64;  // each tensor 64-byte aligned, as a GGUF's are
    out_.push_back(std::move(g));
  }

  // One [n_expert, rows, cols] tensor from n_expert [rows, cols] ones of one dtype. Written by
  // write_hf_folder, they lie back to back in one file: then no copy.
  Status add_experts(const HfTensorRow& row, int64_t l, const std::string& gguf) {
    std::vector<const SafetensorsTensor*> parts;
    for (int64_t e = 0; e < c_.n_expert; ++e) {
      const std::string hf = hf_expert_name(row.hf, l, e);
      TH_ASSIGN_OR_RETURN(const Located* at, find_checked(c_, row, hf, by_name_, weights_name_));
      if (!parts.empty() && at->t->type != parts[0]->type)
        return Status::errorf(at->file, ": tensor '", hf, "' has dtype ", at->t->dtype, ", unlike expert 0's ",
                              parts[0]->dtype);
      parts.push_back(at->t);
    }
    const size_t each = parts[0]->nbytes;
    bool contiguous = true;
    for (size_t e = 1; e < parts.size(); ++e) contiguous = contiguous && parts[e]->data == parts[0]->data + e * each;
    GgufTensor g{.name = gguf, .dims = {c_.dim(row.cols), c_.dim(row.rows), c_.n_expert}, .type = parts[0]->type,
                 .data = parts[0]->data, .nbytes = each * parts.size()};
    if (contiguous) {
      out_.push_back(std::move(g));
      return ok_status();
    }
    derive(std::move(g), [parts, each](uint8_t* dst) {
      for (size_t e = 0; e < parts.size(); ++e) std::memcpy(dst + e * each, parts[e]->data, each);
    });
    return ok_status();
  }

  const HfConfig& c_;
  const std::map<std::string, Located>& by_name_;
  std::string weights_name_;
  std::vector<GgufTensor> out_;
  std::vector<Derived> derived_;
  size_t derived_bytes_ = 0;
};

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

Result<GgufFile> open_hf_folder(const std::string& dir) {
  TH_ASSIGN_OR_RETURN(std::string config_text, read_text(dir + "/config.json", true));
  TH_ASSIGN_OR_RETURN(HfConfig c, parse_hf_config(config_text, dir + "/config.json"));
  std::vector<SafetensorsFile> files;
  std::map<std::string, Located> by_name;
  TH_RETURN_IF_ERROR(open_weights(dir, files, by_name));
  const std::string weights_name =
      dir + (files.size() > 1 || !fs::exists(dir + "/model.safetensors") ? "/model.safetensors.index.json"
                                                                         : "/model.safetensors");
  Mapper mapper(c, by_name, weights_name);
  for (const HfTensorRow& row : c.arch->tensors) {
    const bool per_layer = row.hf.find("{N}") != std::string_view::npos;
    for (int64_t l = 0; l < (per_layer ? c.n_layer : 1); ++l) TH_RETURN_IF_ERROR(mapper.add_row(row, l));
  }
  for (const auto& [name, values] : c.extra_tensors) mapper.add_vector(name, values);
  MappedFile derived;
  TH_ASSIGN_OR_RETURN(std::vector<GgufTensor> tensors, mapper.finish(derived));

  HfTokenizerInput tin;
  TH_ASSIGN_OR_RETURN(std::string tok_text, read_text(dir + "/tokenizer.json", true));
  TH_ASSIGN_OR_RETURN(std::string tok_cfg, read_text(dir + "/tokenizer_config.json", false));
  tin.tokenizer_json = tok_text;
  tin.tokenizer_json_name = dir + "/tokenizer.json";
  tin.tokenizer_config = tok_cfg;
  tin.tokenizer_config_name = dir + "/tokenizer_config.json";
  tin.n_vocab = c.n_vocab;
  tin.bos = c.bos;
  tin.eos = c.eos;
  TH_ASSIGN_OR_RETURN(auto tok_meta, hf_tokenizer_metadata(tin));

  std::vector<std::pair<std::string, GgufValue>> kv = std::move(c.metadata);
  kv.emplace_back("general.name", GgufValue{GgufType::STRING, fs::path(dir).filename().string()});
  for (auto& e : tok_meta) kv.push_back(std::move(e));
  std::vector<MappedFile> maps;
  for (SafetensorsFile& f : files) maps.push_back(std::move(f.map));
  if (derived.size() > 0) maps.push_back(std::move(derived));
  return GgufFile::assemble(dir, std::move(kv), std::move(tensors), std::move(maps));
}

}  // namespace th
