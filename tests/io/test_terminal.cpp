#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/terminal.hpp>

using namespace pipesched;

namespace {
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) {
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("terminal: golden 1F1B p=2 m=2 on unit steps", "[io][terminal]") {
  CHECK(render_schedule(generate(one_f_one_b{}, 2, 2), {.width = 80}) ==
        "1f1b  p=2 m=2 v=1  makespan 6  bubble rate 33.3%\n"
        "stage 0 |F0  F1  ....BW0 ....BW1 |\n"
        "stage 1 |....F0  BW0 F1  BW1 ....|\n"
        "         0       2       4       6\n");
}

TEST_CASE("terminal: cost timeline, BW twice as wide as F", "[io][terminal]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const std::string out =
      render_timeline(s, cost_timeline(s), {.width = 80, .title = false, .axis = false});
  CHECK(out ==
        "stage 0 |F0  F1  ........BW0     ....BW1     |\n"
        "stage 1 |....F0  BW0     F1  BW1     ........|\n");
}

TEST_CASE("terminal: scaled to the width", "[io][terminal]") {
  const schedule s = generate(zb_h1{}, 4, 32);
  const std::string out = render_schedule(s, {.width = 60});
  std::size_t line_start = 0;
  for (std::size_t pos = out.find('\n'); pos != std::string::npos; pos = out.find('\n', pos + 1)) {
    CHECK(pos - line_start <= 60);
    line_start = pos + 1;
  }
  CHECK(count(out, "stage ") == 4);
}

TEST_CASE("terminal: colours and $COLUMNS", "[io][terminal]") {
  const schedule s = generate(one_f_one_b{}, 2, 1);
  const std::string out = render_schedule(s, {.width = 80, .color = true});
  CHECK(count(out, "\x1b[") > 0);
  CHECK(out.find("F0") != std::string::npos);
  CHECK(detail::terminal_width(37) == 37);
}
