#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/detail/op_ready.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/detail/zb_greedy.hpp>
#include <pipesched/gen/detail/zb_published.hpp>
#include <pipesched/gen/zb_search_types.hpp>

using namespace pipesched;

TEST_CASE("op_ready: an input arrives T_comm after its producer; an op waits for the last",
          "[op_ready]") {
  STATIC_REQUIRE(detail::input_arrival(3.0, 0.5) == 3.5);
  STATIC_REQUIRE(detail::ready_time(2.0, 3.0, 0.5) == 3.5);  // the input is later
  STATIC_REQUIRE(detail::ready_time(4.0, 3.0, 0.5) == 4.0);  // the stage is later
  STATIC_REQUIRE(detail::ready_time(3.5, 3.0, 0.5) == 3.5);
  // The V-shape schedules' slot clock: integer slots, no latency.
  STATIC_REQUIRE(detail::ready_time(std::int64_t{-1}, std::int64_t{7}, std::int64_t{0}) == 7);
}

namespace {

/// Per-stage (or per-chunk) costs that differ, T_comm that differs per link.
cost_model clock_costs(const placement& pl) {
  std::vector<op_costs> c;
  for (stage_index s = 0; s < pl.stages(); ++s) {
    for (chunk_index k = 0; k < pl.chunks(); ++k) {
      c.push_back({1.0 + 0.2 * ((s + k) % 3), 1.1 + 0.3 * (s % 2), 0.4 + 0.15 * ((s + 2 * k) % 3)});
    }
  }
  std::vector<double> links(std::size_t{pl.stages()} * pl.stages());
  for (std::size_t i = 0; i < links.size(); ++i) {
    links[i] = 0.05 * double(i % 4);
  }
  cost_model out;
  out.set_chunk_costs(pl.chunks(), c).set_link_comm(pl.stages(), links);
  return out.for_shape(pl.stages(), pl.chunks(), "test");
}

/// The op lists as a schedule, timed by the engine (docs/model.md §3).
simulation_result engine_times(const placement& pl,
                               std::uint32_t m,
                               const std::vector<std::vector<op>>& lists,
                               const cost_model& costs) {
  schedule s = schedule::on("clock", pl, m);
  for (stage_index st = 0; st < pl.stages(); ++st) {
    s.stage_ops(st) = lists[st];
  }
  return simulate(s, costs);
}

}  // namespace

TEST_CASE("op_ready: the clocks that decide while they run agree with the timing engine",
          "[op_ready]") {
  // docs/model.md §3 lists the places that keep their own clock. The zero-bubble greedy's and
  // the authors' ported heuristics' own times must be the engine's for the orders they build
  // (the others are pinned elsewhere: the exact search's in test_zb_exact, simulate_dynamic's
  // in test_dynamic_policy, simulate_links' with free links in test_link_timing).
  for (const placement& pl : {placement::sequential(4), placement::v_shape(3)}) {
    for (const std::uint32_t m : {3u, 8u}) {
      for (const double limit : {1.0, 1.5, 2.0}) {
        INFO("v " << pl.chunks() << " m " << m << " limit " << limit << "·p·M_B");
        const shaped_cost_model costs = clock_costs(pl).for_shape(pl.stages(), pl.chunks(), "test");
        const shaped_memory_model mem =
            memory_model::uniform(1.0, 0.4).for_shape(pl.stages(), pl.chunks(), "test");
        const detail::greedy_problem pr(pl, m, costs, mem,
                                        std::vector<double>(pl.stages(), limit * pl.stages()));
        detail::greedy_scheduler gs(pr);
        for (unsigned i = 0; i < (pl.chunks() > 1 ? 64u : 16u); ++i) {
          const detail::greedy_run run = gs.run(detail::greedy_flags{
              zb_choices::from_index(i).b_first_when_ahead, zb_choices::from_index(i).wait_for_b,
              zb_choices::from_index(i).fill_small_gaps, zb_choices::from_index(i).bubble_rule,
              zb_choices::from_index(i).later_chunk_first,
              zb_choices::from_index(i).wait_for_later_chunk});
          REQUIRE(run.ok);
          const simulation_result sim = engine_times(pl, m, run.ops, costs);
          REQUIRE(sim.completed());
          CHECK(run.max_span == Approx(sim.span(sim.max_span_stage)).epsilon(1e-12));
          CHECK(run.makespan == Approx(sim.makespan).epsilon(1e-12));
        }
        if (pl.chunks() == 1) {
          for (unsigned i = 0; i < 8; ++i) {
            const detail::published_order o =
                detail::published_zb_order(pr, detail::published_zb_combination(i));
            if (!o.ok) {
              continue;  // where the authors' code raises
            }
            // Their span: each stage from its first F's start to its last W's end.
            const simulation_result sim = engine_times(pl, m, o.ops, costs);
            REQUIRE(sim.completed());
            CHECK(o.span == Approx(sim.span(sim.max_span_stage)).epsilon(1e-12));
          }
        }
      }
    }
  }
}
