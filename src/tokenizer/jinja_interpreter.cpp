#include "tokenizer/jinja_interpreter.h"

#include <cmath>
#include <string>

#include "tokenizer/jinja_builtins.h"

namespace th::jinja {

const Value* Env::lookup(std::string_view name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) return &it->second;
  }
  return nullptr;
}

// --- the interpreter ---------------------------------------------------------

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& in) : in(in) {
    if (++in.depth_ > in.limits_.max_depth)
      fail("the template nests too deeply (limit " + std::to_string(in.limits_.max_depth) +
           "; a macro recursing without end?)");
  }
  ~DepthGuard() { --in.depth_; }
  Interpreter& in;
};

Interpreter::Interpreter(const Program& program, const RenderLimits& limits) : program_(program), limits_(limits) {}

Interpreter::~Interpreter() {
  // Break reference cycles through namespaces and captured scopes.
  for (auto& ns : namespaces_) {
    auto entries = std::move(ns->entries);
    ns->index.clear();
  }
  for (auto& env : captured_) {
    auto vars = std::move(env->vars);
    env->parent.reset();
  }
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail("the template did too much work (over " + std::to_string(limits_.max_steps) + " steps; an endless loop?)");
}

void Interpreter::charge(size_t bytes) {
  allocated_ += bytes;
  if (allocated_ > limits_.max_alloc_bytes || bytes > limits_.max_alloc_bytes)
    fail("the template used too much memory (over " + std::to_string(limits_.max_alloc_bytes >> 20) + " MiB)");
}

Value Interpreter::make_string(std::string s) {
  if (s.size() > limits_.max_output_bytes)
    fail("a string grew too long (over " + std::to_string(limits_.max_output_bytes >> 20) + " MiB)");
  charge(s.size());
  return Value::string(std::move(s));
}

Value Interpreter::make_array(std::vector<Value> items) {
  charge(items.size() * sizeof(Value));
  return Value::array(std::move(items));
}

std::shared_ptr<ObjectData> Interpreter::new_namespace() {
  charge(sizeof(ObjectData));
  auto ns = std::make_shared<ObjectData>();
  namespaces_.push_back(ns);
  return ns;
}

void Interpreter::append(std::string& out, std::string_view s) {
  if (out.size() + s.size() > limits_.max_output_bytes)
    fail("the output grew too long (over " + std::to_string(limits_.max_output_bytes >> 20) + " MiB)");
  charge(s.size());
  out += s;
}

std::string Interpreter::render(const std::vector<std::pair<std::string, Value>>& context) {
  auto globals = std::make_shared<Env>();
  globals->set("true", Value::boolean(true));
  globals->set("false", Value::boolean(false));
  globals->set("none", Value::null());
  globals->set("True", Value::boolean(true));
  globals->set("False", Value::boolean(false));
  globals->set("None", Value::null());
  add_global_functions(*globals);
  for (const auto& [k, v] : context) globals->set(k, v);
  std::string out;
  const Flow f = exec_block(program_.body, globals, out);
  if (f != Flow::Normal) fail(f == Flow::Break ? "'{% break %}' outside a loop" : "'{% continue %}' outside a loop");
  return out;
}

Interpreter::Flow Interpreter::exec_block(const std::vector<NodePtr>& body, const EnvPtr& env, std::string& out) {
  for (const NodePtr& n : body) {
    const Flow f = exec(*n, env, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::render_body(const std::vector<NodePtr>& body, const EnvPtr& env, const char* what) {
  std::string out;
  const Flow f = exec_block(body, env, out);
  if (f != Flow::Normal) fail(std::string(f == Flow::Break ? "'{% break %}'" : "'{% continue %}'") + " outside a loop in " + what);
  return out;
}

Interpreter::Flow Interpreter::exec(const Node& n, const EnvPtr& env, std::string& out) {
  step();
  DepthGuard guard(*this);
  try {
    switch (n.kind) {
      case NodeKind::Text: append(out, n.name); return Flow::Normal;
      case NodeKind::Output: {
        const Value v = eval(*n.kids[0], env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::If: return exec_block(eval(*n.kids[0], env).truthy() ? n.body : n.alt, env, out);
      case NodeKind::For: return exec_for(n, env, out);
      case NodeKind::Set: exec_set(n, env); return Flow::Normal;
      case NodeKind::Macro: {
        auto f = std::make_shared<FunctionData>();
        f->name = n.name;
        f->macro = &n;
        env->set(n.name, Value::function(std::move(f)));
        return Flow::Normal;
      }
      case NodeKind::CallBlock: {
        const Value v = exec_call_block(n, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::FilterBlock: {
        const Value body = make_string(render_body(n.body, env, "a filter block"));
        CallArgs args = eval_args(n.kids, 0, env);
        const Value v = apply_filter(body, n.name, n.flag, args, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::Break: return Flow::Break;
      case NodeKind::Continue: return Flow::Continue;
      default: {
        const Value v = eval(n, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
    }
  } catch (JinjaError& e) {
    if (e.pos == JinjaError::kNoPos) e.pos = n.pos;
    throw;
  }
}

void Interpreter::bind_target(const Node& target, const Value& v, Env& env) {
  if (target.kind == NodeKind::Ident) {
    env.set(target.name, v);
    return;
  }
  // A tuple of names: unpack a list.
  if (!v.is_array()) fail("cannot unpack " + a_kind(v) + " into " + std::to_string(target.kids.size()) + " names");
  if (v.items().size() != target.kids.size())
    fail(std::string("too ") + (target.kids.size() > v.items().size() ? "few" : "many") + " items to unpack (expected " +
         std::to_string(target.kids.size()) + ", got " + std::to_string(v.items().size()) + ")");
  for (size_t i = 0; i < target.kids.size(); ++i) {
    if (target.kids[i]->kind != NodeKind::Ident) fail("can only unpack into names", target.kids[i]->pos);
    env.set(target.kids[i]->name, v.items()[i]);
  }
}

Interpreter::Flow Interpreter::exec_for(const Node& n, const EnvPtr& env, std::string& out) {
  auto scope = std::make_shared<Env>();
  scope->parent = env;
  const Node& target = *n.kids[0];
  const Node& iter_node = *n.kids[1];
  const Node* test = nullptr;
  Value iterable;
  if (iter_node.kind == NodeKind::Select) {
    iterable = eval(*iter_node.kids[0], scope);
    test = iter_node.kids[1].get();
  } else {
    iterable = eval(iter_node, scope);
  }
  std::vector<Value> all;
  switch (iterable.kind) {
    case Kind::Array: all = iterable.items(); break;
    case Kind::Object:
      for (const auto& e : iterable.obj->entries) all.push_back(Value::string(e.first));
      break;
    case Kind::String:  // Jinja2 iterates the characters
      for (std::string_view ch : cp_split(iterable.s())) all.push_back(Value::string(std::string(ch)));
      break;
    case Kind::Undefined: break;  // Jinja2: an undefined value iterates as empty
    default: fail("cannot loop over " + a_kind(iterable), iter_node.pos);
  }
  charge(all.size() * sizeof(Value));
  std::vector<Value> items;
  if (test) {
    for (Value& v : all) {
      step();
      auto loop_scope = std::make_shared<Env>();
      loop_scope->parent = scope;
      bind_target(target, v, *loop_scope);
      if (eval(*test, loop_scope).truthy()) items.push_back(std::move(v));
    }
  } else {
    items = std::move(all);
  }
  bool no_iteration = true;
  const size_t count = items.size();
  for (size_t i = 0; i < count; ++i) {
    step();
    auto loop = std::make_shared<ObjectData>();
    const double len = static_cast<double>(count), idx = static_cast<double>(i);
    loop->entries.reserve(9);
    loop->add_new("index", Value::integer(idx + 1));
    loop->add_new("index0", Value::integer(idx));
    loop->add_new("revindex", Value::integer(len - idx));
    loop->add_new("revindex0", Value::integer(len - idx - 1));
    loop->add_new("first", Value::boolean(i == 0));
    loop->add_new("last", Value::boolean(i + 1 == count));
    loop->add_new("length", Value::integer(len));
    loop->add_new("previtem", i > 0 ? items[i - 1] : Value::undefined());
    loop->add_new("nextitem", i + 1 < count ? items[i + 1] : Value::undefined());
    scope->set("loop", Value::object(std::move(loop)));
    bind_target(target, items[i], *scope);
    // As @huggingface/jinja: what an iteration printed before a break or
    // continue is dropped, and such an iteration does not count as one.
    const size_t mark = out.size();
    const Flow f = exec_block(n.body, scope, out);
    if (f == Flow::Continue) {
      out.resize(mark);
      continue;
    }
    if (f == Flow::Break) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) return exec_block(n.alt, scope, out);
  return Flow::Normal;
}

void Interpreter::exec_set(const Node& n, const EnvPtr& env) {
  const Node& target = *n.kids[0];
  const Value rhs = n.kids.size() > 1 ? eval(*n.kids[1], env) : make_string(render_body(n.body, env, "a set block"));
  switch (target.kind) {
    case NodeKind::Ident: env->set(target.name, rhs); return;
    case NodeKind::TupleLit: bind_target(target, rhs, *env); return;
    case NodeKind::Member: {
      const Value object = eval(*target.kids[0], env);
      if (object.kind != Kind::Namespace)
        fail("cannot set an attribute of " + a_kind(object) + " (only of a namespace())", target.pos);
      const Node& prop = *target.kids[1];
      if (prop.kind != NodeKind::Literal || !prop.value.is_string()) fail("cannot assign to this attribute", target.pos);
      object.obj->set(prop.value.s(), rhs);
      if (object.obj->depth > kMaxValueDepth) fail("a namespace is nested too deeply", target.pos);
      return;
    }
    default: fail("cannot assign to this expression", target.pos);
  }
}

void Interpreter::bind_macro_args(const Node& macro, const std::string& display, CallArgs& call, const EnvPtr& scope) {
  std::vector<std::pair<std::string, Value>> kwargs = call.kwargs;
  std::vector<std::pair<std::string, const Node*>> pending;
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Node& p = *macro.params[i];
    Value v;
    bool have = false;
    if (i < call.args.size()) {
      v = call.args[i];
      have = true;
    } else {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
        if (it->first == p.name) {
          v = it->second;
          kwargs.erase(it);
          have = true;
          break;
        }
    }
    if (!have && p.kind == NodeKind::KwArg) pending.emplace_back(p.name, p.kids[0].get());
    scope->set(p.name, have ? v : Value::undefined());
  }
  if (macro.uses_kwargs) {
    auto o = std::make_shared<ObjectData>();
    for (auto& [k, v] : kwargs) o->set(k, v);
    scope->set("kwargs", Value::object(std::move(o)));
  } else if (!kwargs.empty()) {
    fail("macro " + display + " takes no keyword argument '" + kwargs[0].first + "'");
  }
  if (macro.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = macro.params.size(); i < call.args.size(); ++i) rest.push_back(call.args[i]);
    scope->set("varargs", Value::array(std::move(rest)));
  } else if (call.args.size() > macro.params.size()) {
    fail("macro " + display + " takes at most " + std::to_string(macro.params.size()) + " argument(s)");
  }
  for (const auto& [name, dflt] : pending) scope->set(name, eval(*dflt, scope));
}

Value Interpreter::call_function(const Value& fnv, CallArgs& args, const EnvPtr& env) {
  const FunctionData& f = *fnv.fn;
  if (f.builtin) return f.builtin(*this, f.self, args);
  const Node& m = *f.macro;
  auto scope = std::make_shared<Env>();
  if (m.kind == NodeKind::Macro) {
    scope->parent = env;  // macros see their caller's variables, as in @huggingface/jinja
    bind_macro_args(m, "'" + m.name + "'", args, scope);
    return make_string(render_body(m.body, scope, "a macro"));
  }
  scope->parent = f.closure;  // `caller` of a call block: the block's own scope
  bind_macro_args(m, "caller", args, scope);
  return make_string(render_body(m.body, scope, "a call block"));
}

Value Interpreter::exec_call_block(const Node& n, const EnvPtr& env) {
  const Node& call = *n.kids[0];
  auto caller = std::make_shared<FunctionData>();
  caller->name = "caller";
  caller->macro = &n;
  caller->closure = env;
  captured_.push_back(env);
  CallArgs args = eval_args(call.kids, 1, env);
  const Value fn = eval(*call.kids[0], env);
  if (fn.kind != Kind::Function) fail("'" + call.kids[0]->name + "' is not a macro", call.pos);
  auto scope = std::make_shared<Env>();
  scope->parent = env;
  scope->set("caller", Value::function(std::move(caller)));
  return call_function(fn, args, scope);
}

// --- expressions -------------------------------------------------------------

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  step();
  DepthGuard guard(*this);
  try {
    switch (n.kind) {
      case NodeKind::Literal: return n.value;
      case NodeKind::Ident: {
        const Value* v = env->lookup(n.name);
        return v ? *v : Value::undefined();
      }
      case NodeKind::Member: return eval_member(n, env);
      case NodeKind::Call: return eval_call(n, env);
      case NodeKind::Binary: return eval_binary(n, env);
      case NodeKind::Unary: return eval_unary(n, env);
      case NodeKind::Filter: return eval_filter(n, 1, eval(*n.kids[0], env), env);
      case NodeKind::Test: return eval_test(n, env);
      case NodeKind::Ternary: return eval(*n.kids[eval(*n.kids[0], env).truthy() ? 1 : 2], env);
      case NodeKind::Select:
        return eval(*n.kids[1], env).truthy() ? eval(*n.kids[0], env) : Value::undefined();
      case NodeKind::ArrayLit:
      case NodeKind::TupleLit: {
        std::vector<Value> items;
        for (const NodePtr& k : n.kids) items.push_back(eval(*k, env));
        charge(items.size() * sizeof(Value));
        return Value::array(std::move(items), n.kind == NodeKind::TupleLit);
      }
      case NodeKind::ObjectLit: {
        auto o = std::make_shared<ObjectData>();
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
          const Value k = eval(*n.kids[i], env);
          if (!k.is_string()) fail(std::string("dict keys must be strings, not ") + kind_name(k), n.kids[i]->pos);
          o->set(k.s(), eval(*n.kids[i + 1], env));
        }
        charge(sizeof(ObjectData) + o->entries.size() * (sizeof(Value) + 32));
        if (o->depth > kMaxValueDepth) fail("a dict is nested too deeply");
        return Value::object(std::move(o));
      }
      case NodeKind::KwArg: fail("a keyword argument outside a call");
      case NodeKind::Spread:
      case NodeKind::KwSpread: fail("argument unpacking outside a call");
      case NodeKind::Slice: fail("a slice outside '[ ]'");
      default: fail("a statement where an expression was expected");
    }
  } catch (JinjaError& e) {
    if (e.pos == JinjaError::kNoPos) e.pos = n.pos;
    throw;
  }
}

CallArgs Interpreter::eval_args(const std::vector<NodePtr>& nodes, size_t first, const EnvPtr& env) {
  CallArgs c;
  for (size_t i = first; i < nodes.size(); ++i) {
    const Node& a = *nodes[i];
    if (a.kind == NodeKind::Spread) {
      const Value v = eval(*a.kids[0], env);
      if (!v.is_array()) fail("cannot unpack " + a_kind(v) + " with '*'", a.pos);
      for (const Value& x : v.items()) c.args.push_back(x);
    } else if (a.kind != NodeKind::KwArg && a.kind != NodeKind::KwSpread) {
      c.args.push_back(eval(a, env));
    }
  }
  auto add_kw = [&](const std::string& k, Value v, uint32_t pos) {
    if (c.kwarg(k)) fail("keyword argument '" + k + "' given twice", pos);
    c.kwargs.emplace_back(k, std::move(v));
  };
  for (size_t i = first; i < nodes.size(); ++i) {
    const Node& a = *nodes[i];
    if (a.kind == NodeKind::KwArg) {
      add_kw(a.name, eval(*a.kids[0], env), a.pos);
    } else if (a.kind == NodeKind::KwSpread) {
      const Value v = eval(*a.kids[0], env);
      if (v.kind != Kind::Object) fail("'**' needs a dict, not " + a_kind(v), a.pos);
      for (const auto& [k, x] : v.obj->entries) add_kw(k, x, a.pos);
    }
  }
  return c;
}

Value Interpreter::eval_call(const Node& n, const EnvPtr& env) {
  CallArgs args = eval_args(n.kids, 1, env);
  const Value fn = eval(*n.kids[0], env);
  if (fn.kind != Kind::Function) {
    const Node& callee = *n.kids[0];
    if (callee.kind == NodeKind::Ident && fn.is_undefined()) fail("'" + callee.name + "' is undefined, not a function");
    fail("cannot call " + a_kind(fn));
  }
  return call_function(fn, args, env);
}

Value Interpreter::eval_member(const Node& n, const EnvPtr& env) {
  const Value object = eval(*n.kids[0], env);
  const Node& prop_node = *n.kids[1];
  if (prop_node.kind == NodeKind::Slice) return eval_slice(object, prop_node, env);
  const Value prop = eval(prop_node, env);
  switch (object.kind) {
    case Kind::Object:
    case Kind::Namespace: {
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      if (const Value* v = object.obj->find(prop.s())) return *v;
      if (object.kind == Kind::Object)
        if (Builtin m = find_object_method(prop.s())) return Value::function(builtin(prop.s(), m, object));
      return Value::undefined();
    }
    case Kind::Array:
    case Kind::String: {
      if (prop.kind == Kind::Int) {
        if (object.is_array()) {
          const int64_t i = resolve_index(prop.num, object.items().size());
          return i < 0 ? Value::undefined() : object.items()[static_cast<size_t>(i)];
        }
        const auto cps = cp_split(object.s());
        const int64_t i = resolve_index(prop.num, cps.size());
        return i < 0 ? Value::undefined() : Value::string(std::string(cps[static_cast<size_t>(i)]));
      }
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      if (prop.s() == "length")
        return Value::integer(static_cast<double>(object.is_array() ? object.items().size() : cp_count(object.s())));
      if (object.is_string())
        if (Builtin m = find_string_method(prop.s())) return Value::function(builtin(prop.s(), m, object));
      return Value::undefined();
    }
    default:
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      return Value::undefined();
  }
}

Value Interpreter::eval_slice(const Value& object, const Node& slice, const EnvPtr& env) {
  if (!object.is_array() && !object.is_string()) fail("cannot slice " + a_kind(object));
  Value part[3];
  for (int i = 0; i < 3; ++i) {
    if (!slice.kids[i]) continue;
    part[i] = eval(*slice.kids[i], env);
    if (part[i].kind != Kind::Int && !part[i].is_undefined())
      fail(std::string("slice indices must be integers, not ") + kind_name(part[i]), slice.kids[i]->pos);
  }
  if (object.is_array()) {
    const auto idx = slice_indices(object.items().size(), part[0], part[1], part[2]);
    std::vector<Value> out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(object.items()[i]);
    return make_array(std::move(out));
  }
  const auto cps = cp_split(object.s());
  std::string out;
  for (size_t i : slice_indices(cps.size(), part[0], part[1], part[2])) out += cps[i];
  return make_string(std::move(out));
}

Value Interpreter::eval_unary(const Node& n, const EnvPtr& env) {
  const Value v = eval(*n.kids[0], env);
  if (n.name == "not") return Value::boolean(!v.truthy());
  const double sign = n.name == "-" ? -1 : 1;
  if (v.is_number()) return v.kind == Kind::Float ? Value::floating(sign * v.num) : Value::integer(sign * v.num);
  if (v.kind == Kind::Bool) return Value::integer(sign * (v.b ? 1 : 0));
  fail("unary '" + n.name + "' needs a number, not " + a_kind(v));
}

Value Interpreter::eval_binary(const Node& n, const EnvPtr& env) {
  const std::string& op = n.name;
  const Value left = eval(*n.kids[0], env);
  if (op == "and") return left.truthy() ? eval(*n.kids[1], env) : left;
  if (op == "or") return left.truthy() ? left : eval(*n.kids[1], env);
  const Value right = eval(*n.kids[1], env);
  if (op == "==") return Value::boolean(loose_equals(left, right));
  if (op == "!=") return Value::boolean(!loose_equals(left, right));
  const bool in_op = op == "in" || op == "not in";
  if (op == "~" && !left.is_null() && !right.is_null()) {
    // Jinja2 prints an undefined operand of ~ as nothing.
    const std::string a = left.is_undefined() ? "" : js_string(left);
    const std::string b = right.is_undefined() ? "" : js_string(right);
    return make_string(a + b);
  }
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && in_op) return Value::boolean(op == "not in");
    const Node& culprit = left.is_undefined() ? *n.kids[0] : *n.kids[1];
    if (culprit.kind == NodeKind::Ident) fail("'" + culprit.name + "' is undefined (in '" + op + "')", culprit.pos);
    fail("cannot apply '" + op + "' to an undefined value");
  }
  if (left.is_null() || right.is_null()) fail("cannot apply '" + op + "' to none");
  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = left.kind == Kind::Bool ? left.b : left.num, b = right.kind == Kind::Bool ? right.b : right.num;
    if (a == 0 && b < 0) fail("0 cannot be raised to a negative power");
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail("'**' gave a result that is not a finite number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.num, b = right.num;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    auto num = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      std::vector<Value> items = left.items();
      items.insert(items.end(), right.items().begin(), right.items().end());
      return make_array(std::move(items));
    }
  } else if (right.is_array() && in_op) {
    bool found = false;
    for (const Value& x : right.items())
      if (strict_equals(x, left)) {
        found = true;
        break;
      }
    return Value::boolean(found == (op == "in"));
  }
  if ((left.is_string() || right.is_string()) && op == "+") return make_string(js_string(left) + js_string(right));
  if (left.is_string() && right.is_string()) {
    if (in_op) return Value::boolean((right.s().find(left.s()) != std::string::npos) == (op == "in"));
    // Jinja2 compares strings; @huggingface/jinja does not.
    const int c = left.s().compare(right.s());
    if (op == "<") return Value::boolean(c < 0);
    if (op == ">") return Value::boolean(c > 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">=") return Value::boolean(c >= 0);
  }
  if (left.is_string() && right.kind == Kind::Object && in_op)
    return Value::boolean((right.obj->find(left.s()) != nullptr) == (op == "in"));
  fail("unsupported operand types for '" + op + "': " + kind_name(left) + " and " + kind_name(right));
}

Value Interpreter::eval_filter(const Node& n, size_t first_arg, const Value& operand, const EnvPtr& env) {
  if ((n.name == "selectattr" || n.name == "rejectattr") && n.flag) {
    for (size_t i = first_arg; i < n.kids.size(); ++i)
      if (n.kids[i]->kind != NodeKind::Literal || !n.kids[i]->value.is_string())
        fail("the arguments of " + n.name + " must be string literals", n.kids[i]->pos);
  }
  CallArgs args = eval_args(n.kids, first_arg, env);
  return apply_filter(operand, n.name, n.flag, args, env);
}

Value Interpreter::eval_test(const Node& n, const EnvPtr& env) {
  const Value operand = eval(*n.kids[0], env);
  CallArgs args = eval_args(n.kids, 1, env);
  const bool r = run_test(n.name, operand, args.args);
  return Value::boolean(n.flag ? !r : r);
}

}  // namespace th::jinja
