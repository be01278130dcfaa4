#include <catch2/catch.hpp>

#include <pipesched/plan/plan_types.hpp>

using namespace pipesched;

TEST_CASE("plan types: recompute kinds by name, one message for any other", "[plan][types]") {
  CHECK(recompute_kind_named("none", "--recompute:") == recompute_kind::none);
  CHECK(recompute_kind_named("selective", "--recompute:") == recompute_kind::selective);
  CHECK(recompute_kind_named("full", "--recompute:") == recompute_kind::full);
  CHECK_THROWS_WITH(recompute_kind_named("some", "--recompute:"),
                    "--recompute: must be none, selective or full, not \"some\"");
  CHECK_THROWS_AS(recompute_kind_named("", "recompute:"), invalid_argument);
}

TEST_CASE("plan types: a label names every choice", "[plan][types]") {
  plan_choice c;
  c.layout = plan_layout{8, 16, 4, 2, 1, 16, true};
  c.schedule = "interleaved-1f1b";
  c.recompute = recompute_kind::selective;
  CHECK(detail::plan_label(c) == "TP8 PP16 v2 b1 m16 interleaved-1f1b selective SP");
  plan_entry base;
  base.step_time_s = 2.0;
  plan_entry better;
  better.step_time_s = 1.5;
  const plan_comparison cmp = compare_plans(better, base, 64);
  CHECK(cmp.speedup == Approx(2.0 / 1.5));
  CHECK(cmp.time_saved == Approx(0.25));
  CHECK(cmp.gpus_recovered == Approx(16.0));
}
