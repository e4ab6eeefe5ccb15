#pragma once
// A step's value, or the reason it has none. The steps of a miss (app/pipeline.cpp) return these, so
// the caller reads as a list of steps and every way out names a row of the reason table
// (core/reasons.hpp) with the detail a log needs. std::expected is C++23; this is the part kache uses.
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/reasons.hpp"

namespace kache::core {

struct Failure {
  ReasonCategory category;
  std::string_view name;  // a reason table name (reasons.hpp)
  std::string detail;     // for the log: which file, which flag
};

template <typename T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T value) : v_(std::move(value)) {}            // NOLINT(google-explicit-constructor): a step returns its value
  Outcome(Failure failure) : v_(std::move(failure)) {}  // NOLINT(google-explicit-constructor): or its failure

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Failure& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, Failure> v_;
};

// A step with nothing to return but success.
struct Done {};

}  // namespace kache::core
