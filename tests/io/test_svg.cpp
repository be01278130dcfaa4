#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/svg.hpp>

#include "support/pair_schedule.hpp"
#include "support/text.hpp"

using namespace pipesched;
using test_text::check_xml;
using test_text::count;

TEST_CASE("svg: one rect per op, legend, title, well-formed", "[io][svg]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  const timeline tl = cost_timeline(s);
  const std::string svg = to_svg(s, tl);
  CHECK(check_xml(svg).empty());
  CHECK(count(svg, "class=\"op\"") == s.size());
  CHECK(count(svg, "<rect class=\"legend\"") == 3);  // F, B, W
  CHECK(count(svg, "class=\"row\"") == 4);
  CHECK(svg.find("zb-h1: p=4 m=8 v=1, makespan 27 cost units, bubble rate 11.1%") !=
        std::string::npos);
  CHECK(svg.rfind("</svg>\n") == svg.size() - 7);
  CHECK(to_svg(s, tl) == svg);  // deterministic
  // Unit ops are 960/27 = 35.6 px wide: every micro-batch number fits.
  CHECK(count(svg, "fill=\"#ffffff\">") == s.size());
}

TEST_CASE("svg: memory curves, chunk shades and escaping", "[io][svg]") {
  schedule s = generate(one_f_one_b{}, 2, 2);
  s.set_name("a<b & \"c\"");
  const timeline tl = cost_timeline(s);
  const auto mem = memory_curves(s, tl, memory_model::uniform(1, 0.5));
  const std::string svg = to_svg(s, tl, {.memory = &mem});
  CHECK(check_xml(svg).empty());
  CHECK(count(svg, "class=\"memory\"") == 2);
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot;") != std::string::npos);
  CHECK(svg.find(">peak 2<") != std::string::npos);
  CHECK(count(svg, "<rect class=\"legend\"") == 2);  // F, BW
  // A higher chunk is a lighter shade of its kind: interleaved p=2 m=2 v=2 has 4 forwards of
  // each local chunk.
  const schedule il = generate(interleaved_1f1b{}, 2, 2, 2);
  const std::string isvg = to_svg(il, cost_timeline(il));
  CHECK(count(isvg, "class=\"op\"") == il.size());
  CHECK(count(isvg, "fill=\"#3b75af\" stroke") == 4);  // F, chunk 0
  CHECK(count(isvg, "fill=\"#93b3d3\" stroke") == 4);  // F, chunk 1
  // Numbers: whole ones bare, others to two decimals (ZB-H1 p=4 m=8: 960/27 px per op), no -0.
  const schedule h1 = generate(zb_h1{}, 4, 8);
  const std::string hsvg = to_svg(h1, cost_timeline(h1));
  CHECK(hsvg.find("x=\"72\" y=\"44\"") != std::string::npos);
  CHECK(hsvg.find("width=\"35.56\"") != std::string::npos);
  CHECK(hsvg.find("=\"-0") == std::string::npos);
  CHECK(hsvg.find(".00\"") == std::string::npos);
}

TEST_CASE("svg: narrow blocks drop their labels", "[io][svg]") {
  const schedule s = generate(one_f_one_b{}, 4, 64);
  const timeline tl = cost_timeline(s);
  const std::string svg = to_svg(s, tl, {.plot_width = 300});
  CHECK(check_xml(svg).empty());
  CHECK(count(svg, "class=\"op\"") == s.size());
  CHECK(count(svg, "fill=\"#ffffff\">") < s.size());
}

TEST_CASE("svg: an overlapped pair is one framed slot, an op in each half", "[io][svg][overlap]") {
  const schedule s = test_support::pair_schedule();
  const std::string svg = to_svg(s, cost_timeline(s, cost_model::unit()));
  CHECK(check_xml(svg).empty());
  CHECK(count(svg, "class=\"op\"") == s.size());  // still one rect per op
  CHECK(count(svg, "<g class=\"pair\"") == 2);
  CHECK(count(svg, "<rect class=\"pair-frame\"") == 2);
  CHECK(count(svg, "class=\"legend pair-frame\"") == 1);
  CHECK(svg.find(">overlapped pair</text>") != std::string::npos);
  // Rows of 24 px: the four ops of the two pairs are 12 px high, the other eight 24 px.
  CHECK(count(svg, "class=\"op\" x=") == 12);
  CHECK(count(svg, "height=\"12\" fill=") == 4);
  CHECK(count(svg, "height=\"24\" fill=\"#") == 8 + 2);  // and the two row backgrounds
  // Stage 0's pair: F2 over BW0 in the slot [5, 8] (960 / 15 = 64 px per unit, left 72).
  CHECK(svg.find("<title>stage 0 ops 2 and 3: F2 overlapped with BW0 [5, 8]</title>") !=
        std::string::npos);
  const std::size_t f2 = svg.find("<title>stage 0 op 2: F2 chunk 0 [5, 8]");
  const std::size_t bw0 = svg.find("<title>stage 0 op 3: BW0 chunk 0 [5, 8]");
  REQUIRE(f2 != std::string::npos);
  REQUIRE(bw0 != std::string::npos);
  const std::string f2_rect = svg.substr(svg.rfind("<rect", f2), f2 - svg.rfind("<rect", f2));
  const std::string bw0_rect = svg.substr(svg.rfind("<rect", bw0), bw0 - svg.rfind("<rect", bw0));
  CHECK(f2_rect.find("x=\"392\" y=\"44\" width=\"192\" height=\"12\"") != std::string::npos);
  CHECK(bw0_rect.find("x=\"392\" y=\"56\" width=\"192\" height=\"12\"") != std::string::npos);
  // No pair, no pair legend.
  CHECK(to_svg(generate(zb_h1{}, 2, 2), cost_timeline(generate(zb_h1{}, 2, 2)))
            .find("overlapped pair") == std::string::npos);
}
