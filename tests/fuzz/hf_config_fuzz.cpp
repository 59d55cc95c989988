// libFuzzer target for a Hugging Face folder's JSON: config.json (parse_hf_config) and, from
// the same bytes, tokenizer.json + tokenizer_config.json (hf_tokenizer_metadata). Every input
// is a value or a one-line error, never a crash, hang or huge allocation.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "format/hf_config.h"
#include "format/hf_tokenizer.h"

namespace {

void check_one_line(const std::string& m) {
  if (m.find('\n') == std::string::npos) return;
  std::fprintf(stderr, "hf_config_fuzz: a multi-line error: %s\n", m.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = th::parse_hf_config(text, "config.json");
  if (!c.ok()) check_one_line(c.message());
  // The first half as tokenizer.json, the rest as tokenizer_config.json.
  th::HfTokenizerInput in{text.substr(0, size / 2), "tokenizer.json", text.substr(size / 2), "tokenizer_config.json"};
  in.n_vocab = c.ok() ? std::min<int64_t>(c->n_vocab, 1 << 16) : 0;
  auto t = th::hf_tokenizer_metadata(in);
  if (!t.ok()) check_one_line(t.message());
  return 0;
}
