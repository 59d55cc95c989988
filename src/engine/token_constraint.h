// A request's restriction on which token may come next (structured output: a
// grammar, a JSON schema). The engine masks the logits with it before
// sampling and tells it every token chosen; what the tokens mean stays with
// the implementation (server/'s grammar constraint), so the engine needs no
// vocabulary. The mask depends on the tokens so far alone, so a constrained
// request gives the same tokens alone or in any batch.
#pragma once

#include <cstdint>
#include <span>

namespace th {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  /// @brief Sets the logit of every token that may not come next to -inf (end-of-generation
  /// tokens included, unless the output is complete). False when no token may come next.
  virtual bool mask(std::span<float> logits) = 0;
  /// @brief The token chosen (never an end-of-generation token); false if it was not allowed.
  virtual bool accept(int32_t token) = 0;
};

}  // namespace th
