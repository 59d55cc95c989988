// The chat-template interpreter: renders a parsed Program against a context,
// within limits on work, memory, output and nesting, since templates come
// from model files and may be hostile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_value.h"

namespace th::jinja {

/// @brief What one render may use. A render that would exceed a limit stops
/// with an error naming it.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text (and any one string)
  size_t max_alloc_bytes = size_t{256} << 20;  // strings and lists made, in all
  uint64_t max_steps = 5'000'000;              // expressions evaluated and loop iterations
  int max_depth = 400;                         // nested evaluation (macro recursion included)
};

/// @brief A variable scope. Scopes are shared (a call block's `caller`
/// keeps the scope it was defined in).
struct Env {
  std::shared_ptr<Env> parent;
  std::map<std::string, Value, std::less<>> vars;
  const Value* lookup(std::string_view name) const;
  void set(const std::string& name, Value v) { vars[name] = std::move(v); }
};
using EnvPtr = std::shared_ptr<Env>;

class Interpreter {
 public:
  Interpreter(const Program& program, const RenderLimits& limits);
  ~Interpreter();

  /// Renders the program with `context` as the template's variables. Throws JinjaError.
  std::string render(const std::vector<std::pair<std::string, Value>>& context);

  // For builtins and filters (jinja_builtins.cpp, jinja_filters.cpp).
  void charge(size_t bytes);
  void step();  // one unit of work against max_steps
  Value make_string(std::string s);
  Value make_array(std::vector<Value> items);
  Value call_function(const Value& fn, CallArgs& args, const EnvPtr& env);
  Value apply_filter(const Value& operand, const std::string& name, bool parens, CallArgs& args, const EnvPtr& env);
  bool run_test(const std::string& name, const Value& operand, const std::vector<Value>& args);
  std::shared_ptr<ObjectData> new_namespace();

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard;

  Flow exec_block(const std::vector<NodePtr>& body, const EnvPtr& env, std::string& out);
  Flow exec(const Node& n, const EnvPtr& env, std::string& out);
  Flow exec_for(const Node& n, const EnvPtr& env, std::string& out);
  void exec_set(const Node& n, const EnvPtr& env);
  Value exec_call_block(const Node& n, const EnvPtr& env);
  void bind_target(const Node& target, const Value& v, Env& env);
  void bind_macro_args(const Node& macro, const std::string& display, CallArgs& call, const EnvPtr& scope);
  std::string render_body(const std::vector<NodePtr>& body, const EnvPtr& env, const char* what);

  Value eval(const Node& n, const EnvPtr& env);
  Value eval_member(const Node& n, const EnvPtr& env);
  Value eval_slice(const Value& object, const Node& slice, const EnvPtr& env);
  Value eval_binary(const Node& n, const EnvPtr& env);
  Value eval_unary(const Node& n, const EnvPtr& env);
  Value eval_call(const Node& n, const EnvPtr& env);
  Value eval_filter(const Node& n, size_t first_arg, const Value& operand, const EnvPtr& env);
  Value eval_test(const Node& n, const EnvPtr& env);
  CallArgs eval_args(const std::vector<NodePtr>& nodes, size_t first, const EnvPtr& env);
  void append(std::string& out, std::string_view s);

  const Program& program_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
  size_t allocated_ = 0;
  int depth_ = 0;
  // Namespaces and captured scopes can form reference cycles (ns.self = ns);
  // they are kept here and emptied when the render ends, which frees them.
  std::vector<std::shared_ptr<ObjectData>> namespaces_;
  std::vector<EnvPtr> captured_;
};

}  // namespace th::jinja
