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

TEST_CASE("plan text: nothing fits, the baseline is still shown", "[io][plan]") {
  plan_result none;
  none.smallest_need_bytes = 100.0 * 1024 * 1024 * 1024;
  none.baseline = test_plan::small_plan().plans.front();
  none.baseline->fits = false;
  const std::string t = plan_text(test_plan::small_job(), none);
  CHECK_THAT(t, Catch::Contains("no plan fits: the smallest need found is 100.0 GiB per GPU"));
  CHECK(test_text::count(t, "base ") == 1);
  CHECK_THAT(t, Catch::Contains("(does not fit)"));
}

TEST_CASE("plan text: sizes and FLOP/s in the unit that fits", "[io][plan]") {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(detail::gib(0.0) == "0.0 GiB");
  CHECK(detail::gib(72.0 * gib) == "72.0 GiB");
  CHECK(detail::gib(0.05 * gib) == "0.1 GiB");
  CHECK(detail::gib(0.04 * gib) == "41.0 MiB");
  CHECK(detail::gib(2048.0) == "2.0 KiB");
  CHECK(detail::gib(1.0) == "1 B");
  CHECK(detail::gib(0.85) == "0.85 B");  // 1 byte at 85 % usable: never "0.0 GiB"
  CHECK(detail::flops(989.4e12) == "989 TFLOP/s");
  CHECK(detail::flops(1978.9e12) == "1979 TFLOP/s");
  CHECK(detail::flops(362e12) == "362 TFLOP/s");
  CHECK(detail::flops(1e3) == "1.00 kFLOP/s");
  CHECK(detail::flops(15.5e9) == "15.5 GFLOP/s");
  CHECK(detail::flops(5.0) == "5.00 FLOP/s");
  CHECK(detail::flops(0.0) == "0 FLOP/s");
  // The table's TFLOP/s column: one decimal, or a tiny rate in the unit that fits, never "0.0".
  CHECK(detail::tflops_cell(412.34) == "412.3");
  CHECK(detail::tflops_cell(0.05) == "0.1");
  CHECK(detail::tflops_cell(0.0) == "0.0");
  CHECK(detail::tflops_cell(396e-12) == "396 FLOP/s");
  CHECK(detail::tflops_cell(0.0123) == "12.3 GFLOP/s");
  training_job job = test_plan::small_job();
  job.cluster.peak_flops_bf16 = 1e3;
  job.cluster.memory_bytes = 1.0;
  plan_result none;
  none.smallest_need_bytes = 100.0 * gib;
  const std::string t = plan_text(job, none);
  CHECK_THAT(t, Catch::Contains("of the 1.00 kFLOP/s peak"));
  CHECK_THAT(t, Catch::Contains("usable memory 0.9 B per GPU (90 % of 1 B)"));
  CHECK_THAT(t, Catch::Contains("100.0 GiB per GPU, 0.9 B usable"));
}
