// Text <-> token ids: SentencePiece-style (SPM, byte fallback) and byte-level
// BPE with the pre-tokenizer GGUF names, behaving as llama.cpp's llama-vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace th {

class Tokenizer {
 public:
  /// @brief Builds a tokenizer; fails with a clear error on an inconsistent vocab
  /// (unknown model or pre-tokenizer, bad merges, ids out of range).
  static Result<Tokenizer> create(VocabData vocab);
  static Result<Tokenizer> from_gguf(const GgufFile& f);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// @brief Token ids of `text`. add_special adds BOS (and EOS) as the vocab says;
  /// parse_special turns the text of control/user-defined tokens into those tokens.
  /// SPM adds the leading space (add_dummy_prefix) when add_space_prefix is set.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  /// @brief The bytes a token stands for (byte tokens <0xNN> give their byte,
  /// SPM's U+2581 gives a space, BPE's byte-level characters give their bytes).
  /// Control tokens give "" unless render_special.
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  /// @brief Text of a whole sequence; drops the leading space of the first piece after BOS
  /// (SentencePiece convention) when the vocab adds a space prefix.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  const VocabData& vocab() const;
  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  /// @brief True for tokens that end generation (EOS, EOT and the like).
  bool is_eog(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// @brief The tokens that end generation for `tok`'s vocab: every end-of-generation token and
/// BOS (llama2.c's convention). The engine and Generator take these from their callers.
std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok);

/// @brief Turns a stream of token ids into text, never emitting half a UTF-8
/// character: bytes of an incomplete character wait for the next token, and
/// bytes that cannot become valid UTF-8 come out as U+FFFD. Like decode(), it
/// drops the leading space of the piece right after a pushed BOS; a stream that
/// does not start with BOS continues a text and keeps it.
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tok) : tok_(&tok) {}
  /// @brief Text that became complete with `id` (may be empty).
  std::string push(int32_t id);
  /// @brief Whatever is held back at the end of the stream (invalid bytes as U+FFFD).
  std::string flush();
  /// @brief Renders these control tokens' text rather than nothing (a tool-call marker
  /// such as <|python_tag|> or [TOOL_CALLS], which the output's parser reads).
  void render_control(std::vector<int32_t> ids) { rendered_ = std::move(ids); }

 private:
  const Tokenizer* tok_;
  std::vector<int32_t> rendered_;
  std::string pending_;
  int32_t prev_ = -1;
};

}  // namespace th
