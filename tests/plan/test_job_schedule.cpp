#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/plan/job_schedule.hpp>

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
