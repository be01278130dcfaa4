#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/io/distribution_svg.hpp>
#include <pipesched/ir/error.hpp>

#include "support/text.hpp"

using namespace pipesched;
using test_text::check_xml;
using test_text::count;

namespace {

// Text between tags never holds a raw '&' that is not an entity.
bool entities_ok(const std::string& s) {
  for (std::size_t i = s.find('&'); i != std::string::npos; i = s.find('&', i + 1)) {
    const std::size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 5) {
      return false;
    }
  }
  return true;
}

std::vector<double> ramp(std::size_t n, double from, double step) {
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(from + step * static_cast<double>((i * 37) % n));  // not sorted
  }
  return v;
}
}  // namespace

TEST_CASE("distribution svg: one CDF path and bars per series, legend with the numbers",
          "[io][svg]") {
  const std::vector<distribution_series> in = {{"zb-h1", ramp(200, 100.0, 0.05)},
                                               {"1f1b <&>", ramp(50, 104.0, 0.1)}};
  const std::string svg = to_distribution_svg(in);
  CHECK(check_xml(svg).empty());
  CHECK(entities_ok(svg));
  CHECK(count(svg, "<path class=\"cdf\"") == 2);
  CHECK(count(svg, "<path class=\"cdf\" data-series=\"0\"") == 1);
  CHECK(count(svg, "<path class=\"cdf\" data-series=\"1\"") == 1);
  CHECK(count(svg, "<rect class=\"bar\" data-series=\"0\"") > 0);
  CHECK(count(svg, "<rect class=\"bar\" data-series=\"1\"") > 0);
  CHECK(count(svg, "<g class=\"legend-entry\"") == 2);
  for (const auto& s : in) {
    const sample_stats st = stats_of(s.samples);
    const std::string legend = fmt::format("mean {:.6g}, p50 {:.6g}, p99 {:.6g} ({} samples)",
                                           st.mean, st.p50, st.p99, st.count);
    CHECK(svg.find(legend) != std::string::npos);
  }
  CHECK(svg.find("1f1b &lt;&amp;&gt;: mean") != std::string::npos);  // names are escaped
  // Axes: the unit, tick labels on the time axis, both panels' y labels.
  CHECK(svg.find("iteration time (time units)") != std::string::npos);
  CHECK(svg.find(">samples (%)<") != std::string::npos);
  CHECK(svg.find(">cumulative (%)<") != std::string::npos);
  CHECK(svg.find(">100<") != std::string::npos);  // 100 % on the CDF axis
  CHECK(svg.find(">104<") != std::string::npos);  // a time tick
  // Deterministic: the same input gives the same bytes.
  CHECK(to_distribution_svg(in) == svg);
}

TEST_CASE("distribution svg: each series' bars hold all its samples", "[io][svg]") {
  distribution_svg_options o;
  o.bins = 4;
  const std::string svg = to_distribution_svg({{"a", {1.0, 2.0, 3.0, 4.0, 4.0}}}, o);
  CHECK(check_xml(svg).empty());
  CHECK(count(svg, "<rect class=\"bar\"") == 4);
  CHECK(svg.find("<title>a: [3.25, 4) 40%</title>") != std::string::npos);
  // The CDF climbs once per distinct value: 4 steps (H..V) for 5 samples.
  const std::size_t at = svg.find("<path class=\"cdf\"");
  const std::string path = svg.substr(at, svg.find("/>", at) - at);
  CHECK(count(path, "V") == 4);
}

TEST_CASE("distribution svg: empty input, an empty series, a single sample", "[io][svg]") {
  const std::string none = to_distribution_svg({});
  CHECK(check_xml(none).empty());
  CHECK(none.find(">no samples<") != std::string::npos);
  CHECK(count(none, "class=\"cdf\"") == 0);

  const std::string empty = to_distribution_svg({{"x", {}}});
  CHECK(check_xml(empty).empty());
  CHECK(empty.find("x: no samples") != std::string::npos);

  const std::string one = to_distribution_svg({{"one", {42.0}}});
  CHECK(check_xml(one).empty());
  CHECK(one.find("nan\"") == std::string::npos);  // no NaN coordinate
  CHECK(one.find("inf\"") == std::string::npos);
  CHECK(count(one, "<rect class=\"bar\"") == 1);
  CHECK(count(one, "<path class=\"cdf\"") == 1);
  CHECK(one.find("one: mean 42, p50 42, p99 42 (1 samples)") != std::string::npos);
  CHECK(one.find(">42<") != std::string::npos);  // the value is a tick of its ±1 % window

  // Equal samples (no noise): one bar of 100 %.
  const std::string flat = to_distribution_svg({{"flat", std::vector<double>(10, 0.0)}});
  CHECK(check_xml(flat).empty());
  CHECK(flat.find(" 100%</title>") != std::string::npos);
}

TEST_CASE("distribution svg: NaN and infinity are refused, naming the series and sample",
          "[io][svg]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<distribution_series> with_nan = {{"ok", {1.0}}, {"zb-v", {1.0, 2.0, nan}}};
  CHECK_THROWS_AS(to_distribution_svg(with_nan), pipesched::invalid_argument);
  CHECK_THROWS_WITH(to_distribution_svg(with_nan),
                    Catch::Matchers::Contains("series \"zb-v\" sample 2 is nan") &&
                        Catch::Matchers::Contains("must be finite"));
  CHECK_THROWS_AS(to_distribution_svg({{"a", {inf}}}), pipesched::invalid_argument);
  CHECK_THROWS_WITH(to_distribution_svg({{"a", {inf}}}),
                    Catch::Matchers::Contains("series \"a\" sample 0 is inf"));
  CHECK_THROWS_WITH(to_distribution_svg({{"a", {-inf}}}),
                    Catch::Matchers::Contains("sample 0 is -inf"));
  distribution_svg_options bad;
  bad.plot_width = 0.0;
  CHECK_THROWS_AS(to_distribution_svg({{"a", {1.0}}}, bad), pipesched::invalid_argument);
}
