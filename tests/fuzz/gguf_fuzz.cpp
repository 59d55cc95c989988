// libFuzzer target for the GGUF reader. libFuzzer hands us an exactly-sized
// heap copy of each input, so any pointer the reader gives out beyond the
// image is caught by ASan when we touch it here.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the touches from being optimized away

void touch(const std::string& s) {
  uint64_t h = s.size();
  for (char c : s) h = h * 31 + static_cast<uint8_t>(c);
  g_sink = g_sink + h;
}

void touch(const th::GgufArray& a) {
  for (int64_t x : a.ints) g_sink = g_sink + static_cast<uint64_t>(x);
  for (double x : a.floats) g_sink = g_sink + static_cast<uint64_t>(x == x);
  for (uint8_t x : a.bools) g_sink = g_sink + x;
  for (const std::string& s : a.strings) touch(s);
  for (const th::GgufArray& inner : a.arrays) touch(inner);
  g_sink = g_sink + a.size();
}

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "gguf_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool same_float(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same(const th::GgufArray& a, const th::GgufArray& b) {
  if (a.elem_type != b.elem_type || a.ints != b.ints || a.bools != b.bools || a.strings != b.strings ||
      a.floats.size() != b.floats.size() || a.arrays.size() != b.arrays.size())
    return false;
  for (size_t i = 0; i < a.floats.size(); ++i)
    if (!same_float(a.floats[i], b.floats[i])) return false;
  for (size_t i = 0; i < a.arrays.size(); ++i)
    if (!same(a.arrays[i], b.arrays[i])) return false;
  return true;
}

bool same(const th::GgufValue& a, const th::GgufValue& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const auto* x = std::get_if<double>(&a.v)) return same_float(*x, std::get<double>(b.v));
  if (const auto* x = std::get_if<std::shared_ptr<th::GgufArray>>(&a.v))
    return same(**x, *std::get<std::shared_ptr<th::GgufArray>>(b.v));
  return a.v == b.v;
}

// What the reader accepted, the writer must write back so that the reader
// reads the same thing again: the way a tool that edits a model would.
void round_trip(const th::GgufFile& g) {
  th::GgufWriter w;
  for (const auto& [key, v] : g.metadata()) w.add(key, v);
  for (const th::GgufTensor& t : g.tensors()) w.add_tensor(t.name, t.dims, t.type, t.data, t.nbytes);
  const std::vector<uint8_t> bytes = w.to_bytes();
  th::Result<th::GgufFile> again = th::GgufFile::parse(bytes.data(), bytes.size());
  if (!again.ok()) die("the writer's copy does not parse", again.message());
  if (again->metadata().size() != g.metadata().size()) die("round trip changed the metadata count", "");
  for (size_t i = 0; i < g.metadata().size(); ++i)
    if (again->metadata()[i].first != g.metadata()[i].first ||
        !same(again->metadata()[i].second, g.metadata()[i].second))
      die("round trip changed metadata", g.metadata()[i].first);
  if (again->tensors().size() != g.tensors().size()) die("round trip changed the tensor count", "");
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const th::GgufTensor& a = g.tensors()[i];
    const th::GgufTensor& b = again->tensors()[i];
    if (a.name != b.name || a.dims != b.dims || a.type != b.type || a.nbytes != b.nbytes ||
        std::memcmp(a.data, b.data, a.nbytes) != 0)
      die("round trip changed tensor", a.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  th::Result<th::GgufFile> g = th::GgufFile::parse(data, size);
  if (!g.ok()) {
    // The contract is a one-line message: a bad file must not be able to
    // smuggle newlines, control bytes or megabytes of text into it.
    const std::string& m = g.message();
    if (m.empty() || m.size() > 1024) die("error message of unexpected length", m.substr(0, 200));
    for (char c : m)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) die("control byte in error message", m);
    return 0;
  }
  for (const auto& [key, v] : g->metadata()) {
    touch(key);
    if (g->find(key) != &v) die("find() does not return the value of key", key);
    // Every getter on every key: each either answers or says why not.
    g_sink = g_sink + g->get_string(key).ok() + g->get_uint(key).ok() + g->get_int(key).ok() +
             g->get_float(key).ok() + g->get_bool(key).ok() + g->get_array(key).ok();
    switch (v.type) {
      case th::GgufType::STRING: touch(std::get<std::string>(v.v)); break;
      case th::GgufType::ARRAY: touch(*std::get<std::shared_ptr<th::GgufArray>>(v.v)); break;
      case th::GgufType::BOOL: g_sink = g_sink + std::get<bool>(v.v); break;
      case th::GgufType::FLOAT32:
      case th::GgufType::FLOAT64: g_sink = g_sink + (std::get<double>(v.v) == 0); break;
      default: g_sink = g_sink + static_cast<uint64_t>(std::get<int64_t>(v.v)); break;
    }
  }
  for (const th::GgufTensor& t : g->tensors()) {
    touch(t.name);
    if (g->tensor(t.name) != &t) die("tensor() does not return tensor", t.name);
    if (t.nbytes == 0) die("tensor with no data", t.name);
    if (t.data < data || t.data + t.nbytes > data + size) die("tensor data outside the input", t.name);
    if ((t.data - data) % g->alignment() != 0) die("misaligned tensor data", t.name);
    g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1] + static_cast<uint64_t>(t.n_rows());
  }
  round_trip(*g);
  return 0;
}
