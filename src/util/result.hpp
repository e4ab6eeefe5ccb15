#pragma once
// A value or a typed failure, for code whose failures are expected outcomes the caller acts on (a
// store that timed out is switched off; a damaged entry is a miss), not exceptions. C++20 has no
// std::expected; this is the small part of it kache uses. core::Outcome (core/outcome.hpp) is this with a
// core::Failure: one result type, one Done.
#include <utility>
#include <variant>

namespace kache::util {

// The value of a Result that carries none.
struct Done {};

template <typename T, typename E>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit on purpose
  Result(E failure) : v_(std::in_place_index<1>, std::move(failure)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

}  // namespace kache::util
