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

// A time or a share too small (or too large) for its fixed decimals in the unit or the digits
// that show it: no value other than 0 reads as "0.000 s" or "0 %", none prints 300 digits.
TEST_CASE("plan text: seconds and percentages never round a value to 0", "[io][plan]") {
  CHECK(detail::seconds(0.380) == "0.380 s");
  CHECK(detail::seconds(0.0) == "0.000 s");
  CHECK(detail::seconds(0.0004) == "400 us");
  CHECK(detail::seconds(0.0012, 4) == "0.0012 s");
  CHECK(detail::seconds(3.5e-6) == "3.5 us");
  CHECK(detail::seconds(2e-9) == "2 ns");
  CHECK(detail::seconds(1e-300) == "1e-300 s");
  CHECK(detail::seconds(1.4e298) == "1.4e+298 s");
  CHECK(detail::seconds(1.80478, 4) == "1.8048 s");
  CHECK(detail::seconds(0.00004, 4) == "40 us");
  CHECK(detail::percent(0.406) == "40.6 %");
  CHECK(detail::percent(0.0) == "0.0 %");
  CHECK(detail::percent(-1.78e-16, 1, 1e-12) == "0.0 %");  // rounding noise of a bubble rate
  CHECK(detail::percent(1e-290) == "1e-288 %");
  CHECK(detail::percent(1.2e-6) == "0.00012 %");
  CHECK(detail::percent(0.004, 0) == "0.4 %");
  CHECK(detail::percent(0.9, 0) == "90 %");
  CHECK(detail::flops(1e300) == "1e+300 FLOP/s");
  CHECK(detail::flops(0.001) == "0.001 FLOP/s");
  CHECK(detail::gib(1e300) == "9.31e+290 GiB");
  training_job job = test_plan::small_job();
  job.cluster.achieved_fraction = 0.001;
  job.cluster.usable_fraction = 0.004;
  plan_result none;
  none.smallest_need_bytes = 1.0;
  const std::string t = plan_text(job, none);
  CHECK_THAT(t, Catch::Contains("(0.4 % of 80.0 GiB)"));
  CHECK_THAT(t, Catch::Contains("achieved 0.1 % of the 989 TFLOP/s peak"));
}
