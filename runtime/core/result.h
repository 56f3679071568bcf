// Result<T>: a value or an Error, for returns that can fail without exceptions.
#pragma once

#include <new>
#include <type_traits>
#include <utility>

#include "runtime/core/error.h"

namespace executorch {
namespace runtime {

template <typename T>
class Result final {
 public:
  Result(const T& value) : error_(Error::Ok), has_value_(true) { new (&value_) T(value); }
  Result(T&& value) : error_(Error::Ok), has_value_(true) { new (&value_) T(std::move(value)); }
  // An Ok error without a value is a programming mistake; it becomes Internal.
  Result(Error error) : error_(error == Error::Ok ? Error::Internal : error), has_value_(false) {}
  Result(Result&& other) noexcept : error_(other.error_), has_value_(other.has_value_) {
    if (has_value_) new (&value_) T(std::move(other.value_));
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;
  ~Result() {
    if (has_value_) value_.~T();
  }

  bool ok() const { return has_value_; }
  Error error() const { return has_value_ ? Error::Ok : error_; }
  T& get() { return value_; }
  const T& get() const { return value_; }
  T& operator*() { return value_; }
  const T& operator*() const { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }

 private:
  union {
    T value_;
  };
  Error error_;
  bool has_value_;
};

}  // namespace runtime
}  // namespace executorch

// Declares `lhs` from a Result-returning `expr`, or returns its error.
#define ET_UNWRAP(lhs, expr)                             \
  auto lhs##_result_ = (expr);                           \
  if (!lhs##_result_.ok()) return lhs##_result_.error(); \
  auto lhs = std::move(*lhs##_result_)
