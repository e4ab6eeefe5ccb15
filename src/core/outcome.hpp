#pragma once
// A step's value, or the reason it has none. The steps of a miss (engine/miss.cpp) return these, so
// the caller reads as a list of steps and every way out names a row of the reason table
// (core/reasons.hpp) with the detail a log needs. The one result type (util/result.hpp) with a Failure.
#include <string>
#include <string_view>

#include "core/reasons.hpp"
#include "util/result.hpp"

namespace kache::core {

struct Failure {
  ReasonCategory category;
  std::string_view name;  // a reason table name (reasons.hpp)
  std::string detail;     // for the log: which file, which flag
};

template <typename T>
using Outcome = util::Result<T, Failure>;

// A step with nothing to return but success.
using util::Done;

}  // namespace kache::core
