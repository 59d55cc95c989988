#include "format/hf_folder.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/hf_config.h"
#include "format/hf_tokenizer.h"
#include "format/safetensors.h"

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

// The architecture's table applied: every row's tensor found, checked and renamed.
Result<std::vector<GgufTensor>> map_tensors(const HfConfig& c, const std::map<std::string, Located>& by_name,
                                            const std::string& weights_name) {
  std::vector<GgufTensor> out;
  for (const HfTensorRow& row : c.arch->tensors) {
    const bool per_layer = row.hf.find("{N}") != std::string_view::npos;
    for (int64_t l = 0; l < (per_layer ? c.n_layer : 1); ++l) {
      const std::string hf = hf_layer_name(row.hf, l);
      if (row.gguf == "output.weight" && c.tied) continue;  // the embedding serves
      auto it = by_name.find(hf);
      if (it == by_name.end()) {
        if (row.optional) continue;
        return Status::errorf(weights_name, ": missing tensor '", hf, "'");
      }
      const SafetensorsTensor& t = *it->second.t;
      if (!t.supported)
        return Status::errorf(it->second.file, ": tensor '", hf, "' has dtype ", t.dtype, " (supported: F32, F16, BF16)");
      std::vector<int64_t> want{c.dim(row.rows)};
      if (row.cols != HfDim::None) want.push_back(c.dim(row.cols));
      if (t.shape != want)
        return Status::errorf(it->second.file, ": tensor '", hf, "' has shape ", shape_text(t.shape), ", expected ",
                              shape_text(want), " (from config.json)");
      GgufTensor g;
      g.name = hf_layer_name(row.gguf, l);
      g.dims.assign(t.shape.rbegin(), t.shape.rend());  // ggml lists the contiguous dimension first
      g.type = t.type;
      g.data = t.data;
      g.nbytes = t.nbytes;
      out.push_back(std::move(g));
    }
  }
  return out;
}

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
  TH_ASSIGN_OR_RETURN(std::vector<GgufTensor> tensors, map_tensors(c, by_name, weights_name));

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
  return GgufFile::assemble(dir, std::move(kv), std::move(tensors), std::move(maps));
}

}  // namespace th
