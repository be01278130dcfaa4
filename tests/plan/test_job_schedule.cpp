#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/plan/job_schedule.hpp>

#include "support/plan_fixture.hpp"

using namespace pipesched;

TEST_CASE("job schedule: each generator's placement, or its refusal", "[plan][job_schedule]") {
  const generator_registry& reg = default_registry();
  const auto one = detail::placement_for(reg.at("1f1b"), 4, 1);
  REQUIRE(one);
  CHECK(*one == placement::sequential(4));
  const auto vee = detail::placement_for(reg.at("zb-v"), 4, 2);
  REQUIRE(vee);
  CHECK(*vee == placement::v_shape(4));
  const auto loop = detail::placement_for(reg.at("interleaved-1f1b"), 4, 2);
  REQUIRE(loop);
  CHECK(*loop == placement::loop(4, 2));
  std::string why;
  CHECK_FALSE(detail::placement_for(reg.at("1f1b"), 4, 2, &why));
  CHECK_FALSE(why.empty());
}

TEST_CASE("job schedule: the partition weighs a layer, the embedding and the head",
          "[plan][job_schedule]") {
  job_op_times ot;
  ot.layer = op_costs{1.0, 2.0, 1.5};
  ot.layer_recompute = 0.5;
  ot.embedding.forward[time_kind::communication] = 0.25;
  ot.head.forward[time_kind::gemm] = 1.0;
  ot.head.backward_input[time_kind::gemm] = 1.0;
  ot.head.backward_weight[time_kind::gemm] = 0.5;
  ot.head.backward_weight[time_kind::memory_bound] = 0.5;
  const partition_weights w = detail::partition_weights_of(ot, 4, {2, 2, 2, 2});
  CHECK(w.layer_time == 5.0);
  CHECK(w.fixed_time == std::vector<double>{0.25, 0.0, 0.0, 3.0});
  CHECK(w.max_stage_layers == std::vector<std::uint32_t>{2, 2, 2, 2});
  const partition_weights one = detail::partition_weights_of(ot, 1);
  CHECK(one.fixed_time == std::vector<double>{3.25});
}

TEST_CASE("job schedule: dualpipe in the planner: two routes, 2x parameters, PP + 1 activations",
          "[plan][job_schedule][dualpipe]") {
  const generator_registry& reg = default_registry();
  const auto dual = detail::placement_for(reg.at("dualpipe"), 4, 2);
  REQUIRE(dual);
  CHECK(*dual == placement::dual(4));
  training_job job = test_plan::llama3_8b_job(4, 4096, 16);
  plan_layout l;
  l.pp = 4;
  l.microbatches = 16;
  const std::vector<std::uint32_t> route = even_partition(32, 4);
  std::vector<std::uint32_t> twice = route;
  twice.insert(twice.end(), route.begin(), route.end());
  const job_costs ones =
      make_job_costs(job, l, recompute_kind::none, route, placement::sequential(4));
  const plan_entry f1b = detail::evaluate_choice(
      job, plan_choice{l, "1f1b", recompute_kind::none, route, 0}, ones, reg, reg.at("1f1b"), 0);
  l.chunks = 2;
  const job_costs duals = make_job_costs(job, l, recompute_kind::none, twice, *dual);
  const plan_entry dp =
      detail::evaluate_choice(job, plan_choice{l, "dualpipe", recompute_kind::none, twice, 0},
                              duals, reg, reg.at("dualpipe"), 0);
  // Parameters: each rank two stages, 2x 1F1B's over the pipeline.
  double p1 = 0.0, p2 = 0.0;
  for (stage_index s = 0; s < 4; ++s) {
    p1 += f1b.stages[s].parameters.total();
    p2 += dp.stages[s].parameters.total();
    CHECK(dp.stages[s].chunks.size() == 2);
  }
  CHECK(p2 == Approx(2 * p1));
  // Activations: the middle ranks (chunks of 8 layers each, no end) peak at PP + 1 chunks'.
  const double chunk = duals.memory.for_shape(4, 2, "test").at(1, 0).activation;
  const double middle = std::max(dp.stages[1].activations, dp.stages[2].activations);
  CHECK(middle == Approx(5 * chunk));
  // Each micro-batch goes down one route: the step's model FLOPs are 1F1B's.
  CHECK(dp.flops_per_iteration == Approx(f1b.flops_per_iteration));
  CHECK(dp.makespan_s > 0.0);
}

// With full recompute a 1F1B order (BW ops) is checked with the fused sizes, the inputs and
// one layer rebuilt at a time, and a zero-bubble order (W ops of its own) with every layer's
// W operands kept until its W.
TEST_CASE("job schedule: full recompute's memory follows whether the order runs W on its own",
          "[plan][job_schedule]") {
  const training_job job = test_plan::llama3_8b_job(8, 4096, 16);
  auto one = [&](const char* schedule, recompute_kind r) {
    plan_options o;
    o.fixed.tp = 4;
    o.fixed.pp = 2;
    o.fixed.schedule = schedule;
    o.fixed.micro_batch = 1;
    o.fixed.recompute = r;
    o.threads = 1;
    const plan_result res = plan(job, o);
    REQUIRE(res.plans.size() == 1);
    return res.plans.front();
  };
  const plan_entry bw = one("1f1b", recompute_kind::full);
  const plan_entry w = one("zb-h1", recompute_kind::full);
  const plan_entry sel = one("1f1b", recompute_kind::selective);
  CHECK_FALSE(detail::runs_separate_w(bw.sched));
  CHECK(detail::runs_separate_w(w.sched));
  const job_costs jc = make_job_costs(job, bw.choice.layout, recompute_kind::full,
                                      bw.choice.partition, bw.sched.layout());
  CHECK(&detail::memory_for(jc, bw.sched) == &jc.fused_memory);
  CHECK(&detail::memory_for(jc, w.sched) == &jc.memory);
  const memory_report fused = check_memory(bw.sched, jc.fused_memory);
  const memory_report split = check_memory(bw.sched, jc.memory);
  for (stage_index s = 0; s < 2; ++s) {
    CHECK(bw.stages[s].total == Approx(fused.peak_memory(s)));
    CHECK(fused.peak_memory(s) < split.peak_memory(s));
    // Full recompute keeps less than selective on the same order.
    CHECK(bw.stages[s].activations < sel.stages[s].activations);
  }
}
