// The regex pre-tokenizers of byte-level BPE vocabularies, chosen by
// tokenizer.ggml.pre as llama.cpp's llm_tokenizer_bpe does, run with PCRE2.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace th {

/// What llama.cpp ties to a pre-tokenizer name besides its regexes.
struct PreTokenizerTraits {
  bool ignore_merges = false;  // a word that is a whole token is taken as is
  bool add_bos = false;        // default for tokenizer.ggml.add_bos_token
  bool no_bos = false;         // the vocab has no BOS token (chatglm)
};

/// @brief The traits of `pre`, or nullptr for a name llama.cpp does not know
/// (or that this port leaves out).
const PreTokenizerTraits* find_pre_tokenizer_traits(std::string_view pre);

/// Words in one buffer: word i is text.substr(spans[i].first, spans[i].second).
struct PreTokenized {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  void clear() {
    text.clear();
    spans.clear();
  }
};

class PreTokenizer {
 public:
  /// @brief The pre-tokenizer named `pre` ("default" for an empty name).
  static Result<PreTokenizer> create(std::string_view pre);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  /// @brief Appends the words of `text` to `out`, each byte-level encoded
  /// (GPT-2's bytes_to_unicode), as llama.cpp's unicode_regex_split: the
  /// regexes run in turn, each splitting every piece the previous one left
  /// (a match cannot look past its piece), and the text between matches is
  /// kept as pieces too. Invalid UTF-8 becomes U+FFFD first.
  void split(std::string_view text, PreTokenized* out) const;

  const PreTokenizerTraits& traits() const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace th
