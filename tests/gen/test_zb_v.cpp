#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/registry.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/memory/memory_checker.hpp>
#include <pipesched/sim/timing_simulator.hpp>
#include <pipesched/validate/validator.hpp>

#include "support/measure.hpp"

using namespace pipesched;
using namespace test_measure;

static_assert(schedule_generator<zb_v>);

TEST_CASE("zb-v grid: valid, V placement, counts, within 1F1B memory", "[gen][zb-v][grid]") {
  for (std::uint32_t p = 1; p <= 7; ++p) {
    for (std::uint32_t m : {1u, 2u, 3u, 5u, 8u, 13u}) {
      INFO("p=" << p << " m=" << m);
      generator_params gp;
      gp.stages = p;
      gp.microbatches = m;
      const auto r = zb_v_search(gp);
      REQUIRE(validate(r.sched).ok());
      REQUIRE(r.sched.layout().kind() == placement_kind::v_shape);
      REQUIRE(r.sched.size() == std::size_t{6} * p * m);
      const auto pk = peaks(r.sched, gp.memory);
      for (stage_index s = 0; s < p; ++s) {
        CHECK(pk[s] <= 2.0 * p + 1e-9);  // 1F1B's p*M_B = 2p chunk activations
        CHECK(r.sched.ops(s).size() == std::size_t{6} * m);
      }
      CHECK(r.lower_bound <= r.span + 1e-9);
      CHECK(span_of(r.sched, gp.costs) == Approx(r.span));
    }
  }
}

TEST_CASE("zb-v has zero bubble at unit costs once m >= 2p", "[gen][zb-v]") {
  for (std::uint32_t p = 1; p <= 8; ++p) {
    for (std::uint32_t m : {2 * p, 3 * p, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const auto s = generate(zb_v{}, p, m);
      const double span = span_of(s);
      // Busy every moment of its span; the greedy leaves one T_F for odd p = 5, 7 at some m
      // (the hand-crafted ZB-V order is not among its candidates).
      const double slack = (p == 5 || p == 7) ? 1.0 : 0.0;
      CHECK(span <= 6.0 * m + slack + 1e-9);
      if (slack == 0.0) {
        CHECK(span == Approx(6.0 * m));
      }
    }
  }
}

TEST_CASE("zb-v is cost-aware and never exceeds the memory limit", "[gen][zb-v][memory]") {
  for (std::uint32_t p : {2u, 3u, 4u, 6u}) {
    for (std::uint32_t m : {4u, 9u, 16u}) {
      for (double comm : {0.0, 0.25}) {
        std::vector<op_costs> costs;
        std::vector<chunk_memory> mem;
        for (std::uint32_t s = 0; s < p; ++s) {
          costs.push_back({1.0 + 0.1 * s, 1.5, 0.7});   // chunk 0
          costs.push_back({0.8, 1.2 + 0.05 * s, 0.9});  // chunk 1
          mem.push_back({1.0, 0.4, 0.0});
          mem.push_back({1.5, 0.5, 0.0});
        }
        for (double limit : {2.5, 4.0, 1.0 * p * 2.5, 2.0 * p * 2.5}) {
          INFO("p=" << p << " m=" << m << " comm=" << comm << " limit=" << limit);
          generator_params gp;
          gp.stages = p;
          gp.microbatches = m;
          gp.costs.set_chunk_costs(2, costs).set_comm(comm);
          gp.memory.set_chunk_memory(2, mem);
          gp.memory_limit = limit;
          const auto r = zb_v_search(gp);
          REQUIRE(validate(r.sched).ok());
          for (double pk : peaks(r.sched, gp.memory)) {
            CHECK(pk <= limit + 1e-9);
          }
          CHECK(r.lower_bound <= r.span + 1e-9);
          CHECK(span_of(r.sched, gp.costs) == Approx(r.span));
        }
      }
    }
  }
}

TEST_CASE("zb-v errors", "[gen][zb-v][errors]") {
  CHECK_THROWS_WITH(generate(zb_v{}, 4, 8, 3), "zb-v: chunks (v=3) must be 2 for this schedule");
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  gp.memory_limit = 1.5;
  CHECK_THROWS_WITH(zb_v_search(gp), Catch::StartsWith("zb-v: memory_limit (1.5) is below the "
                                                       "minimum any schedule needs on stage 0 (2"));
  const auto* e = default_registry().find("zb-v");
  REQUIRE(e != nullptr);
  CHECK(e->default_chunks == 2);
}
