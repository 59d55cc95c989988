#include "server/grammar_constraint.h"

#include <algorithm>
#include <limits>

namespace th::server {

namespace {
std::vector<std::string> pieces_of(const Tokenizer& tok) {
  std::vector<std::string> p;
  p.reserve(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) p.push_back(tok.token_to_piece(id));
  return p;
}
}  // namespace

std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tok) {
  std::vector<std::string> pieces = pieces_of(tok);
  grammar::TokenTrie trie(pieces);
  std::vector<int32_t> eog = end_of_generation_ids(tok);
  std::sort(eog.begin(), eog.end());
  return std::make_shared<const GrammarVocab>(GrammarVocab{std::move(pieces), std::move(trie), std::move(eog)});
}

bool GrammarConstraint::mask(std::span<float> logits) {
  matcher_.allowed_tokens(vocab_->trie, allowed_);
  if (matcher_.complete())
    for (int32_t id : vocab_->end_of_generation) allowed_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  bool any = false;
  const size_t n = std::min(logits.size(), vocab_->pieces.size());
  for (size_t i = 0; i < n; ++i) {
    const bool ok = (allowed_[i >> 6] >> (i & 63)) & 1;
    any = any || ok;
    if (!ok) logits[i] = -std::numeric_limits<float>::infinity();
  }
  // Rows past the tokenizer's vocabulary (a model padded beyond it) are never text.
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -std::numeric_limits<float>::infinity();
  return any;
}

bool GrammarConstraint::accept(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocab_->pieces.size()) return false;
  if (std::binary_search(vocab_->end_of_generation.begin(), vocab_->end_of_generation.end(), token))
    return matcher_.complete();  // only with ignore_eos: the output stays as it is
  const std::string& piece = vocab_->pieces[static_cast<size_t>(token)];
  return !piece.empty() && matcher_.accept(piece);
}

Status constrain(const ApiRequest& q, std::shared_ptr<const GrammarVocab>& vocab, const Tokenizer& tok, GenerateRequest& g) {
  if (!q.grammar) return ok_status();
  if (!vocab) vocab = make_grammar_vocab(tok);
  auto c = std::make_shared<GrammarConstraint>(q.grammar, vocab);
  if (q.continuation)
    for (int32_t t : q.continuation->token_ids)
      if (!c->accept(t)) return Status::errorf("request: continuation.token_ids do not follow ", q.grammar_param);
  g.constraint = std::move(c);
  return ok_status();
}

}  // namespace th::server
