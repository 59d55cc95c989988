// libFuzzer target for the safetensors parser. libFuzzer hands us an exactly-sized heap
// copy of each input, so a tensor extent past the image is caught by ASan when we touch
// every byte of every tensor the parser accepts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "format/safetensors.h"

namespace {

volatile uint64_t g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = th::parse_safetensors(data, size, "fuzz.safetensors");
  if (!r.ok()) {
    if (r.message().find('\n') != std::string::npos) {
      std::fprintf(stderr, "safetensors_header_fuzz: a multi-line error: %s\n", r.message().c_str());
      std::abort();
    }
    return 0;
  }
  for (const th::SafetensorsTensor& t : *r) {
    if (t.data < data || t.data + t.nbytes > data + size) {
      std::fprintf(stderr, "safetensors_header_fuzz: tensor '%s' outside the image\n", t.name.c_str());
      std::abort();
    }
    for (size_t i = 0; i < t.nbytes; ++i) g_sink = g_sink + t.data[i];
  }
  return 0;
}
