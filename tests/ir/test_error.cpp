#include <stdexcept>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>

#include <pipesched/ir/error.hpp>
#include <pipesched/ir/placement.hpp>

// The library's errors are pipesched::invalid_argument, a std::invalid_argument whose message
// names the function, the field with its value and the rule.
TEST_CASE("invalid_argument is a std::invalid_argument with a built message", "[ir][error]") {
  static_assert(std::is_base_of_v<std::invalid_argument, pipesched::invalid_argument>);
  try {
    (void)pipesched::placement::loop(2, 0);
    FAIL("no throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "placement: chunks (v=0) must be between 1 and 65535");
  }
  CHECK_THROWS_AS(pipesched::placement::sequential(0), pipesched::invalid_argument);
}
