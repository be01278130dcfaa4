#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <random>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/terminal.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/pair_schedule.hpp"
#include "support/text.hpp"

using namespace pipesched;
using test_text::count;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

std::string strip_ansi(const std::string& s) {
  return std::regex_replace(s, std::regex("\x1b\\[[0-9;]*m"), "");
}

/// What a reader gets from a rendered picture, found by parsing every line of it.
struct reading {
  std::vector<std::pair<std::size_t, std::string>> ops;  ///< (stage, label), keys resolved
  std::size_t windows = 0;                               ///< blocks of stage rows
  std::size_t keys = 0;                                  ///< ops drawn as a key
  std::size_t longest_line = 0;
  std::vector<std::string> problems;
};

/// Parses `out` (no colour): the title (on more lines when narrow), window headers "steps 0 to 13
/// (1 of 3)" whose ranges follow on from each other, stage rows "stage s |...|" whose cells are
/// full labels (kind, micro-batch, optional chunk), keys, spaces and dots, axis lines, and key
/// legends. A key must be explained by the legend of its window, each exactly once.
reading read_picture(const std::string& out, std::size_t stages, bool title = true) {
  static const std::regex header(R"(^(steps|time) (\S+) to (\S+) \((\d+) of (\d+)\)$)");
  static const std::regex row_re(R"(^ *stage (\d+) \|(.*)\|$)");
  static const std::regex label_re(R"(^(SEND_F|RECV_F|SEND_B|RECV_B|BW|F|B|W)\d+(\.\d+)?)");
  static const std::regex legend_re(R"(^stage (\d+) keys:((?: [a-zA-Z]=\S+)+)$)");
  static const std::regex legend_more(R"(^ +((?: ?[a-zA-Z]=\S+)+)$)");
  static const std::regex axis_re(R"(^ +[0-9][0-9 .e+-]*$)");
  reading r;
  // Keys of the current window: (stage, key) -> used in a row, and -> its label.
  std::map<std::pair<std::size_t, char>, int> used;
  std::map<std::pair<std::size_t, char>, std::string> legend;
  std::size_t rows_in_window = 0;
  std::size_t legend_stage = 0;
  std::string last_end = "0";
  std::size_t expected_windows = 0;
  const auto close_window = [&] {
    for (const auto& [k, n] : used) {
      const auto it = legend.find(k);
      if (it == legend.end()) {
        r.problems.push_back("key '" + std::string(1, k.second) + "' of stage " +
                             std::to_string(k.first) + " not in the legend");
      } else {
        r.ops.emplace_back(k.first, it->second);
        ++r.keys;
      }
      if (n != 1) {
        r.problems.push_back("key used twice in one row");
      }
    }
    for (const auto& [k, label] : legend) {
      if (used.find(k) == used.end()) {
        r.problems.push_back("legend entry " + label + " explains no key");
      }
    }
    if (rows_in_window != 0 && rows_in_window != stages) {
      r.problems.push_back("a window with " + std::to_string(rows_in_window) + " rows");
    }
    used.clear();
    legend.clear();
    rows_in_window = 0;
  };
  const auto add_legend = [&](std::size_t stage, const std::string& entries) {
    std::istringstream in(entries);
    for (std::string e; in >> e;) {
      if (!legend.emplace(std::pair{stage, e[0]}, e.substr(2)).second) {
        r.problems.push_back("key explained twice: " + e);
      }
    }
  };
  const std::vector<std::string> lines = lines_of(out);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    r.longest_line = std::max(r.longest_line, line.size());
    std::smatch m;
    // The title: one line, or more when it is longer than the width.
    if (title && r.windows == 0 && expected_windows == 0 &&
        (line.find("  p=") != std::string::npos || line.rfind("makespan ", 0) == 0 ||
         line.rfind("bubble rate ", 0) == 0 ||
         std::regex_match(line, std::regex("[0-9.e+]+ steps( +\\(one per op, untimed\\))?")) ||
         line == "(one per op, untimed)")) {
      continue;
    }
    if (line.empty()) {
      continue;
    }
    if (std::regex_match(line, m, header)) {
      close_window();
      if (m[2].str() != last_end) {
        r.problems.push_back("window starts at " + m[2].str() + ", previous ended at " + last_end);
      }
      last_end = m[3].str();
      if (std::stoul(m[4].str()) != r.windows + 1) {
        r.problems.push_back("window number " + m[4].str());
      }
      expected_windows = std::stoul(m[5].str());
      continue;
    }
    if (std::regex_match(line, m, row_re)) {
      if (rows_in_window == 0) {
        ++r.windows;
      }
      const std::size_t stage = std::stoul(m[1].str());
      if (stage != rows_in_window) {
        r.problems.push_back("row of stage " + m[1].str() + " out of order");
      }
      ++rows_in_window;
      const std::string body = m[2].str();
      for (std::size_t c = 0; c < body.size();) {
        std::smatch l;
        const std::string rest = body.substr(c);
        if (body[c] == ' ' || body[c] == '.') {
          ++c;
        } else if (std::regex_search(rest, l, label_re)) {
          r.ops.emplace_back(stage, l[0].str());
          c += l[0].str().size();
        } else if (std::isalpha(static_cast<unsigned char>(body[c])) != 0 &&
                   std::string_view("BFRSW").find(body[c]) == std::string_view::npos) {
          // A key is one letter, never one a label starts with, so "abF2.0" is a, b and F2.0.
          ++used[{stage, body[c]}];
          ++c;
        } else {
          r.problems.push_back("unreadable cell at column " + std::to_string(c) + " of \"" + line +
                               "\"");
          break;
        }
      }
      continue;
    }
    if (std::regex_match(line, m, legend_re)) {
      legend_stage = std::stoul(m[1].str());
      add_legend(legend_stage, m[2].str());
      continue;
    }
    if (std::regex_match(line, m, axis_re)) {
      continue;
    }
    if (std::regex_match(line, m, legend_more)) {
      add_legend(legend_stage, m[1].str());
      continue;
    }
    r.problems.push_back("unexpected line \"" + line + "\"");
  }
  close_window();
  if (expected_windows != 0 && expected_windows != r.windows) {
    r.problems.push_back("headers announce " + std::to_string(expected_windows) + " windows, " +
                         std::to_string(r.windows) + " drawn");
  }
  return r;
}

/// Every op of `s` as (stage, full label), sorted; with a timeline, those it gives a duration
/// (the zero-length transfers of a cost model are not drawn).
std::vector<std::pair<std::size_t, std::string>> all_labels(const schedule& s,
                                                            const timeline* tl = nullptr) {
  std::vector<std::pair<std::size_t, std::string>> out;
  for (stage_index st = 0; st < s.stages(); ++st) {
    for (std::size_t i = 0; i < s.ops(st).size(); ++i) {
      if (tl == nullptr || tl->stages[st][i].duration() > 0.0) {
        out.emplace_back(st, to_string(s.ops(st)[i], s.chunks() > 1));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_complete(const schedule& s,
                    const std::string& out,
                    std::size_t width,
                    const timeline* tl = nullptr) {
  INFO(out);
  reading r = read_picture(out, s.stages());
  for (const std::string& p : r.problems) {
    UNSCOPED_INFO(p);
  }
  CHECK(r.problems.empty());
  CHECK(r.longest_line <= width);
  std::sort(r.ops.begin(), r.ops.end());
  CHECK(r.ops == all_labels(s, tl));
}
}  // namespace

TEST_CASE("terminal: golden 1F1B p=2 m=2 on unit steps", "[io][terminal]") {
  CHECK(render_schedule(generate(one_f_one_b{}, 2, 2), {.width = 80}) ==
        "1f1b  p=2 m=2 v=1  6 steps  (one per op, untimed)\n"
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
  CHECK(count(out, "stage ") % 4 == 0);
  check_complete(s, out, 60);
}

TEST_CASE("terminal: colours and $COLUMNS", "[io][terminal]") {
  const schedule s = generate(one_f_one_b{}, 2, 1);
  const std::string out = render_schedule(s, {.width = 80, .color = true});
  CHECK(count(out, "\x1b[") > 0);
  CHECK(out.find("F0") != std::string::npos);
  // width 0: $COLUMNS when it is a number >= 20, else 100 characters.
  const schedule wide = generate(one_f_one_b{}, 4, 16);
  const auto longest = [](const std::string& text) {
    std::size_t n = 0;
    std::size_t start = 0;
    for (std::size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
      n = std::max(n, nl - start);
      start = nl + 1;
    }
    return n;
  };
  ::setenv("COLUMNS", "37", 1);
  CHECK(longest(render_schedule(wide, {.width = 0})) <= 37);
  CHECK(longest(render_schedule(wide, {.width = 0})) > 30);
  ::setenv("COLUMNS", "12", 1);  // too narrow: the default
  CHECK(longest(render_schedule(wide, {.width = 0})) ==
        longest(render_schedule(wide, {.width = 100})));
  ::unsetenv("COLUMNS");
  CHECK(longest(render_schedule(wide, {.width = 0})) ==
        longest(render_schedule(wide, {.width = 100})));
}

TEST_CASE("terminal: a timed picture says its times' unit", "[io][terminal]") {
  const schedule s = generate(one_f_one_b{}, 2, 3);
  const std::string out = render_timeline(s, cost_timeline(s), {.width = 30});
  CHECK(out.rfind("1f1b  p=2 m=3 v=1\nmakespan 12 cost units\nbubble rate 25.0%\ntime 0 to ", 0) ==
        0);
}

TEST_CASE("terminal: golden, wrapped by time window", "[io][terminal]") {
  // 1F1B p=2 m=3 needs 4 columns per step (BW2 and a space), 32 in all; 20 are left.
  CHECK(render_schedule(generate(one_f_one_b{}, 2, 3), {.width = 30}) ==
        "1f1b  p=2 m=3 v=1\n"  // the title too is split to fit
        "8 steps  (one per op, untimed)\n"
        "steps 0 to 4 (1 of 2)\n"
        "stage 0 |F0  F1  ....BW0 |\n"
        "stage 1 |....F0  BW0 F1  |\n"
        "         0       2       4\n"
        "\n"
        "steps 4 to 8 (2 of 2)\n"
        "stage 0 |F2  BW1 ....BW2 |\n"
        "stage 1 |BW1 F2  BW2 ....|\n"
        "         4       6       8\n");
}

TEST_CASE("terminal: every op keeps its full label at any width", "[io][terminal]") {
  const std::vector<schedule> schedules = {
      generate(interleaved_1f1b{}, 5, 10, 2),  // p=5 m=10 v=2 (m a multiple of p)
      generate(interleaved_1f1b{}, 4, 8, 3),
      generate(zb_v{}, 4, 8),
      generate(one_f_one_b{}, 8, 32),
      generate(zb_h1{}, 4, 16),
      generate(gpipe{}, 3, 12),
      lower_communication(generate(one_f_one_b{}, 3, 12)),  // labels up to "SEND_B11"
  };
  for (const schedule& s : schedules) {
    for (std::size_t width : {40u, 80u, 120u}) {
      INFO(s.name() << " p=" << s.stages() << " m=" << s.microbatches() << " v=" << s.chunks()
                    << " width " << width);
      const std::string out = render_schedule(s, {.width = width});
      check_complete(s, out, width);
      CHECK(read_picture(out, s.stages()).keys == 0);  // unit steps: labels, never keys
      // Colour only adds escapes around the same text.
      CHECK(strip_ansi(render_schedule(s, {.width = width, .color = true})) == out);
    }
    // The same at real times (split backward: W cheaper than F and B).
    const timeline tl = cost_timeline(s, cost_model::uniform(1.0, 2.0, 0.5));
    check_complete(s, render_timeline(s, tl, {.width = 80}), 80, &tl);
  }
}

TEST_CASE("terminal: p=5 m=7 v=2 interleaved at the default width", "[io][terminal]") {
  // The issue's example: at 100 columns the micro-batch numbers used to be cut off ("F F1 F").
  const schedule s = generate(interleaved_1f1b{}, 5, 7, 2);
  const std::string out = render_schedule(s, {.width = 100});
  check_complete(s, out, 100);
  const reading r = read_picture(out, 5);
  CHECK(r.windows == 3);  // 39 steps of 6 columns, windows of 13 steps
  CHECK(out.find("steps 0 to 13 (1 of 3)\n") != std::string::npos);
  CHECK(out.find("steps 26 to 39 (3 of 3)\n") != std::string::npos);
  CHECK(out.find("stage 0 |F0.0  F1.0  F2.0  F3.0  F4.0  F0.1  ") != std::string::npos);
}

TEST_CASE("terminal: wrap = false draws one block as wide as the labels need", "[io][terminal]") {
  const schedule s = generate(interleaved_1f1b{}, 5, 7, 2);
  const std::string out = render_schedule(s, {.width = 80, .wrap = false});
  const reading r = read_picture(out, 5);
  CHECK(r.windows == 1);
  CHECK(out.find(" of ") == std::string::npos);  // no window headers
  CHECK(r.longest_line == std::string("stage 0 |").size() + 39 * 6 + 1);
  check_complete(s, out, r.longest_line);
}

TEST_CASE("terminal: ops far shorter than the rest are keys explained by a legend",
          "[io][terminal]") {
  // A measured-like run: forwards take a thousandth of a backward. They don't stretch the
  // picture; each is a one-letter key explained under its window.
  const schedule s = generate(one_f_one_b{}, 2, 4);
  timeline tl = unit_step_timeline(s);
  for (std::size_t si = 0; si < tl.stages.size(); ++si) {
    const std::span<timed_op> st = tl.stages[si];  // a mutable stage list
    for (timed_op& t : st) {
      if (t.o.kind == op_kind::forward) {
        t.end = t.start + 0.001;
      }
    }
  }
  const std::string out = render_timeline(s, tl, {.width = 60});
  check_complete(s, out, 60, &tl);
  const reading r = read_picture(out, 2);
  CHECK(r.keys == 8);
  CHECK(out.find("stage 0 keys: a=F0 b=F1") != std::string::npos);

  // More short ops in a stage than there are keys: the window ends before the keys run out,
  // even without wrapping.
  const schedule big = generate(one_f_one_b{}, 2, 64);
  timeline many = unit_step_timeline(big);
  for (std::size_t si = 0; si < many.stages.size(); ++si) {
    const std::span<timed_op> st = many.stages[si];  // a mutable stage list
    for (timed_op& t : st) {
      if (t.o.kind == op_kind::forward) {
        t.end = t.start + 0.001;
      }
    }
  }
  const std::string wide = render_timeline(big, many, {.width = 80, .wrap = false});
  const reading w = read_picture(wide, 2);
  CHECK(w.windows >= 2);
  CHECK(w.keys == 128);
  check_complete(big, wide, w.longest_line, &many);
}

TEST_CASE("terminal: random measured-like timelines", "[io][terminal]") {
  // Any durations, idle gaps and a share of microsecond ops: still every op, by full label or
  // by an explained key, within the width when wrapping.
  std::mt19937 rng(14);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::vector<schedule> schedules = {generate(interleaved_1f1b{}, 3, 6, 2),
                                           lower_communication(generate(one_f_one_b{}, 3, 5)),
                                           generate(zb_h1{}, 2, 12)};
  for (int round = 0; round < 60; ++round) {
    const schedule& s = schedules[static_cast<std::size_t>(round) % schedules.size()];
    timeline tl = unit_step_timeline(s);
    const double tiny = unit(rng) * 0.5;
    for (std::size_t si = 0; si < tl.stages.size(); ++si) {
      const std::span<timed_op> st = tl.stages[si];  // a mutable stage list
      double t = unit(rng) * 3.0;
      for (timed_op& o : st) {
        o.start = t + (unit(rng) < 0.2 ? unit(rng) * 4.0 : 0.0);
        o.end = o.start + (unit(rng) < tiny ? 1e-4 + unit(rng) * 1e-3 : 0.3 + unit(rng) * 3.0);
        t = o.end;
      }
    }
    const std::size_t width = 30 + static_cast<std::size_t>(unit(rng) * 100.0);
    INFO("round " << round << " width " << width);
    check_complete(s, render_timeline(s, tl, {.width = width}), width, &tl);
    const std::string wide = render_timeline(s, tl, {.width = width, .wrap = false});
    check_complete(s, wide, read_picture(wide, s.stages()).longest_line, &tl);
  }
}

TEST_CASE("terminal: an empty schedule", "[io][terminal]") {
  schedule s = schedule::sequential("empty", 2, 1);
  CHECK(render_schedule(s, {.width = 60}) ==
        "empty  p=2 m=1 v=1  0 steps  (one per op, untimed)\n"
        "stage 0 ||\n"
        "stage 1 ||\n");
}

TEST_CASE("terminal: an overlapped pair is one block labelled with both ops",
          "[io][terminal][overlap]") {
  const schedule s = test_support::pair_schedule();
  const timeline t = cost_timeline(s, cost_model::unit());
  const std::string out = render_timeline(s, t, {.width = 200, .title = false, .axis = false});
  const std::string row0 = out.substr(0, out.find('\n'));
  const std::string row1 = out.substr(out.find('\n') + 1, row0.size());
  INFO(out);
  CHECK(row0.find("|F2|BW0 ") == std::string::npos);  // the pair is not at the row's start
  CHECK(row0.find("F2|BW0") != std::string::npos);
  CHECK(row1.find("F1|BW0") != std::string::npos);
  CHECK(row0.find(" BW0") == std::string::npos);  // BW0 is drawn in the pair only
  // Both rows keep one length, and the blocks sit at their times: the same column per time
  // unit on both stages (stage 0's pair starts at 5, where stage 1's pair, [2, 5], ends).
  REQUIRE(row0.size() == row1.size());
  const std::size_t pair0 = row0.find("F2|BW0");
  const std::size_t f2 = row1.find("F2");  // stage 1's F2 starts at 8, when stage 0's pair ends
  const std::size_t pair1 = row1.find("F1|BW0");
  const std::size_t origin = std::string("stage 0 |").size();
  // Columns per time unit from stage 1's pair (starts at 2) and stage 0's (starts at 5).
  const double per_unit = static_cast<double>(pair0 - pair1) / 3.0;
  CHECK(per_unit > 0.0);
  CHECK(static_cast<double>(pair1 - origin) == Approx(2.0 * per_unit).margin(1.0));
  CHECK(static_cast<double>(f2 - origin) == Approx(8.0 * per_unit).margin(1.0));
  // Without the mark the same ops are two blocks.
  schedule plain = s;
  plain.stage_ops(0)[2] = make_op(op_kind::forward, 2);
  plain.stage_ops(1)[1] = make_op(op_kind::forward, 1);
  const std::string two =
      render_timeline(plain, cost_timeline(plain, cost_model::unit()), {.width = 200});
  CHECK(two.find("F2|BW0") == std::string::npos);
}
