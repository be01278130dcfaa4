#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/registry.hpp>
#include <pipesched/sim/timing_simulator.hpp>
#include <pipesched/validate/validator.hpp>

using namespace pipesched;

static_assert(schedule_generator<interleaved_1f1b>);

namespace {
std::string line(const schedule& s, stage_index st) {
  std::string out;
  for (const op& o : s.ops(st)) {
    out += (out.empty() ? "" : " ") + to_string(o, true);
  }
  return out;
}
std::uint64_t forwards_before_first_backward(std::span<const op> ops) {
  std::uint64_t n = 0;
  for (const op& o : ops) {
    if (o.kind != op_kind::forward) {
      break;
    }
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("interleaved-1f1b p=2 v=2 m=2 by hand", "[gen][interleaved]") {
  const auto s = generate(interleaved_1f1b{}, 2, 2, 2);
  CHECK(s.layout().kind() == placement_kind::loop);
  // Stage 0 warm-up (2-0-1)*2 + (2-1)*2 = 4 = m*v: every forward first.
  CHECK(line(s, 0) == "F0.0 F1.0 F0.1 F1.1 BW0.1 BW1.1 BW0.0 BW1.0");
  // Stage 1 warm-up 0 + 2 = 2, then one forward one backward.
  CHECK(line(s, 1) == "F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 BW0.0 BW1.0");
}

TEST_CASE("interleaved-1f1b grid: valid, counts, warm-up", "[gen][interleaved][grid]") {
  for (std::uint32_t p = 1; p <= 8; ++p) {
    for (std::uint32_t v = 1; v <= 4; ++v) {
      for (std::uint32_t m = 1; m <= 20; ++m) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const auto s = generate(interleaved_1f1b{}, p, m, v);
        REQUIRE(validate(s).ok());
        REQUIRE(s.size() == std::size_t{2} * p * m * v);
        for (stage_index r = 0; r < p; ++r) {
          REQUIRE(s.ops(r).size() == std::size_t{2} * m * v);
          if (m % p == 0) {
            // The warm-up, then the steady phase's first forward.
            CHECK(forwards_before_first_backward(s.ops(r)) ==
                  std::min<std::uint64_t>(interleaved_1f1b::warmup(p, m, v, r) + 1,
                                          std::uint64_t{m} * v));
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: m not a multiple of p where Megatron's short group deadlocks",
          "[gen][interleaved]") {
  // p=5, v=2, m=7 and p=6, v=3, m=8: the short-last-group order deadlocks; padding does not.
  CHECK(validate(generate(interleaved_1f1b{}, 5, 7, 2)).ok());
  CHECK(validate(generate(interleaved_1f1b{}, 6, 8, 3)).ok());
  CHECK(validate(generate(interleaved_1f1b{}, 8, 3, 4)).ok());
}

TEST_CASE("interleaved-1f1b bubble is (p-1)(TF+TB+TW) in chunk costs, 1/v of 1F1B's",
          "[gen][interleaved][timing]") {
  for (const op_costs c : {op_costs{1, 1, 1}, op_costs{3, 4, 2}, op_costs{1, 2, 0}}) {
    for (std::uint32_t p : {2u, 4u, 8u}) {
      for (std::uint32_t v : {2u, 3u, 4u}) {
        for (std::uint32_t k : {1u, 2u, 3u}) {
          const std::uint32_t m = k * p;
          INFO("p=" << p << " v=" << v << " m=" << m << " costs " << c.forward << ","
                    << c.backward_input << "," << c.backward_weight);
          const double t = c.forward + c.backward_input + c.backward_weight;
          const auto chunk_costs =
              cost_model::uniform(c.forward, c.backward_input, c.backward_weight);
          const auto il = simulate(generate(interleaved_1f1b{}, p, m, v), chunk_costs);
          const double span = il.span(il.max_span_stage);
          const double bubble = span - double(m) * v * t;
          CHECK(bubble == Approx((p - 1) * t));
          // The bubble rate's ideal time is m*v*(T_F+T_B+T_W) with per-chunk costs.
          CHECK(il.bubble_rate == Approx(bubble / span));
          // 1F1B with whole-stage costs (v chunks each): its bubble is v times larger.
          const auto stage_costs =
              cost_model::uniform(v * c.forward, v * c.backward_input, v * c.backward_weight);
          const auto ofob = simulate(generate(one_f_one_b{}, p, m), stage_costs);
          const double bubble_1f1b = ofob.span(ofob.max_span_stage) - double(m) * v * t;
          CHECK(bubble_1f1b == Approx(v * bubble));
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: registry default v=2 and errors", "[gen][interleaved][errors]") {
  const auto* e = default_registry().find("interleaved-1f1b");
  REQUIRE(e != nullptr);
  CHECK(e->default_chunks == 2);
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  CHECK(e->generate(gp).chunks() == 2);
  CHECK_THROWS_WITH(generate(interleaved_1f1b{}, 0, 4, 2),
                    "interleaved-1f1b: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(generate(interleaved_1f1b{}, 4, 0, 2),
                    "interleaved-1f1b: microbatches (m=0) must be at least 1");
}
