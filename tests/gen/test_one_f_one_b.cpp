#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/one_f_one_b.hpp>

#include "gen/golden.hpp"

using namespace pipesched;

static_assert(schedule_generator<one_f_one_b>);

TEST_CASE("1f1b matches the golden p=4 m=8 sequence", "[gen][1f1b]") {
  const auto s = generate(one_f_one_b{}, 4, 8);
  REQUIRE(s.name() == "1f1b");
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(golden::stage_line_1based(s, st) == golden::one_f_one_b[st]);
  }
}

TEST_CASE("1f1b over a grid: valid, exact counts, warm-up as specified", "[gen][1f1b][grid]") {
  for (std::uint32_t p = 1; p <= 16; ++p) {
    for (std::uint32_t m = 1; m <= 64; m += (m < 20 ? 1 : 7)) {
      for (bool split : {false, true}) {
        const auto s = generate(one_f_one_b{split}, p, m);
        const auto r = validate(s);
        INFO("p=" << p << " m=" << m << " split=" << split);
        REQUIRE(r.ok());
        REQUIRE(s.size() == std::size_t{p} * m * (split ? 3 : 2));
        for (stage_index st = 0; st < p; ++st) {
          const auto ops = s.ops(st);
          std::uint32_t warm = 0;
          while (warm < ops.size() && ops[warm].kind == op_kind::forward) {
            ++warm;
          }
          // The steady phase starts with one more F before the first backward when F remain.
          const std::uint32_t expect = std::min(p - 1 - st, m);
          CHECK(warm == (expect < m ? expect + 1 : expect));
          CHECK(one_f_one_b::warmup(p, m, st) == expect);
          if (split) {
            for (std::size_t i = 0; i < ops.size(); ++i) {
              if (ops[i].kind == op_kind::backward_input) {
                REQUIRE(i + 1 < ops.size());
                CHECK(ops[i + 1] == make_op(op_kind::backward_weight, ops[i].mb));
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("1f1b rejects bad parameters naming the field", "[gen][1f1b][errors]") {
  CHECK_THROWS_WITH(generate(one_f_one_b{}, 0, 8), "1f1b: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(generate(one_f_one_b{}, 4, 0), "1f1b: microbatches (m=0) must be at least 1");
  CHECK_THROWS_WITH(generate(one_f_one_b{}, 4, 8, 2),
                    "1f1b: chunks (v=2) must be 1 for this schedule");
  CHECK_THROWS_AS(generate(one_f_one_b{}, 4, 1u << 30), pipesched::invalid_argument);
  CHECK_THROWS_WITH(generate(one_f_one_b{}, 65536, 16777216), Catch::Contains("is too large"));
}
