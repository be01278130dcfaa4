#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/gpipe.hpp>

using namespace pipesched;

static_assert(schedule_generator<gpipe>);
static_assert(!schedule_generator<int>);

TEST_CASE("gpipe: all forwards then all backwards", "[gen][gpipe]") {
  const auto s = generate(gpipe{}, 3, 4);
  for (stage_index st = 0; st < 3; ++st) {
    const auto ops = s.ops(st);
    REQUIRE(ops.size() == 8);
    for (std::uint32_t j = 0; j < 4; ++j) {
      CHECK(ops[j] == make_op(op_kind::forward, j));
      CHECK(ops[4 + j] == make_op(op_kind::backward_full, j));
    }
  }
  const auto split = generate(gpipe{true}, 2, 2);
  CHECK(split.name() == "gpipe-split");
  CHECK(split.ops(1)[2] == make_op(op_kind::backward_input, 0));
  CHECK(split.ops(1)[3] == make_op(op_kind::backward_weight, 0));
}

TEST_CASE("gpipe over a grid is valid with exact counts", "[gen][gpipe][grid]") {
  for (std::uint32_t p = 1; p <= 16; ++p) {
    for (std::uint32_t m = 1; m <= 64; m += (m < 20 ? 1 : 7)) {
      for (bool split : {false, true}) {
        const auto s = generate(gpipe{split}, p, m);
        INFO("p=" << p << " m=" << m);
        REQUIRE(validate(s).ok());
        REQUIRE(s.size() == std::size_t{p} * m * (split ? 3 : 2));
      }
    }
  }
}

TEST_CASE("gpipe rejects bad parameters", "[gen][gpipe][errors]") {
  CHECK_THROWS_WITH(generate(gpipe{}, 0, 1), "gpipe: stages (p=0) must be at least 1");
}
