#include <string>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/model/inline_recompute.hpp>
#include <pipesched/transform/recompute.hpp>

using namespace pipesched;

TEST_CASE("inline_recompute: the backward pays T_R, F holds max(M_in, M_W), static the transient",
          "[model][recompute]") {
  cost_model c = cost_model::uniform(2, 3, 1, 0.5).set_recompute(1.5);
  memory_model m(chunk_memory{4.0, 1.0, 0.25, 0.5});
  m.set_static_memory({10, 20});
  const auto [ic, im] = inline_recompute(c, m, 2, 2);
  const shaped_cost_model bc = ic.for_shape(2, 2, "t");
  const shaped_memory_model bm = im.for_shape(2, 2, "t");
  for (stage_index s = 0; s < 2; ++s) {
    for (chunk_index k = 0; k < 2; ++k) {
      // Per stage values split over v = 2.
      CHECK(bc.at(s, k).forward == 1.0);
      CHECK(bc.at(s, k).backward_input == 0.75 + 1.5);
      CHECK(bc.at(s, k).backward_weight == 0.5);
      CHECK(bc.at(s, k).recompute == 0.0);   // the backward's first part
      CHECK(bm.at(s, k).activation == 0.5);  // max(M_in 0.5, M_W 1/2)
      CHECK(bm.at(s, k).weight_grad_input == 0.5);
      CHECK(bm.at(s, k).input == 0.0);
    }
  }
  CHECK(bm.static_memory(0) == 10 + (2.0 - 0.5));
  CHECK(bm.static_memory(1) == 20 + (2.0 - 0.5));
  CHECK(bc.comm(0, 1) == 0.5);
}

// The rule's promise: an order timed and checked with these costs and sizes is never beaten
// down by the same order with explicit R ops right before each backward, in time and in
// memory.
TEST_CASE("inline_recompute: explicit R ops are never later nor higher", "[model][recompute]") {
  cost_model c = cost_model::uniform(1, 1.5, 0.75, 0.2).set_recompute(0.8);
  memory_model m(chunk_memory{3.0, 1.0, 0.0, 0.4});
  for (const std::string name : {"1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v", "v-half"}) {
    generator_params gp;
    gp.stages = 4;
    gp.microbatches = 8;
    gp.costs = c;
    gp.memory = m;
    const schedule plain = default_registry().generate(name, gp);
    const std::uint32_t v = plain.chunks();
    const auto [ic, im] = inline_recompute(c, m, 4, v);
    const schedule explicit_r = with_recompute(plain, all_chunks(plain));
    const simulation_result a = simulate(plain, ic);
    const simulation_result b = simulate(explicit_r, c);
    INFO(name);
    CHECK(b.makespan <= a.makespan + 1e-12);
    const memory_report ma = check_memory(plain, im);
    const memory_report mb = check_memory(explicit_r, m);
    for (stage_index s = 0; s < 4; ++s) {
      CHECK(mb.peak_memory(s) <= ma.peak_memory(s) + 1e-12);
    }
  }
}
