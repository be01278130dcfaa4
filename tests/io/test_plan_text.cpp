#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/plan_text.hpp>

#include "support/plan_fixture.hpp"
#include "support/text.hpp"

using namespace pipesched;

TEST_CASE("plan text: every number carries its unit", "[io][plan]") {
  const plan_result& r = test_plan::small_plan();
  const std::string t = plan_text(test_plan::small_job(), r);
  CHECK_THAT(t, Catch::Contains("llama3-8b on 64 x h100-sxm-80gb, 8192-token sequences, 64 "
                                "sequences (524 k tokens) per step"));
  CHECK_THAT(t, Catch::Contains("usable memory 72.0 GiB per GPU (90 % of 80.0 GiB)"));
  // One row per plan and one for the baseline, each with seconds, tokens/s, % and GiB.
  CHECK(test_text::count(t, " s ") >= r.plans.size() + 1);
  CHECK(test_text::count(t, " tok/s") == r.plans.size() + 1);
  CHECK(test_text::count(t, "base ") == 1);
  CHECK_THAT(t, Catch::Contains("GPUs' worth of time recovered at 64 GPUs"));
  CHECK_THAT(t, Catch::Contains("plan 1 per stage (per GPU; step "));
  CHECK(test_text::count(t, " GiB") >= 5 * r.plans.front().stages.size());
}

TEST_CASE("plan text: nothing fits", "[io][plan]") {
  plan_result none;
  none.smallest_need_bytes = 100.0 * 1024 * 1024 * 1024;
  const std::string t = plan_text(test_plan::small_job(), none);
  CHECK_THAT(t, Catch::Contains("no plan fits: the smallest need found is 100.0 GiB per GPU, "
                                "72.0 GiB usable"));
}
