// Status and Result<T>: errors as values (leveldb style). No exceptions cross
// library boundaries; every failure carries a category and a message that says
// what failed, on which object, and expected vs. actual where it applies.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace mx {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,
    kCorruption,
    kInvalidArgument,
    kIOError,
    kResourceExhausted,
    kNotSupported,
    kInternal,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) {
    return Status(Code::kResourceExhausted, std::move(msg));
  }
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: <message>", or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

const char* StatusCodeName(Status::Code code);

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}    // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace mx

#define MX_CONCAT_INNER(a, b) a##b
#define MX_CONCAT(a, b) MX_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define MX_RETURN_IF_ERROR(expr)        \
  do {                                  \
    ::mx::Status _mx_st = (expr);       \
    if (!_mx_st.ok()) return _mx_st;    \
  } while (0)

// MX_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status on failure.
#define MX_ASSIGN_OR_RETURN(lhs, expr) \
  MX_ASSIGN_OR_RETURN_IMPL(MX_CONCAT(_mx_res_, __LINE__), lhs, expr)
#define MX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
