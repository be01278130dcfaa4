#include <map>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/torch_csv.hpp>

using namespace pipesched;
using nlohmann::json;

namespace {
std::map<std::string, std::size_t> count_ph(const json& trace) {
  std::map<std::string, std::size_t> n;
  for (const json& e : trace["traceEvents"]) {
    ++n[e["ph"].get<std::string>()];
  }
  return n;
}
}  // namespace

TEST_CASE("chrome trace: 1F1B p=2 m=2 events, flows and counters", "[io][chrome_trace]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const timeline tl = cost_timeline(s);
  const auto mem = memory_curves(s, tl, memory_model::uniform(1, 0.5));
  const json t = json::parse(to_chrome_trace(s, tl, {.memory = &mem}));
  auto n = count_ph(t);
  CHECK(n["X"] == 8);  // one per op
  CHECK(n["s"] == 4);  // F0, F1 stage 0 -> 1; BW0, BW1 stage 1 -> 0
  CHECK(n["f"] == 4);
  CHECK(n["M"] == 5);  // process name, two thread names, two sort indices
  // Stage 0: F0 at 0 (+1), F1 at 1 (+1), BW0 ends 6 (-1), BW1 ends 9 (-1): samples at 0,1,6,9.
  CHECK(n["C"] == 4 + 4);
  CHECK(t["otherData"]["makespan"] == 9.0);
  // The BW0 of stage 0: starts at 4 units = 4000 us, lasts 2 units.
  bool found = false;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == 0 && e["name"] == "BW0") {
      CHECK(e["ts"] == 4000.0);
      CHECK(e["dur"] == 2000.0);
      CHECK(e["cat"] == "BW");
      CHECK(e["args"]["global_chunk"] == 0);
      found = true;
    }
  }
  CHECK(found);
  // Every flow start has a finish with the same id on another thread.
  std::map<std::uint64_t, int> tid_of_start;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "s") {
      tid_of_start[e["id"].get<std::uint64_t>()] = e["tid"].get<int>();
    }
  }
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "f") {
      REQUIRE(tid_of_start.count(e["id"].get<std::uint64_t>()) == 1);
      CHECK(tid_of_start[e["id"].get<std::uint64_t>()] != e["tid"].get<int>());
      CHECK(e["bp"] == "e");
    }
  }
}

TEST_CASE("chrome trace: flow count for ZB-H1 and a lowered schedule", "[io][chrome_trace]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  auto n = count_ph(chrome_trace_json(s, cost_timeline(s)));
  CHECK(n["X"] == s.size());
  CHECK(n["s"] == 2 * 3 * 8);  // (p-1)*m forward edges and as many backward edges
  CHECK(n.count("C") == 0);
  CHECK(count_ph(chrome_trace_json(s, cost_timeline(s), {.flows = false})).count("s") == 0);

  const schedule l = from_torch_csv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  auto nl = count_ph(chrome_trace_json(l, cost_timeline(l)));
  CHECK(nl["X"] == 8);
  CHECK(nl["s"] == 2);  // SEND_F -> RECV_F and SEND_B -> RECV_B
}

TEST_CASE("chrome trace: measured timings", "[io][chrome_trace]") {
  const schedule s = generate(one_f_one_b{}, 1, 2);  // F0 BW0 F1 BW1
  const std::vector<timed_op> measured = {{0, 0, make_op(op_kind::forward, 0), 0.0, 0.5},
                                          {0, 1, make_op(op_kind::backward_full, 0), 0.5, 1.5},
                                          {0, 2, make_op(op_kind::forward, 1), 1.75, 2.0},
                                          {0, 3, make_op(op_kind::backward_full, 1), 2.0, 3.0}};
  const timeline tl = timeline_from_measured(s, measured);
  const json t = chrome_trace_json(s, tl, {.time_scale = 1e6});
  CHECK(count_ph(t)["X"] == 4);
  CHECK(t["traceEvents"][3]["name"] == "F0");
  CHECK(t["traceEvents"][5]["ts"] == 1.75e6);

  auto bad = measured;
  bad[2].o = make_op(op_kind::forward, 0);
  CHECK_THROWS_WITH(timeline_from_measured(s, bad),
                    "timeline_from_measured: entry 2 (stage 0, op 2) is F0 but the schedule has F1 "
                    "there");
  bad = measured;
  bad.pop_back();
  CHECK_THROWS_WITH(timeline_from_measured(s, bad),
                    "timeline_from_measured: no entry for stage 0, op 3 (BW1)");
  bad = measured;
  bad[0].end = -1.0;
  CHECK_THROWS_WITH(
      timeline_from_measured(s, bad),
      "timeline_from_measured: entry 0 (stage 0, op 0): end (-1) must be >= start (0)");
  CHECK_THROWS_WITH(chrome_trace_json(generate(one_f_one_b{}, 2, 2), tl),
                    "chrome_trace: timeline has 1 stages, schedule 2");
}
