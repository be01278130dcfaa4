#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/plan_svg.hpp>

#include "support/plan_fixture.hpp"
#include "support/text.hpp"

using namespace pipesched;

TEST_CASE("plan svg: the frontier, the memory wall, the best plan and the baseline", "[io][plan]") {
  const plan_result& r = test_plan::small_plan();
  const std::string svg = plan_frontier_svg(test_plan::small_job(), r);
  CHECK(test_text::check_xml(svg).empty());
  CHECK(test_text::count(svg, "<circle") >= r.frontier.size() + 2);
  CHECK_THAT(svg, Catch::Contains("usable 72.0 GiB"));
  CHECK_THAT(svg, Catch::Contains("best: "));
  CHECK_THAT(svg, Catch::Contains("baseline: "));
  CHECK_THAT(svg, Catch::Contains("peak memory per GPU (GiB)"));
  CHECK_THAT(svg, Catch::Contains("step time (s)"));
  // Nothing evaluated (every candidate over the memory by its bound): a picture of the reason.
  plan_result empty;
  empty.smallest_need_bytes = 100.0 * 1024 * 1024 * 1024;
  const std::string none = plan_frontier_svg(test_plan::small_job(), empty);
  CHECK(test_text::check_xml(none).empty());
  CHECK_THAT(none, Catch::Contains("no plan fits: the smallest need found is 100.0 GiB per GPU, "
                                   "72.0 GiB usable"));
}
