#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <set>

namespace th::jinja {

namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<NodePtr> run() {
    std::vector<NodePtr> body;
    while (peek().type != Tok::Eof) add(body, parse_any());
    return body;
  }

 private:
  // --- helpers ---------------------------------------------------------------

  const Token& peek(size_t ahead = 0) const { return t_[std::min(cur_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& tok = t_[cur_];
    if (cur_ + 1 < t_.size()) ++cur_;
    return tok;
  }
  bool is(Tok type) const { return peek().type == type; }
  bool is_ident(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Tok::Ident && peek(ahead).value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (peek().type != Tok::OpenStmt || peek(1).type != Tok::Ident) return false;
    for (const char* n : names)
      if (peek(1).value == n) return true;
    return false;
  }
  [[noreturn]] void error(const std::string& msg, uint32_t pos) const { fail(msg, pos); }
  [[noreturn]] void unexpected(const Token& tok, const std::string& wanted) const {
    if (tok.type == Tok::Eof) unclosed(tok.pos);
    std::string got = tok_name(tok.type);
    if (tok.type == Tok::Ident || tok.type == Tok::Additive || tok.type == Tok::Multiplicative ||
        tok.type == Tok::Comparison || tok.type == Tok::Unary)
      got = "'" + tok.value + "'";
    error("expected " + wanted + ", got " + got, tok.pos);
  }
  [[noreturn]] void unclosed(uint32_t pos) const {
    if (!open_.empty())
      error("unexpected end of template: '{% " + open_.back().first + " %}' is not closed", open_.back().second);
    error("unexpected end of template", pos);
  }
  const Token& expect(Tok type, const std::string& what) {
    if (!is(type)) unexpected(peek(), what);
    return next();
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) unexpected(peek(), std::string("'") + name + "'");
    next();
  }
  void expect_end_tag(const char* name) {
    expect(Tok::OpenStmt, std::string("'{% ") + name + " %}'");
    expect_ident(name);
    expect(Tok::CloseStmt, "'%}'");
  }
  static void add(std::vector<NodePtr>& to, NodePtr n) {
    if (n) to.push_back(std::move(n));
  }

  NodePtr node(NodeKind kind, uint32_t pos) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = pos;
    return n;
  }
  // An expression node over `kids`: its depth is checked here, because
  // left-associative chains (a + b + c ...) grow deep without recursing.
  NodePtr expr(NodeKind kind, uint32_t pos, std::vector<NodePtr> kids, std::string name = {}) {
    auto n = node(kind, pos);
    int d = 0;
    for (const NodePtr& k : kids)
      if (k) d = std::max<int>(d, k->depth);
    if (d + 1 > kMaxExpressionDepth) error("expression nested too deeply", pos);
    n->depth = static_cast<uint16_t>(d + 1);
    n->kids = std::move(kids);
    n->name = std::move(name);
    return n;
  }
  static std::vector<NodePtr> list(NodePtr a, NodePtr b = nullptr, NodePtr c = nullptr) {
    std::vector<NodePtr> v;
    v.push_back(std::move(a));
    if (b) v.push_back(std::move(b));
    if (c) v.push_back(std::move(c));
    return v;
  }

  // Bounds the parser's own recursion (parentheses, `not not`, nested blocks).
  struct Guard {
    Guard(Parser& p, int& counter, int limit, uint32_t pos) : c(counter) {
      if (++c > limit) p.error(&counter == &p.block_depth_ ? "blocks nested too deeply" : "expression nested too deeply", pos);
    }
    ~Guard() { --c; }
    int& c;
  };

  // --- statements ------------------------------------------------------------

  NodePtr parse_any() {
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::Comment: next(); return nullptr;
      case Tok::Text: {
        auto n = node(NodeKind::Text, tok.pos);
        n->name = next().value;
        return n;
      }
      case Tok::OpenStmt: return parse_statement();
      case Tok::OpenExpr: {
        next();
        auto n = node(NodeKind::Output, tok.pos);
        n->kids.push_back(parse_expression());
        expect(Tok::CloseExpr, "'}}'");
        return n;
      }
      case Tok::Eof: unclosed(tok.pos);
      default: unexpected(tok, "text, '{{' or '{%'");
    }
  }

  void parse_body_until(std::vector<NodePtr>& body, std::initializer_list<const char*> ends) {
    while (!is_statement(ends)) add(body, parse_any());
  }

  NodePtr parse_statement() {
    const uint32_t pos = next().pos;  // {%
    Guard g(*this, block_depth_, kMaxBlockDepth, pos);
    if (!is(Tok::Ident)) unexpected(peek(), "a statement name");
    const std::string name = next().value;
    if (name == "set") return parse_set(pos);
    if (name == "if") {
      open_.emplace_back("if", pos);
      auto n = parse_if(pos);
      expect_end_tag("endif");
      open_.pop_back();
      return n;
    }
    if (name == "for") {
      open_.emplace_back("for", pos);
      auto n = parse_for(pos);
      expect_end_tag("endfor");
      open_.pop_back();
      return n;
    }
    if (name == "macro") {
      open_.emplace_back("macro", pos);
      auto n = parse_macro(pos);
      expect_end_tag("endmacro");
      open_.pop_back();
      return n;
    }
    if (name == "call") {
      open_.emplace_back("call", pos);
      auto n = node(NodeKind::CallBlock, pos);
      if (is(Tok::LParen)) n->params = parse_args(true);
      const uint32_t callee_pos = peek().pos;
      NodePtr callee = parse_primary();
      if (callee->kind != NodeKind::Ident) error("expected a macro name after 'call'", callee_pos);
      std::vector<NodePtr> call_kids;
      call_kids.push_back(std::move(callee));
      for (NodePtr& a : parse_args(false)) call_kids.push_back(std::move(a));
      n->kids.push_back(expr(NodeKind::Call, callee_pos, std::move(call_kids)));
      expect(Tok::CloseStmt, "'%}'");
      parse_body_until(n->body, {"endcall"});
      expect_end_tag("endcall");
      mark_special_args(*n);
      open_.pop_back();
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStmt, "'%}'");
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, pos);
    }
    if (name == "filter") {
      open_.emplace_back("filter", pos);
      auto n = node(NodeKind::FilterBlock, pos);
      if (!is(Tok::Ident)) unexpected(peek(), "a filter name");
      n->name = next().value;
      if (is(Tok::LParen)) {
        n->flag = true;
        n->kids = parse_args(false);
      }
      expect(Tok::CloseStmt, "'%}'");
      parse_body_until(n->body, {"endfilter"});
      expect_end_tag("endfilter");
      open_.pop_back();
      return n;
    }
    error("unknown statement '{% " + name + " %}'", pos);
  }

  NodePtr parse_set(uint32_t pos) {
    auto n = node(NodeKind::Set, pos);
    n->kids.push_back(parse_expression_sequence(false));
    if (is(Tok::Equals)) {
      next();
      n->kids.push_back(parse_expression_sequence(false));
    } else {
      expect(Tok::CloseStmt, "'=' or '%}'");
      open_.emplace_back("set", pos);
      parse_body_until(n->body, {"endset"});
      open_.pop_back();
      expect(Tok::OpenStmt, "'{% endset %}'");
      expect_ident("endset");
    }
    expect(Tok::CloseStmt, "'%}'");
    return n;
  }

  NodePtr parse_if(uint32_t pos) {
    auto n = node(NodeKind::If, pos);
    n->kids.push_back(parse_expression());
    expect(Tok::CloseStmt, "'%}'");
    parse_body_until(n->body, {"elif", "else", "endif"});
    if (is_statement({"elif"})) {
      const uint32_t elif_pos = next().pos;
      next();
      Guard g(*this, block_depth_, kMaxBlockDepth, elif_pos);
      n->alt.push_back(parse_if(elif_pos));
    } else if (is_statement({"else"})) {
      next();
      next();
      expect(Tok::CloseStmt, "'%}'");
      parse_body_until(n->alt, {"endif"});
    }
    return n;
  }

  NodePtr parse_for(uint32_t pos) {
    auto n = node(NodeKind::For, pos);
    const uint32_t target_pos = peek().pos;
    NodePtr target = parse_expression_sequence(true);
    if (target->kind != NodeKind::Ident && target->kind != NodeKind::TupleLit)
      error("expected a loop variable or a tuple of them after 'for'", target_pos);
    n->kids.push_back(std::move(target));
    expect_ident("in");
    n->kids.push_back(parse_expression());
    expect(Tok::CloseStmt, "'%}'");
    parse_body_until(n->body, {"endfor", "else"});
    if (is_statement({"else"})) {
      next();
      next();
      expect(Tok::CloseStmt, "'%}'");
      parse_body_until(n->alt, {"endfor"});
    }
    return n;
  }

  NodePtr parse_macro(uint32_t pos) {
    auto n = node(NodeKind::Macro, pos);
    const uint32_t name_pos = peek().pos;
    NodePtr name = parse_primary();
    if (name->kind != NodeKind::Ident) error("expected a macro name", name_pos);
    n->name = name->name;
    n->params = parse_args(true);
    expect(Tok::CloseStmt, "'%}'");
    parse_body_until(n->body, {"endmacro"});
    mark_special_args(*n);
    return n;
  }

  // Whether a macro body reads `kwargs` / `varargs` decides whether extra
  // arguments are collected into them or refused.
  static void scan_special(const Node& n, Node& into) {
    if (n.kind == NodeKind::Ident) {
      if (n.name == "kwargs") into.uses_kwargs = true;
      if (n.name == "varargs") into.uses_varargs = true;
    }
    if (n.kind == NodeKind::Macro) return;  // a nested macro has its own
    for (const auto* v : {&n.kids, &n.body, &n.alt, &n.params})
      for (const NodePtr& k : *v)
        if (k) scan_special(*k, into);
  }
  static void mark_special_args(Node& n) {
    for (const NodePtr& k : n.body) scan_special(*k, n);
  }

  // --- expressions -----------------------------------------------------------

  NodePtr parse_expression_sequence(bool primary) {
    const uint32_t pos = peek().pos;
    std::vector<NodePtr> items;
    items.push_back(primary ? parse_primary() : parse_expression());
    if (!is(Tok::Comma)) return std::move(items[0]);
    while (true) {
      next();  // ,
      items.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::Comma)) break;
    }
    return expr(NodeKind::TupleLit, pos, std::move(items));
  }

  NodePtr parse_expression() {
    Guard g(*this, expr_depth_, kMaxExpressionDepth, peek().pos);
    return parse_if_expression();
  }

  NodePtr parse_if_expression() {
    NodePtr a = parse_or();
    if (!is_ident("if")) return a;
    const uint32_t pos = next().pos;
    NodePtr test = parse_or();
    if (is_ident("else")) {
      next();
      Guard g(*this, expr_depth_, kMaxExpressionDepth, pos);
      NodePtr f = parse_if_expression();
      return expr(NodeKind::Ternary, pos, list(std::move(test), std::move(a), std::move(f)));
    }
    return expr(NodeKind::Select, pos, list(std::move(a), std::move(test)));
  }

  NodePtr parse_or() {
    NodePtr left = parse_and();
    while (is_ident("or")) {
      const uint32_t pos = next().pos;
      left = expr(NodeKind::Binary, pos, list(std::move(left), parse_and()), "or");
    }
    return left;
  }

  NodePtr parse_and() {
    NodePtr left = parse_not();
    while (is_ident("and")) {
      const uint32_t pos = next().pos;
      left = expr(NodeKind::Binary, pos, list(std::move(left), parse_not()), "and");
    }
    return left;
  }

  NodePtr parse_not() {
    NodePtr right;
    while (is_ident("not")) {
      const uint32_t pos = next().pos;
      Guard g(*this, expr_depth_, kMaxExpressionDepth, pos);
      right = expr(NodeKind::Unary, pos, list(parse_not()), "not");
    }
    return right ? std::move(right) : parse_comparison();
  }

  NodePtr parse_comparison() {
    NodePtr left = parse_additive();
    while (true) {
      std::string op;
      const uint32_t pos = peek().pos;
      if (is_ident("not") && is_ident("in", 1)) {
        next();
        next();
        op = "not in";
      } else if (is_ident("in")) {
        next();
        op = "in";
      } else if (is(Tok::Comparison)) {
        op = next().value;
      } else {
        break;
      }
      left = expr(NodeKind::Binary, pos, list(std::move(left), parse_additive()), op);
    }
    return left;
  }

  NodePtr parse_additive() {
    NodePtr left = parse_multiplicative();
    while (is(Tok::Additive)) {
      const Token& op = next();
      left = expr(NodeKind::Binary, op.pos, list(std::move(left), parse_multiplicative()), op.value);
    }
    return left;
  }

  NodePtr parse_multiplicative() {
    NodePtr left = parse_power();
    while (is(Tok::Multiplicative)) {
      const Token& op = next();
      left = expr(NodeKind::Binary, op.pos, list(std::move(left), parse_power()), op.value);
    }
    return left;
  }

  NodePtr parse_power() {
    NodePtr left = parse_test();
    while (is(Tok::Power)) {
      const Token& op = next();
      left = expr(NodeKind::Binary, op.pos, list(std::move(left), parse_test()), "**");
    }
    return left;
  }

  NodePtr parse_test() {
    NodePtr operand = parse_filter();
    while (is_ident("is")) {
      const uint32_t pos = next().pos;
      const bool negate = is_ident("not");
      if (negate) next();
      if (!is(Tok::Ident)) unexpected(peek(), "a test name after 'is'");
      std::vector<NodePtr> kids;
      kids.push_back(std::move(operand));
      std::string name = next().value;
      // Tests with an argument, as Jinja2 has them: `is divisibleby(3)`,
      // `is sameas false`, `is in [..]` (@huggingface/jinja has none).
      static const std::set<std::string> kKeywords = {"and", "or", "else", "if", "in", "is", "not"};
      if (is(Tok::LParen)) {
        for (NodePtr& a : parse_args(false)) kids.push_back(std::move(a));
      } else if (is(Tok::Number) || is(Tok::String) || is(Tok::LBracket) || is(Tok::LBrace) ||
                 (is(Tok::Ident) && !kKeywords.count(peek().value))) {
        kids.push_back(parse_call_member());
      }
      operand = expr(NodeKind::Test, pos, std::move(kids), std::move(name));
      operand->flag = negate;
    }
    return operand;
  }

  NodePtr parse_filter() {
    NodePtr operand = parse_unary();
    while (is(Tok::Pipe)) {
      const uint32_t pos = next().pos;
      if (!is(Tok::Ident)) unexpected(peek(), "a filter name after '|'");
      std::string name = next().value;
      std::vector<NodePtr> kids;
      kids.push_back(std::move(operand));
      bool parens = false;
      if (is(Tok::LParen)) {
        parens = true;
        for (NodePtr& a : parse_args(false)) kids.push_back(std::move(a));
      }
      operand = expr(NodeKind::Filter, pos, std::move(kids), std::move(name));
      operand->flag = parens;
    }
    return operand;
  }

  NodePtr parse_unary() {
    const Token& tok = peek();
    if ((tok.type == Tok::Unary || tok.type == Tok::Additive) && (tok.value == "-" || tok.value == "+")) {
      next();
      Guard g(*this, expr_depth_, kMaxExpressionDepth, tok.pos);
      return expr(NodeKind::Unary, tok.pos, list(parse_unary()), tok.value);
    }
    return parse_call_member();
  }

  NodePtr parse_call_member() {
    NodePtr member = parse_member(parse_primary());
    if (is(Tok::LParen)) return parse_call(std::move(member));
    return member;
  }

  NodePtr parse_call(NodePtr callee) {
    while (true) {
      const uint32_t pos = callee->pos;
      std::vector<NodePtr> kids;
      kids.push_back(std::move(callee));
      for (NodePtr& a : parse_args(false)) kids.push_back(std::move(a));
      callee = parse_member(expr(NodeKind::Call, pos, std::move(kids)));
      if (!is(Tok::LParen)) return callee;
    }
  }

  // An argument list (calls) or a parameter list (macro definitions).
  std::vector<NodePtr> parse_args(bool parameters) {
    expect(Tok::LParen, "'('");
    std::vector<NodePtr> args;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::RParen)) {
      const uint32_t pos = peek().pos;
      const bool kw_spread = is(Tok::Power);
      const bool spread = is(Tok::Multiplicative) && peek().value == "*";
      if (parameters && (kw_spread || spread)) error("argument unpacking is not allowed in a parameter list", pos);
      if (kw_spread) {
        next();
        args.push_back(expr(NodeKind::KwSpread, pos, list(parse_expression())));
        if (is(Tok::Comma)) next();
        if (!is(Tok::RParen)) error("'**' must be the last argument", peek().pos);
        break;
      }
      NodePtr arg;
      if (spread) {
        if (saw_spread) error("only one '*' argument is allowed", pos);
        saw_spread = true;
        next();
        arg = expr(NodeKind::Spread, pos, list(parse_expression()));
      } else {
        arg = parse_expression();
        if (is(Tok::Equals)) {
          next();
          if (arg->kind != NodeKind::Ident)
            error(parameters ? "expected a parameter name before '='" : "expected an argument name before '='", pos);
          std::string key = arg->name;
          arg = expr(NodeKind::KwArg, pos, list(parse_expression()), std::move(key));
        }
        if (parameters) {
          if (arg->kind != NodeKind::Ident && arg->kind != NodeKind::KwArg) error("expected a parameter name", pos);
          if (!names.insert(arg->name).second) error("duplicate parameter '" + arg->name + "'", pos);
        }
        if (arg->kind == NodeKind::KwArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          error(parameters ? "a parameter without a default follows one with a default"
                           : "a positional argument follows a keyword argument",
                pos);
        } else if (saw_spread) {
          error("a positional argument follows '*' unpacking", pos);
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) next();
    }
    next();  // )
    return args;
  }

  // What is between [ and ]: an index, or a slice start:stop:step.
  NodePtr parse_subscript(uint32_t pos) {
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!is(Tok::RBracket)) {
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        next();
        is_slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          next();
          is_slice = true;
        }
      }
    }
    if (parts.empty()) error("expected an index or a slice between '[' and ']'", pos);
    if (!is_slice) {
      if (!parts[0]) error("expected an index", pos);
      return std::move(parts[0]);
    }
    if (parts.size() > 3) error("a slice has at most three parts", pos);
    parts.resize(3);
    auto n = node(NodeKind::Slice, pos);
    int d = 0;
    for (const NodePtr& p : parts)
      if (p) d = std::max<int>(d, p->depth);
    n->depth = static_cast<uint16_t>(d + 1);
    n->kids = std::move(parts);
    return n;
  }

  NodePtr parse_member(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::LBracket)) {
      const Token& op = next();
      NodePtr prop;
      if (op.type == Tok::LBracket) {
        prop = parse_subscript(op.pos);
        expect(Tok::RBracket, "']'");
      } else {
        const uint32_t pos = peek().pos;
        prop = parse_primary();
        if (prop->kind == NodeKind::Ident) {
          auto lit = node(NodeKind::Literal, pos);
          lit->value = Value::string(prop->name);
          prop = std::move(lit);
        } else if (!(prop->kind == NodeKind::Literal && prop->value.kind == Kind::Int)) {
          error("expected a name or an integer after '.'", pos);
        }
      }
      object = expr(NodeKind::Member, op.pos, list(std::move(object), std::move(prop)));
    }
    return object;
  }

  NodePtr parse_primary() {
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::Number: {
        next();
        auto n = node(NodeKind::Literal, tok.pos);
        const double v = std::strtod(tok.value.c_str(), nullptr);
        n->value = tok.value.find('.') != std::string::npos ? Value::floating(v) : Value::integer(v);
        return n;
      }
      case Tok::String: {
        next();
        std::string s = tok.value;
        while (is(Tok::String)) s += next().value;  // 'a' 'b' is 'ab'
        auto n = node(NodeKind::Literal, tok.pos);
        n->value = Value::string(std::move(s));
        return n;
      }
      case Tok::Ident: {
        next();
        auto n = node(NodeKind::Ident, tok.pos);
        n->name = tok.value;
        return n;
      }
      case Tok::LParen: {
        next();
        Guard g(*this, expr_depth_, kMaxExpressionDepth, tok.pos);
        NodePtr e = parse_expression_sequence(false);
        expect(Tok::RParen, "')'");
        return e;
      }
      case Tok::LBracket: {
        next();
        Guard g(*this, expr_depth_, kMaxExpressionDepth, tok.pos);
        std::vector<NodePtr> items;
        while (!is(Tok::RBracket)) {
          items.push_back(parse_expression());
          if (is(Tok::Comma)) next();
        }
        next();
        return expr(NodeKind::ArrayLit, tok.pos, std::move(items));
      }
      case Tok::LBrace: {
        next();
        Guard g(*this, expr_depth_, kMaxExpressionDepth, tok.pos);
        std::vector<NodePtr> kv;
        while (!is(Tok::RBrace)) {
          kv.push_back(parse_expression());
          expect(Tok::Colon, "':' between a key and its value");
          kv.push_back(parse_expression());
          if (is(Tok::Comma)) next();
        }
        next();
        return expr(NodeKind::ObjectLit, tok.pos, std::move(kv));
      }
      default: unexpected(tok, "an expression");
    }
  }

  const std::vector<Token>& t_;
  size_t cur_ = 0;
  int expr_depth_ = 0;
  int block_depth_ = 0;
  std::vector<std::pair<std::string, uint32_t>> open_;  // blocks being parsed, for "not closed"
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source) {
  auto program = std::make_unique<Program>();
  program->source = preprocess(source);
  const std::vector<Token> tokens = tokenize(program->source);
  program->body = Parser(tokens).run();
  return program;
}

}  // namespace th::jinja
