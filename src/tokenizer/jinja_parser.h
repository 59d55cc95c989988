// The chat-template parser: tokens -> a tree of statements and expressions,
// with @huggingface/jinja's grammar and operator precedence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_value.h"

namespace th::jinja {

enum class NodeKind : uint8_t {
  // statements
  Text, Output, If, For, Set, Macro, CallBlock, FilterBlock, Break, Continue,
  // expressions
  Literal, Ident, Member, Slice, Call, Binary, Unary, Filter, Test, Ternary, Select,
  ArrayLit, TupleLit, ObjectLit, KwArg, Spread, KwSpread,
};

using NodePtr = std::unique_ptr<struct Node>;

/// @brief One node. What `kids`, `body`, `alt` and `params` hold depends on
/// the kind:
///   Text: name = the text.             Output: kids[0] = the expression.
///   If: kids[0] = test; body; alt (an elif is an If alone in alt).
///   For: kids[0] = target (Ident/TupleLit), kids[1] = iterable (maybe Select); body; alt = else.
///   Set: kids[0] = target; kids[1] = value, or none and `body` is the block.
///   Macro: name; params (Ident or KwArg with the default); body.
///   CallBlock: kids[0] = the Call; params = caller's parameters; body.
///   FilterBlock: name = filter; kids = its arguments; flag = has parentheses; body.
///   Literal: value.                    Ident: name.
///   Member: kids[0] = object, kids[1] = key expression or Slice.
///   Slice: kids[0..2] = start, stop, step (null when absent).
///   Call: kids[0] = callee, kids[1..] = arguments (KwArg, Spread, KwSpread or plain).
///   Binary/Unary: name = operator; kids = operands.
///   Filter: kids[0] = operand, kids[1..] = arguments; name; flag = has parentheses.
///   Test: kids[0] = operand, kids[1..] = arguments; name; flag = negated.
///   Ternary: kids = condition, if-true, if-false.  Select: kids = value, condition.
///   ArrayLit/TupleLit: kids = items.   ObjectLit: kids = key, value, key, value, ...
///   KwArg: name, kids[0] = value.      Spread/KwSpread: kids[0].
struct Node {
  NodeKind kind;
  uint32_t pos = 0;    // offset into the preprocessed source
  uint16_t depth = 1;  // height of the expression tree under this node
  bool flag = false;
  bool uses_kwargs = false, uses_varargs = false;  // Macro/CallBlock bodies
  std::string name;
  Value value;
  std::vector<NodePtr> kids, body, alt, params;
};

/// @brief A parsed template: the statements, and the source for positions.
struct Program {
  Source source;
  std::vector<NodePtr> body;
};

/// Nesting limits for the parser: how deep an expression or a block
/// structure may go. Beyond them a hostile template would exhaust the stack.
inline constexpr int kMaxExpressionDepth = 160;
inline constexpr int kMaxBlockDepth = 100;

/// Parses a template. Throws JinjaError (with a position).
std::unique_ptr<Program> parse_template(std::string_view source);

}  // namespace th::jinja
