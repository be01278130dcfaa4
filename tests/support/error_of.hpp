#pragma once

// The message of the error a call throws, for the tests that check messages word for word.
#include <string>

#include <pipesched/ir/error.hpp>

namespace test_support {

/// what() of the pipesched::invalid_argument `f()` throws, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const pipesched::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace test_support
