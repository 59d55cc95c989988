#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace th {

namespace {

// A header past this is not a real file (Llama-3.1-405B's largest shard header is
// about 100 KB) and refusing it bounds the JSON parser's work.
constexpr uint64_t kMaxHeader = 64ull << 20;
constexpr int64_t kMaxDims = 8;

struct DtypeRow {
  const char* name;
  size_t size;
  bool supported;
  DType type;
};
constexpr DtypeRow kDtypes[] = {
    {"F32", 4, true, DType::F32},    {"F16", 2, true, DType::F16},    {"BF16", 2, true, DType::BF16},
    {"F64", 8, false, DType::F32},   {"I64", 8, false, DType::F32},   {"I32", 4, false, DType::F32},
    {"I16", 2, false, DType::F32},   {"I8", 1, false, DType::F32},    {"U8", 1, false, DType::F32},
    {"BOOL", 1, false, DType::F32},  {"F8_E4M3", 1, false, DType::F32}, {"F8_E5M2", 1, false, DType::F32},
    {"U16", 2, false, DType::F32},   {"U32", 4, false, DType::F32},   {"U64", 8, false, DType::F32},
};

const DtypeRow* find_dtype(const std::string& s) {
  for (const DtypeRow& r : kDtypes)
    if (s == r.name) return &r;
  return nullptr;
}

Result<SafetensorsTensor> parse_entry(const std::string& key, const nlohmann::json& e, const uint8_t* base,
                                      uint64_t data_size, const std::string& name) {
  auto fail = [&](auto&&... what) { return Status::errorf(name, ": tensor '", key, "': ", what...); };
  if (!e.is_object()) return fail("header entry is not an object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return fail("no dtype string");
  if (sh == e.end() || !sh->is_array()) return fail("no shape array");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return fail("data_offsets is not [begin, end]");
  SafetensorsTensor t;
  t.name = key;
  t.dtype = dt->get<std::string>();
  const DtypeRow* row = find_dtype(t.dtype);
  if (!row) return fail("unknown dtype '", t.dtype, "'");
  t.supported = row->supported;
  t.type = row->type;
  if (sh->size() > static_cast<size_t>(kMaxDims)) return fail(sh->size(), " dimensions");
  uint64_t n = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40)) return fail("a dimension is not a size");
    const uint64_t v = d.get<uint64_t>();
    if (v != 0 && n > (1ull << 62) / v) return fail("shape overflows");
    n *= v;
    t.shape.push_back(static_cast<int64_t>(v));
  }
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    return fail("data_offsets [", begin, ", ", end, "] outside the data (", data_size, " bytes)");
  if (n > (1ull << 62) / row->size || end - begin != n * row->size)
    return fail(end - begin, " bytes for ", n, " elements of ", t.dtype);
  t.data = base + begin;
  t.nbytes = static_cast<size_t>(end - begin);
  return t;
}

}  // namespace

Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 8) return Status::errorf(name, ": truncated safetensors header (", size, " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | data[i];
  if (n > size - 8 || n > kMaxHeader)
    return Status::errorf(name, ": safetensors header length ", n, " is past the file's ", size, " bytes");
  const auto* h = reinterpret_cast<const char*>(data + 8);
  nlohmann::json j = nlohmann::json::parse(h, h + n, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::errorf(name, ": safetensors header is not a JSON object");
  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<SafetensorsTensor> out;
  for (const auto& [key, e] : j.items()) {
    if (key == "__metadata__") continue;
    TH_ASSIGN_OR_RETURN(SafetensorsTensor t, parse_entry(key, e, base, data_size, name));
    out.push_back(std::move(t));
  }
  // No two tensors may share bytes (the format's rule; a writer bug otherwise).
  std::vector<const SafetensorsTensor*> by_start;
  for (const auto& t : out) by_start.push_back(&t);
  std::sort(by_start.begin(), by_start.end(), [](auto* a, auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_start.size(); ++i)
    if (by_start[i - 1]->data + by_start[i - 1]->nbytes > by_start[i]->data)
      return Status::errorf(name, ": tensors '", by_start[i - 1]->name, "' and '", by_start[i]->name, "' overlap");
  return out;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  TH_ASSIGN_OR_RETURN(f.map, MappedFile::open(path));
  TH_ASSIGN_OR_RETURN(f.tensors, parse_safetensors(f.map.data(), f.map.size(), path));
  return f;
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t at = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.nbytes}}};
    at += t.nbytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned, as the reference writer pads
  std::ofstream out(path, std::ios::binary);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
  if (!out.flush()) return Status::errorf(path, ": cannot write");
  return ok_status();
}

}  // namespace th
