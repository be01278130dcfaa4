// timeline.hpp: the io/ views fed by the real simulator and memory checker (to_timeline,
// memory_curves of a memory_report, simulation_to_json of a simulation_result, formatters).
#include <sstream>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/link_timing.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/fmt.hpp>
#include <pipesched/io/model_json.hpp>
#include <pipesched/io/svg.hpp>
#include <pipesched/io/terminal.hpp>

#include "support/pair_schedule.hpp"

using namespace pipesched;

// No aliases: timed_op is the one "op with start and end" type and
// stage_timing the one per-stage summary. These declarations compile only because the old
// names (op_timing, measured_op, stage_summary) are no longer declared by the headers above.
namespace pipesched {
struct op_timing;
struct measured_op;
struct stage_summary;
}  // namespace pipesched
static_assert(std::is_same_v<decltype(timeline{}.summary(0)), stage_timing>);
// Timed ops per stage are a stage_table<timed_op> wherever a result holds them.
static_assert(std::is_same_v<decltype(timeline::stages), stage_table<timed_op>>);
static_assert(std::is_same_v<decltype(simulation_result::ops), stage_table<timed_op>>);
static_assert(std::is_same_v<decltype(link_timing_result::ops), stage_table<timed_op>>);
static_assert(std::is_same_v<decltype(dynamic_result::decided), stage_table<timed_op>>);

TEST_CASE("timeline: to_timeline carries the simulator's times", "[io][timeline]") {
  const cost_model costs = cost_model::uniform(3, 4, 2, 0.5);
  for (const schedule& s :
       {generate(one_f_one_b{}, 4, 8), generate(zb_h1{}, 4, 8), generate(zb_h2{}, 3, 6)}) {
    const simulation_result r = simulate(s, costs);
    const timeline a = to_timeline(s, r);
    REQUIRE(a.stages.size() == s.stages());
    for (stage_index st = 0; st < s.stages(); ++st) {
      REQUIRE(a.stages[st].size() == s.ops(st).size());
      for (std::uint32_t i = 0; i < a.stages[st].size(); ++i) {
        CHECK(a.stages[st][i] ==
              timed_op{st, i, s.ops(st)[i], r.ops[st][i].start, r.ops[st][i].end});
      }
    }
    CHECK(a.makespan() == r.makespan);
    CHECK(a.bubble_rate() == r.bubble_rate);
  }
  // Hand-timed: 1F1B, p = 2, m = 2, F = 3, B = 4, W = 2 (BW = 6), T_comm = 0.5. Stage 1's F0
  // starts at 3.5; stage 0's B0 waits for stage 1's BW0 (3.5 + 3 + 6 = 12.5) + 0.5.
  const timeline t = cost_timeline(generate(one_f_one_b{}, 2, 2), costs);
  CHECK(t.stages[1][0].start == 3.5);
  CHECK(t.stages[0][2].start == 13);
}

TEST_CASE("timeline: memory checker curves", "[io][timeline]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  const simulation_result r = simulate(s);
  const memory_model mm = memory_model::uniform(1, 0.5);
  const memory_report m = check_memory(s, mm, {}, r);
  const auto curves = memory_curves(m);
  REQUIRE(curves.size() == 4);
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(peak_of(curves[st]) == m.stages[st].peak);
    // ZB-H1 stage i (1-based): (p-i+1) M_B + (i-1) M_W.
    CHECK(m.stages[st].peak == Approx((4 - st) * 1.0 + st * 0.5));
    CHECK(curves[st].front() == memory_sample{0.0, 0.0});
  }
  CHECK_THROWS_WITH(memory_curves(check_memory(s, mm)),
                    "memory_curves: stage 0 has no times (call check_memory with the simulation "
                    "result)");
}

TEST_CASE("timeline: simulation JSON, trace, SVG and text from a simulation_result",
          "[io][timeline]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const simulation_result r = simulate(s);
  const memory_report m = check_memory(s, memory_model::uniform(1, 0.5), {}, r);
  const nlohmann::json j = simulation_to_json(s, r, &m);
  CHECK(j["makespan"] == 9.0);
  CHECK(j["stages"][0]["span"] == 9.0);
  CHECK(j["stages"][0]["busy"] == 6.0);
  CHECK(j["stages"][0]["peak_memory"] == 2.0);
  CHECK(j["stages"][1]["ops"].size() == 4);
  CHECK(!j.contains("deadlock"));
  const simulation_record back = simulation_from_json(j);
  CHECK(back.ops->stages == to_timeline(s, r).stages);

  const timeline tl = to_timeline(s, r);
  const auto curves = memory_curves(m);
  const nlohmann::json t = chrome_trace_json(s, tl, {.memory = &curves});
  std::size_t x = 0;
  for (const auto& e : t["traceEvents"]) {
    x += e["ph"] == "X" ? 1u : 0u;
  }
  CHECK(x == 4 * 2);
  CHECK(to_svg(s, tl, {.memory = &curves}).find("makespan 9 cost units, bubble rate 33.3%") !=
        std::string::npos);
  CHECK(render_timeline(s, tl, {.width = 80, .title = false, .axis = false}) ==
        "stage 0 |F0  F1  ........BW0     ....BW1     |\n"
        "stage 1 |....F0  BW0     F1  BW1     ........|\n");

  CHECK(fmt::format("{}", r) ==
        "makespan 9 cost units, bubble rate 33.3%\nstage 0: span 9 cost units, busy 6 cost "
        "units, idle 3 cost units\nstage 1: span 6 cost units, busy 6 cost units, idle 0 cost "
        "units");
  CHECK(fmt::format("{}", m) ==
        "max peak 2\nstage 0: peak 2 at op 1 (static 0)\nstage 1: peak 1 at op 0 (static 0)");
}

TEST_CASE("timeline: a deadlocked simulation", "[io][timeline]") {
  schedule s = schedule::sequential("bad", 2, 1);
  s.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  s.stage_ops(1) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  const simulation_result r =
      simulate(s, {}, simulate_options{true, true, false});  // a partial run on purpose
  REQUIRE(!r.completed());
  const timeline tl = to_timeline(s, r);
  CHECK(tl.size() < s.size());
  const nlohmann::json j = simulation_to_json(s, r);
  CHECK(j["deadlock"].get<std::string>().rfind("deadlock:", 0) == 0);
  CHECK(simulation_from_json(j).deadlock == j["deadlock"].get<std::string>());
  CHECK(fmt::format("{}", r).find("\ndeadlock:") != std::string::npos);
  CHECK_NOTHROW(chrome_trace_json(s, tl));
}

TEST_CASE("timeline: a report's picture is its simulation and memory curves, drawn once",
          "[io][timeline]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  report_options ro;
  ro.costs = cost_model::uniform(1, 1.5, 0.5);
  ro.memory = memory_model::uniform(1, 0.25);
  const schedule_report rep = report_schedule(s, ro);
  const report_picture pic = picture_of(s, rep);
  const simulation_result r = simulate(s, ro.costs);
  const timeline tl = to_timeline(s, r);
  const auto curves = memory_curves(s, tl, ro.memory);
  CHECK(pic.tl.makespan() == tl.makespan());
  CHECK(pic.memory.size() == curves.size());
  for (std::size_t st = 0; st < curves.size(); ++st) {
    REQUIRE(pic.memory[st].size() == curves[st].size());
    for (std::size_t i = 0; i < curves[st].size(); ++i) {
      CHECK(pic.memory[st][i].time == curves[st][i].time);
      CHECK(pic.memory[st][i].live == curves[st][i].live);
    }
  }
  CHECK(to_svg(s, rep) == to_svg(s, tl, {.memory = &curves}));
  chrome_trace_options co;
  co.memory = &curves;
  std::ostringstream from_report;
  write_chrome_trace(from_report, s, rep);
  CHECK(from_report.str() == to_chrome_trace(s, tl, co));

  schedule bad = schedule::sequential("bad", 2, 1);
  bad.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  bad.stage_ops(1) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  const schedule_report dead = report_schedule(bad);
  CHECK_THROWS_WITH(to_svg(bad, dead),
                    Catch::Matchers::StartsWith("to_svg: the schedule cannot run to the end ("));
  std::ostringstream none;
  CHECK_THROWS_WITH(write_chrome_trace(none, bad, dead),
                    Catch::Matchers::StartsWith("chrome_trace: the schedule cannot run"));
  CHECK(none.str().empty());
}

TEST_CASE("timeline: unit steps and the stand-alone memory curve", "[io][timeline]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const timeline u = unit_step_timeline(s);
  // stage 0: F0 0, F1 1, BW0 3, BW1 5; stage 1: F0 1, BW0 2, F1 3, BW1 4.
  CHECK(u.stages[0][2].start == 3.0);
  CHECK(u.stages[0][3].start == 5.0);
  CHECK(u.stages[1][2].start == 3.0);
  CHECK(u.makespan() == 6.0);
  const auto mem = memory_curves(s, u, memory_model::uniform(1, 0.5));
  // The memory checker's rule, stamped with op ends. Stage 0: F0 ends at 1 (+1), F1 at 2 (+1),
  // BW0 at 4 (-1), BW1 at 6 (-1).
  CHECK(mem[0] == std::vector<memory_sample>{{0, 0}, {1, 1}, {2, 2}, {4, 1}, {6, 0}});
  const memory_report checked = check_memory(s, memory_model::uniform(1, 0.5));
  CHECK(peak_of(mem[0]) == checked.stages[0].peak);
  CHECK(peak_of(mem[1]) == checked.stages[1].peak);
}

TEST_CASE("timeline: an overlapped pair's slot counts once", "[io][timeline][overlap]") {
  const schedule s = test_support::pair_schedule();
  const simulation_result r = simulate(s, cost_model::unit());
  REQUIRE(r.completed());
  const timeline t = to_timeline(s, r);
  CHECK(shares_slot_with_next(t.stages[0], 2));
  CHECK_FALSE(shares_slot_with_next(t.stages[0], 3));
  CHECK(shares_slot_with_next(t.stages[1], 1));
  CHECK(t.stages[0][2].start == 5.0);
  CHECK(t.stages[0][3].end == 8.0);
  for (stage_index st = 0; st < 2; ++st) {
    INFO("stage " << st);
    // The simulator's busy time (each pair's slot once) is the timeline's.
    CHECK(t.summary(st).busy == r.busy(st));
    CHECK(t.summary(st).busy == 9.0);  // F 1 + F 1 + pair 3 + BW 2 + BW 2
  }
  CHECK(t.summary(0).span == 15.0);
  // A measured run whose pair ops did not share a slot counts both.
  std::vector<timed_op> measured;
  for (stage_index st = 0; st < 2; ++st) {
    for (const timed_op& o : t.stages[st]) {
      measured.push_back(o);
    }
  }
  measured[3].start = measured[3].end;  // BW0 of stage 0: an instant after its F2
  measured[3].end += 2.0;
  const timeline m = timeline_from_measured(s, measured);
  CHECK_FALSE(shares_slot_with_next(m.stages[0], 2));
  CHECK(m.summary(0).busy == 9.0 + 2.0);
}
