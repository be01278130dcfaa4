#include <catch2/catch.hpp>

#include <pipesched/ir/error.hpp>

TEST_CASE("invalid_argument is a std::invalid_argument with a built message", "[ir][error]") {
  try {
    pipesched::detail::fail("f: field (x=", 3, ") must be ", 2.5);
    FAIL("no throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "f: field (x=3) must be 2.5");
  }
}
