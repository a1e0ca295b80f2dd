// Status and Result<T>: how bad input, bad files and I/O errors travel up to the API edge.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace deepinfer {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (maps to HTTP 400 / CLI exit 2)
  kNotFound,         // a file, model or key does not exist
  kUnsupported,      // well-formed but not something we implement
  kCorrupt,          // a file or block failed validation
  kIoError,          // the OS refused a read or write
  kResourceExhausted,// a queue or pool is full
  kInternal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status unsupported(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kUnsupported, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status corrupt(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kCorrupt, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status io_error(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kIoError, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status resource_exhausted(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kResourceExhausted, fmt::format(f, std::forward<Args>(args)...)};
}

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).is_ok()) {
      std::fprintf(stderr, "Result constructed from an ok Status\n");
      std::abort();
    }
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace deepinfer

// Propagate a failing Status / Result from the current function.
#define DI_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::deepinfer::Status di_status_ = (expr);     \
    if (!di_status_.is_ok()) return di_status_;  \
  } while (0)

#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)
#define DI_ASSIGN_OR_RETURN(lhs, expr) DI_ASSIGN_OR_RETURN_IMPL(DI_CONCAT(di_result_, __LINE__), lhs, expr)
#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
