#pragma once

#include <cassert>
#include <charconv>
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

/// An invalid_argument about one field of a request (tools/request.hpp, tools/whatif.hpp):
/// what() is "<where>: <field>: <rule>". field() and rule() let a front end name the field in
/// its own terms (the CLI's --option, Python's keyword) while the rule stays the library's.
class field_error : public invalid_argument {
 public:
  field_error(const std::string& where, std::string field, std::string rule)
      : invalid_argument(where + ": " + field + ": " + rule),
        field_(std::move(field)),
        rule_(std::move(rule)) {}
  /// The request's field, e.g. "search", "chunks", "recompute.chunks".
  const std::string& field() const noexcept { return field_; }
  /// The rule it breaks, with the value, e.g. "5 is not a global chunk of the schedule (0 .. 1)".
  const std::string& rule() const noexcept { return rule_; }

 private:
  std::string field_;
  std::string rule_;
};

namespace detail {

/// Builds an error message from streamable pieces (core headers cannot use fmt).
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

/// `x` in the fewest digits that read back as `x` ("1.0000001", "0.45", "1e-320"): a message
/// that quotes a value next to its bound never shows one that rounds onto the bound ("must be
/// at most 1, not 1").
inline std::string shortest(double x) {
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw invalid_argument(concat(args...));
}

/// Throws field_error(where, field, concat(rule...)).
template <class... Args>
[[noreturn]] void fail_field(const std::string& where, std::string field, const Args&... rule) {
  throw field_error(where, std::move(field), concat(rule...));
}

}  // namespace detail
}  // namespace pipesched
