#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/plan/plan_search.hpp>
#include <pipesched/plan/planner.hpp>

#include "support/plan_fixture.hpp"

using namespace pipesched;

namespace {

plan_options plan_search_options(bool prune) {
  plan_options o;
  o.threads = 1;
  o.top = 3;
  o.search_evaluations = 8;
  o.prune = prune;
  return o;
}

}  // namespace

// The bounds only skip candidates that cannot fit or cannot enter the plans kept: the pruned
// search keeps exactly the plans the exhaustive one keeps.
TEST_CASE("plan search: the pruned search returns the exhaustive search's plans",
          "[plan][search]") {
  std::mt19937 rng(20261204);
  int pruned_some = 0;
  for (int round = 0; round < 6; ++round) {
    const training_job job = test_plan::random_small_job(rng);
    INFO("round " << round << ": " << job.model.layers << " layers, h " << job.model.hidden << ", "
                  << job.gpus << " GPUs, memory " << job.cluster.memory_bytes);
    const plan_result pruned = plan(job, plan_search_options(true));
    const plan_result all = plan(job, plan_search_options(false));
    CHECK(all.stats.pruned_memory == 0);
    CHECK(all.stats.pruned_time == 0);
    CHECK(all.stats.evaluated + all.stats.failed == all.stats.candidates);
    pruned_some += pruned.stats.pruned_memory + pruned.stats.pruned_time > 0 ? 1 : 0;
    const auto fitting = [](const plan_result& r) {
      std::vector<const plan_entry*> out;
      for (const plan_entry& e : r.plans) {
        if (e.fits) {
          out.push_back(&e);
        }
      }
      return out;
    };
    const auto a = fitting(pruned);
    const auto b = fitting(all);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO(detail::plan_label(a[i]->choice) << " vs " << detail::plan_label(b[i]->choice));
      CHECK(a[i]->choice == b[i]->choice);
      CHECK(a[i]->step_time_s == b[i]->step_time_s);
      CHECK(a[i]->sched == b[i]->sched);
    }
  }
  CHECK(pruned_some > 0);  // the bounds did skip candidates somewhere
}

TEST_CASE("plan search: a stage over the limit gives up the layers its excess is worth",
          "[plan][search]") {
  plan_entry e;
  e.stages.resize(3);
  e.stages[0].layers = 4;
  e.stages[0].total = 10.0;  // 2.5 a layer, 2 over 8: one layer
  e.stages[1].layers = 4;
  e.stages[1].total = 6.0;  // within
  e.stages[2].layers = 2;
  e.stages[2].total = 40.0;  // 20 a layer, 32 over: every layer
  CHECK(detail::memory_caps(e, 8.0) == std::vector<std::uint32_t>{3, 4, 0});
  e.stages[0].total = 12.0;  // 3 a layer, 4 over: two layers
  CHECK(detail::memory_caps(e, 8.0)[0] == 2);
}

TEST_CASE("plan search: the re-partition keeps each stage within the caps its memory gives",
          "[plan][search]") {
  const training_job job = test_plan::llama3_8b_job(4, 4096, 16);
  const plan_layout lay{1, 4, 1, 1, 1, 16, false};
  const generator_entry& gen = default_registry().at("1f1b");
  const auto pl = detail::placement_for(gen, 4, 1);
  REQUIRE(pl);
  const partition_spec balanced{};
  const auto first = detail::partition_for(job, lay, recompute_kind::none, *pl, balanced);
  REQUIRE(first);
  // The first stage (embedding, the most in flight under 1F1B) is capped one layer below its
  // balanced share: the layers move to the stages after it, the total kept.
  std::vector<std::uint32_t> caps(first->size(), job.model.layers);
  caps[0] = (*first)[0] - 1;
  const auto again = detail::partition_for(job, lay, recompute_kind::none, *pl, balanced, caps);
  REQUIRE(again);
  std::uint32_t total = 0;
  for (std::size_t s = 0; s < again->size(); ++s) {
    CHECK((*again)[s] <= caps[s]);
    total += (*again)[s];
  }
  CHECK(total == job.model.layers);
  CHECK((*again)[0] == caps[0]);
}
