// libFuzzer target for the GGUF reader. libFuzzer hands us an exactly-sized
// heap copy of each input, so any pointer the reader gives out beyond the
// image is caught by ASan when we touch it here.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "model/gguf.h"

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
  return 0;
}
