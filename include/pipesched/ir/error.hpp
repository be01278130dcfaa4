#pragma once

#include <cassert>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

/// PIPESCHED_ASSERT(cond, msg): internal invariant check. Defaults to assert(); define it
/// before including any pipesched header to route failures elsewhere (JSON_ASSERT pattern).
#ifndef PIPESCHED_ASSERT
#define PIPESCHED_ASSERT(cond, msg) assert((cond) && (msg))
#endif

namespace pipesched {

/// Thrown for invalid user input: bad parameters, malformed files, impossible requests.
/// The message names the function or file path, the field and the rule, e.g.
/// `one_f_one_b: stages (p=0) must be at least 1`.
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/// Builds an error message from streamable pieces (core headers cannot use fmt).
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw invalid_argument(concat(args...));
}

}  // namespace detail
}  // namespace pipesched
