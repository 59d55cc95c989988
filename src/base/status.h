// Errors as values: Status for operations that return nothing, Result<T> for
// operations that return a T or fail. Messages are one line, naming the problem.
#pragma once

#include <cassert>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace th {

/// @brief Builds a string from streamable parts: cat("bad dim ", d, " in ", name).
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// @brief The outcome of an operation that produces no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  template <class... Args>
  static Status errorf(Args&&... args) {
    return Status(cat(std::forward<Args>(args)...));
  }
  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

inline Status ok_status() { return Status(); }

/// @brief A T, or the Status that says why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  const std::string& message() const { return status().message(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace th

#define TH_CONCAT_INNER(a, b) a##b
#define TH_CONCAT(a, b) TH_CONCAT_INNER(a, b)

/// Returns the Status of `expr` from the enclosing function when it failed.
#define TH_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::th::Status th_status_ = (expr);       \
    if (!th_status_.ok()) return th_status_; \
  } while (0)

/// `TH_ASSIGN_OR_RETURN(auto x, f())`: x = f().value(), or returns f()'s Status.
#define TH_ASSIGN_OR_RETURN(lhs, expr) \
  TH_ASSIGN_OR_RETURN_IMPL(TH_CONCAT(th_result_, __LINE__), lhs, expr)
#define TH_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
