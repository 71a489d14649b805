// Errors as values: a Status carries a message naming the file, field or value
// that was wrong. Result<T> is a value or the Status explaining its absence.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace verity {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }

  // Returns true iff no error occurred.
  bool ok() const { return !error_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : error_(true), message_(std::move(m)) {}
  bool error_ = false;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  // A Result made from an OK Status has no value and no error to say why: it
  // becomes an internal error (as abseil's StatusOr does), so that
  // VERITY_ASSIGN_OR_RETURN can never make its caller return success.
  Result(Status status)  // NOLINT
      : status_(status.ok() ? Status::Error("internal error: a Result was made from an OK Status, with no value")
                            : std::move(status)) {}
  static_assert(!std::is_same_v<T, Status>);

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace verity

// Propagates a failed Status (or Result's status) to the caller.
#define VERITY_RETURN_IF_ERROR(expr)                                       \
  do {                                                                     \
    auto _verity_st = (expr);                                              \
    if (!_verity_st.ok()) return ::verity::internal::ToStatus(_verity_st); \
  } while (0)

#define VERITY_CONCAT_INNER(a, b) a##b
#define VERITY_CONCAT(a, b) VERITY_CONCAT_INNER(a, b)
// `VERITY_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define VERITY_ASSIGN_OR_RETURN(lhs, expr) VERITY_ASSIGN_OR_RETURN_IMPL(VERITY_CONCAT(_verity_r, __LINE__), lhs, expr)
#define VERITY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

namespace verity::internal {
inline Status ToStatus(const Status& s) { return s; }
template <class T>
Status ToStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace verity::internal
