#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "gen/golden.hpp"

using namespace pipesched;

static_assert(schedule_generator<zb_h1>);
static_assert(schedule_generator<zb_h2>);

TEST_CASE("zb-h1 and zb-h2 match the golden p=4 m=8 sequences", "[gen][zb]") {
  const auto h1 = generate(zb_h1{}, 4, 8);
  const auto h2 = generate(zb_h2{}, 4, 8);
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(golden::stage_line_1based(h1, st) == golden::zb_h1[st]);
    CHECK(golden::stage_line_1based(h2, st) == golden::zb_h2[st]);
  }
}

namespace {
// Number of F before the first B, and the W delay (Bs run before the first W, minus one).
std::pair<std::uint32_t, std::uint32_t> shape(std::span<const op> ops) {
  std::uint32_t f_before_b = 0;
  std::uint32_t b_before_w = 0;
  bool seen_b = false;
  for (const op& o : ops) {
    if (o.kind == op_kind::backward_input) {
      seen_b = true;
    }
    if (!seen_b && o.kind == op_kind::forward) {
      ++f_before_b;
    }
    if (o.kind == op_kind::backward_weight) {
      break;
    }
    if (o.kind == op_kind::backward_input) {
      ++b_before_w;
    }
  }
  return {f_before_b, b_before_w};
}
}  // namespace

TEST_CASE("zero-bubble family over a grid: valid, counts, warm-up and W delay", "[gen][zb][grid]") {
  for (std::uint32_t p = 1; p <= 16; ++p) {
    for (std::uint32_t m = 1; m <= 64; m += (m < 20 ? 1 : 7)) {
      const auto h1 = generate(zb_h1{}, p, m);
      const auto h2 = generate(zb_h2{}, p, m);
      INFO("p=" << p << " m=" << m);
      REQUIRE(validate(h1).ok());
      REQUIRE(validate(h2).ok());
      REQUIRE(h1.size() == std::size_t{3} * p * m);
      REQUIRE(h2.size() == std::size_t{3} * p * m);
      for (stage_index st = 0; st < p; ++st) {
        const auto [f1, d1] = shape(h1.ops(st));
        CHECK(f1 == std::min(p - st, m));
        CHECK(f1 == zb_h1::warmup(p, m, st));
        CHECK(d1 == std::min(st + 1, m));
        const auto [f2, d2] = shape(h2.ops(st));
        CHECK(f2 == std::min(2 * (p - st) - 1, m));
        CHECK(f2 == zb_h2::warmup(p, m, st));
        CHECK(d2 == std::min(2 * st + 1, m));
      }
    }
  }
}

TEST_CASE("zero-bubble generators reject bad parameters", "[gen][zb][errors]") {
  CHECK_THROWS_WITH(generate(zb_h1{}, 0, 4), "zb-h1: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(generate(zb_h2{}, 4, 0), "zb-h2: microbatches (m=0) must be at least 1");
  CHECK_THROWS_WITH(generate(zb_h2{}, 70000, 4), "zb-h2: stages (p=70000) must be at most 65536");
}
