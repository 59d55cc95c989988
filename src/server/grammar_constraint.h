// Structured output for one choice: the engine's TokenConstraint over a
// compiled grammar, with the vocabulary as bytes and as a token trie (built
// once per tokenizer, shared by every constrained request).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/token_constraint.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"
#include "server/api_request.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

/// @brief The vocabulary as the grammar sees it: each token's bytes (control tokens none),
/// their trie, and the tokens that end generation (allowed once the output is complete).
struct GrammarVocab {
  std::vector<std::string> pieces;
  grammar::TokenTrie trie;
  std::vector<int32_t> end_of_generation;  // sorted
};

std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tok);

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, std::shared_ptr<const GrammarVocab> vocab)
      : matcher_(std::move(g)), vocab_(std::move(vocab)) {}
  bool mask(std::span<float> logits) override;
  bool accept(int32_t token) override;

 private:
  grammar::Matcher matcher_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::vector<uint64_t> allowed_;  // scratch: one bit per token
};

/// @brief Sets g.constraint to a choice's own matcher over q's grammar (none without one),
/// already past what a continuation generated; `vocab` is built from `tok` on first use.
Status constrain(const ApiRequest& q, std::shared_ptr<const GrammarVocab>& vocab, const Tokenizer& tok, GenerateRequest& g);

}  // namespace th::server
