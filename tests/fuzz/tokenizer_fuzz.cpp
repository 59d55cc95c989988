// libFuzzer target: arbitrary bytes through encode / decode / Detokenizer of
// a byte-level BPE vocab (gpt-2) and an SPM vocab (llama-spm), with special
// tokens parsed and not. Besides memory errors it checks that ids stay in
// range, that the Detokenizer only ever emits valid UTF-8, and that decoding
// gives the text back where the decoding convention says it must.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

std::string shared_dir() {
  const char* env = std::getenv("TOKENHIVE_SHARED");
  return env && *env ? env : TH_SHARED_DIR;
}

th::Tokenizer load(const char* name) {
  const std::string path = shared_dir() + "/testdata/tokenizer/llamacpp/ggml-vocab-" + name + ".gguf";
  th::Result<th::GgufFile> f = th::GgufFile::open(path);
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.message().c_str());
    std::abort();
  }
  th::Result<th::Tokenizer> t = th::Tokenizer::from_gguf(*f);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.message().c_str());
    std::abort();
  }
  return std::move(t).value();
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
    std::abort();
  }
}

void exercise(const th::Tokenizer& tok, std::string_view text, bool add_special, bool parse_special) {
  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) check(id >= 0 && id < tok.n_vocab(), "id out of range");

  th::Detokenizer d(tok);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = d.push(id);
    check(th::unicode::is_valid_utf8(chunk), "Detokenizer emitted invalid UTF-8");
    streamed += chunk;
  }
  const std::string tail = d.flush();
  check(th::unicode::is_valid_utf8(tail), "Detokenizer::flush emitted invalid UTF-8");
  streamed += tail;

  const std::string plain = tok.decode(ids);
  if (th::unicode::is_valid_utf8(plain)) check(streamed == plain, "stream differs from decode");

  if (tok.vocab().model == th::TokenizerModel::Spm) {
    // Valid UTF-8 without a literal U+2581 (which decodes as a space) comes
    // back once BOS has absorbed the dummy space. (Invalid UTF-8 need not: as
    // in llama.cpp, a bad lead byte can swallow the U+2581 of an escaped space.)
    if (add_special && !parse_special && th::unicode::is_valid_utf8(text) &&
        text.find("\xE2\x96\x81") == std::string_view::npos)
      check(plain == text, "SPM round trip");
  } else if (th::unicode::is_valid_utf8(text)) {
    check(tok.decode(ids, /*render_special=*/parse_special) == text, "BPE round trip");
  }
  // Pieces of arbitrary ids must not crash either.
  for (int32_t id : ids) (void)tok.token_to_piece(id + 1, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const th::Tokenizer gpt2 = load("gpt-2");
  static const th::Tokenizer spm = load("llama-spm");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool parse_special : {false, true}) {
    exercise(gpt2, text, parse_special, parse_special);
    exercise(spm, text, true, parse_special);
  }
  return 0;
}
