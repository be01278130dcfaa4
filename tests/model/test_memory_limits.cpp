#include <limits>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/ir/error.hpp>
#include <pipesched/model/memory_limits.hpp>

using namespace pipesched;

TEST_CASE("memory_limits: none, one for every stage, or one per stage", "[memory][model]") {
  const memory_limits none;
  CHECK(!none);
  CHECK(!none.has_value());
  CHECK(!none.uniform());
  CHECK(none.for_stages(4).empty());
  CHECK_THROWS_WITH(none.at(0), "memory_limits::at: no limit is set");
  CHECK(memory_limits(std::nullopt) == none);
  CHECK(memory_limits(std::optional<double>{}) == none);
  CHECK(memory_limits(std::vector<double>{}) == none);

  // A number: every stage.
  const memory_limits every = 72.0;
  CHECK(every);
  CHECK(every.uniform());
  CHECK(every.at(0) == 72.0);
  CHECK(every.at(1000) == 72.0);
  CHECK(every.for_stages(3) == std::vector<double>{72.0, 72.0, 72.0});
  CHECK(memory_limits(std::optional<double>(72.0)) == every);
  CHECK(memory_limits{72.0} == every);
  CHECK(every == 72.0);

  // A list: one per stage.
  memory_limits per = {4.0, 3.0, 2.0};
  CHECK(per);
  CHECK(!per.uniform());
  CHECK(per.at(1) == 3.0);
  CHECK(per.for_stages(3) == std::vector<double>{4.0, 3.0, 2.0});
  CHECK(per.values().size() == 3);
  CHECK_THROWS_WITH(per.at(3), "memory_limits::at: stage 3 has no limit (3 values given)");
  per.reset();
  CHECK(per == none);
}

TEST_CASE("memory_limits: the rules, once, naming the field", "[memory][model][errors]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_NOTHROW(memory_limits{}.check("who", "memory_limit", 4));
  CHECK_NOTHROW(memory_limits(0.0).check("who", "memory_limit", 4));
  CHECK_NOTHROW(memory_limits({1.0, 2.0, 3.0, 4.0}).check("who", "memory_limit", 4));
  CHECK_THROWS_WITH(memory_limits({1.0, 2.0}).check("who", "memory_limit", 4),
                    "who: memory_limit: must hold one value or one per stage (p=4), got 2");
  CHECK_THROWS_WITH(memory_limits(-1.0).check("who", "memory_limit", 4),
                    "who: memory_limit: must be finite and >= 0, got -1");
  CHECK_THROWS_WITH(memory_limits({1.0, inf}).check("who", "memory_limit", 2),
                    "who: memory_limit[1]: must be finite and >= 0, got inf");
  CHECK_THROWS_AS(memory_limits(nan).check("who", "memory_limit", 1), field_error);
  CHECK_THROWS_WITH(memory_limits(0.0).check("pack", "memory_limit", 2, true),
                    "pack: memory_limit: must be finite and > 0, got 0");
  try {
    memory_limits({1.0, -2.0}).check("who", "limit", 2);
    FAIL("no error");
  } catch (const field_error& e) {
    CHECK(e.field() == "limit[1]");
    CHECK(e.rule() == "must be finite and >= 0, got -2");
  }
}
