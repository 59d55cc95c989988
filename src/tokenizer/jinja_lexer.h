// The chat-template lexer: whitespace control as transformers configures
// Jinja2 (trim_blocks and lstrip_blocks on, one trailing newline dropped),
// then tokens, exactly as @huggingface/jinja produces them (its quirks
// included, since the tests compare renderings byte for byte).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace th::jinja {

enum class Tok : uint8_t {
  Text, Number, String, Ident, Equals, LParen, RParen, OpenStmt, CloseStmt, OpenExpr, CloseExpr,
  LBracket, RBracket, LBrace, RBrace, Comma, Dot, Colon, Pipe, Additive, Multiplicative, Power,
  Comparison, Unary, Comment, Eof,
};
const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  uint32_t pos;  // offset into Source::text
};

/// @brief A template after whitespace preprocessing, with the offset in the
/// original text of every byte, so that errors point at what the author wrote.
struct Source {
  std::string original;
  std::string text;
  std::vector<uint32_t> origin;  // origin[i]: original offset of text[i]; one extra entry for the end
  /// 1-based line and column (in characters) in the original of text offset `pos`.
  std::pair<int, int> line_col(uint32_t pos) const;
};

/// The preprocessing @huggingface/jinja does before lexing: drop one trailing
/// newline; lstrip_blocks (spaces and tabs before a block tag at the start of
/// a line); trim_blocks (the newline right after a block or comment tag);
/// remove transformers' {% generation %} / {% endgeneration %} tags.
Source preprocess(std::string_view template_source);

/// Tokens of `src.text`, ending with an Eof token. Throws JinjaError.
std::vector<Token> tokenize(const Source& src);

}  // namespace th::jinja
