#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/pair_schedule.hpp"

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
  // Memory changes when an op ends (docs/model.md §5), after the static sample at 0.
  // Stage 0: F0 ends 1, F1 2, BW0 6, BW1 9; stage 1: F0 2, BW0 4, F1 5, BW1 7.
  CHECK(n["C"] == 5 + 5);
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

namespace {

// The trace as chrome_trace_json built it before the streaming writer: one nlohmann::json of
// the whole trace (about 4 KB per op). The reference the streamed text must parse to.
json reference_trace(const schedule& sched, const timeline& tl, const chrome_trace_options& opts) {
  const placement& pl = sched.layout();
  const std::uint32_t m = sched.microbatches();
  const bool chunked = sched.chunks() > 1;
  const bool lowered = sched.has_comm();
  const double k = opts.time_scale;
  json ev = json::array();
  ev.push_back({{"name", "process_name"},
                {"ph", "M"},
                {"pid", 0},
                {"args", {{"name", "pipeline " + sched.name()}}}});
  for (stage_index s = 0; s < sched.stages(); ++s) {
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", 0},
                  {"tid", s},
                  {"args", {{"name", "stage " + std::to_string(s)}}}});
    ev.push_back({{"name", "thread_sort_index"},
                  {"ph", "M"},
                  {"pid", 0},
                  {"tid", s},
                  {"args", {{"sort_index", s}}}});
  }
  auto in_range = [&](const op& o) { return o.chunk < pl.chunks() && o.mb < m; };
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (const timed_op& t : tl.stages[s]) {
      json args = {{"mb", t.o.mb}, {"chunk", t.o.chunk}, {"index", t.index}};
      if (in_range(t.o)) {
        args["global_chunk"] = pl.global(s, t.o.chunk);
      }
      ev.push_back(
          {{"name", to_string(t.o, chunked)},
           {"cat", is_comm(t.o.kind) ? std::string("comm") : std::string(to_string(t.o.kind))},
           {"ph", "X"},
           {"ts", t.start * k},
           {"dur", t.duration() * k},
           {"pid", 0},
           {"tid", s},
           {"args", std::move(args)}});
    }
  }
  if (opts.flows) {
    constexpr std::size_t nev = event_kind_count;
    std::vector<const timed_op*> producer(std::size_t{pl.total_chunks()} * m * nev, nullptr);
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        const std::size_t base = (std::size_t{pl.global(s, t.o.chunk)} * m + t.o.mb) * nev;
        for (std::size_t e = 0; e < nev; ++e) {
          if ((events_produced(t.o) & (1u << e)) != 0) {
            producer[base + e] = &t;
          }
        }
      }
    }
    std::uint64_t id = 0;
    auto flow = [&](const timed_op& from, const timed_op& to) {
      ++id;
      ev.push_back({{"name", "flow"},
                    {"cat", "dependency"},
                    {"ph", "s"},
                    {"id", id},
                    {"ts", from.start * k},
                    {"pid", 0},
                    {"tid", from.stage}});
      ev.push_back({{"name", "flow"},
                    {"cat", "dependency"},
                    {"ph", "f"},
                    {"bp", "e"},
                    {"id", id},
                    {"ts", to.start * k},
                    {"pid", 0},
                    {"tid", to.stage}});
    };
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        if (t.o.kind == op_kind::send_forward || t.o.kind == op_kind::send_backward) {
          if (const auto peer = comm_partner(pl, s, t.o)) {
            for (const timed_op& u : tl.stages[peer->stage]) {  // the first matching RECV
              if (u.o == peer->o) {
                flow(t, u);
                break;
              }
            }
          }
          continue;
        }
        for (const requirement& r : requirements_of(pl, s, t.o, lowered)) {
          const timed_op* from =
              producer[(std::size_t{r.chunk} * m + r.mb) * nev + static_cast<std::size_t>(r.what)];
          if (r.remote && from != nullptr) {
            flow(*from, t);
          }
        }
      }
    }
  }
  if (opts.memory != nullptr) {
    for (stage_index s = 0; s < opts.memory->size(); ++s) {
      for (const memory_sample& x : (*opts.memory)[s]) {
        ev.push_back({{"name", "memory stage " + std::to_string(s)},
                      {"ph", "C"},
                      {"ts", x.time * k},
                      {"pid", 0},
                      {"args", {{"live", x.live}}}});
      }
    }
  }
  return {{"traceEvents", std::move(ev)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"schedule", sched.name()},
            {"p", sched.stages()},
            {"m", sched.microbatches()},
            {"v", sched.chunks()},
            {"makespan", tl.makespan()},
            {"bubble_rate", tl.bubble_rate()}}}};
}

std::string streamed(const schedule& s, const timeline& tl, const chrome_trace_options& o = {}) {
  std::ostringstream os;
  write_chrome_trace(os, s, tl, o);
  return os.str();
}

}  // namespace

TEST_CASE("chrome trace: the streamed text parses to the whole-trace JSON", "[io][chrome_trace]") {
  std::vector<schedule> cases = {generate(one_f_one_b{}, 4, 8), generate(zb_h1{}, 3, 5),
                                 generate(interleaved_1f1b{}, 3, 4, 3), generate(zb_v{}, 4, 6)};
  const std::size_t compute_only = cases.size();
  for (std::size_t i = 0; i < compute_only; ++i) {
    cases.push_back(lower_communication(cases[i]));  // SEND -> RECV flows
  }
  cases[0].set_name("quote \" backslash \\ tab \t newline \n bell \x07 UTF-8 \xc3\xa4");
  const cost_model costs = cost_model::uniform(1.1, 2.3, 0.7, 0.13);
  for (const schedule& s : cases) {
    INFO(s.name() << " p=" << s.stages() << " lowered=" << s.has_comm());
    const timeline tl = cost_timeline(s, costs);
    const auto mem = memory_curves(s, tl, memory_model::uniform(1.0, 0.5));
    for (const chrome_trace_options& o :
         {chrome_trace_options{}, chrome_trace_options{.memory = &mem},
          chrome_trace_options{.time_scale = 1e6, .flows = false, .memory = &mem},
          chrome_trace_options{.time_scale = 3.3e14, .memory = &mem},
          chrome_trace_options{.time_scale = 1e-7}}) {
      const std::string text = streamed(s, tl, o);
      CHECK(json::parse(text) == reference_trace(s, tl, o));
      CHECK(to_chrome_trace(s, tl, o) == text);
      CHECK(chrome_trace_json(s, tl, o) == json::parse(text));
    }
  }
}

TEST_CASE("chrome trace: a timeline prefix and out-of-range ops stream like the JSON",
          "[io][chrome_trace]") {
  // After a deadlock a timeline times a prefix of each list; a hand-made list may hold ops
  // outside the spec (no global chunk, no flows).
  schedule s = generate(one_f_one_b{}, 2, 3);
  s.stage_ops(1).push_back(make_op(op_kind::forward, 7));
  timeline tl = cost_timeline(generate(one_f_one_b{}, 2, 3));
  std::vector<std::vector<timed_op>> lists = tl.stages.to_vectors();
  lists[0].resize(4);
  lists[1].push_back({1, static_cast<std::uint32_t>(s.ops(1).size() - 1),
                      make_op(op_kind::forward, 7), 20.0, 21.0});
  tl.stages = lists;
  const std::string text = streamed(s, tl);
  CHECK(json::parse(text) == reference_trace(s, tl, {}));
}

TEST_CASE("chrome trace: bad input throws before anything is written", "[io][chrome_trace]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  std::ostringstream os;
  CHECK_THROWS_WITH(write_chrome_trace(os, s, cost_timeline(generate(one_f_one_b{}, 3, 2))),
                    "chrome_trace: timeline has 3 stages, schedule 2");
  CHECK_THROWS_WITH(write_chrome_trace(os, s, cost_timeline(s), {.time_scale = 0.0}),
                    "chrome_trace: time_scale (0) must be > 0");
  schedule bad_name = s;
  bad_name.set_name("not UTF-8 \xff");
  CHECK_THROWS_AS(write_chrome_trace(os, bad_name, cost_timeline(s)), json::type_error);
  CHECK(os.str().empty());
}

TEST_CASE("chrome trace: a pair's second op on its stage's overlapped thread",
          "[io][chrome_trace][overlap]") {
  const schedule s = test_support::pair_schedule();
  const timeline tl = cost_timeline(s, cost_model::unit());
  const json t = json::parse(to_chrome_trace(s, tl));
  auto n = count_ph(t);
  CHECK(n["X"] == 12);  // one per op
  CHECK(n["M"] == 9);   // process, and per stage and per overlapped thread a name and an index
  std::map<std::uint64_t, std::string> name;
  std::map<std::uint64_t, std::uint64_t> sort;
  for (const json& e : t["traceEvents"]) {
    if (e["name"] == "thread_name") {
      name[e["tid"].get<std::uint64_t>()] = e["args"]["name"].get<std::string>();
    } else if (e["name"] == "thread_sort_index") {
      sort[e["tid"].get<std::uint64_t>()] = e["args"]["sort_index"].get<std::uint64_t>();
    }
  }
  CHECK(name ==
        std::map<std::uint64_t, std::string>{
            {0, "stage 0"}, {1, "stage 1"}, {2, "stage 0 overlapped"}, {3, "stage 1 overlapped"}});
  CHECK(sort == std::map<std::uint64_t, std::uint64_t>{{0, 0}, {2, 1}, {1, 2}, {3, 3}});
  // Stage 0's pair: F2 on thread 0, BW0 on thread 2, the same slot [5, 8], naming each other.
  std::map<std::string, json> x0;                       // stage 0's ops by name
  std::map<std::uint64_t, std::vector<double>> starts;  // X starts per thread
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "X") {
      starts[e["tid"].get<std::uint64_t>()].push_back(e["ts"].get<double>());
      if (e["tid"] == 0 || e["tid"] == 2) {
        x0[e["name"].get<std::string>()] = e;
      }
    }
  }
  REQUIRE(x0.count("F2") == 1);
  REQUIRE(x0.count("BW0") == 1);
  CHECK(x0["F2"]["tid"] == 0);
  CHECK(x0["BW0"]["tid"] == 2);
  CHECK(x0["F2"]["ts"] == 5000.0);
  CHECK(x0["BW0"]["ts"] == 5000.0);
  CHECK(x0["F2"]["dur"] == 3000.0);
  CHECK(x0["BW0"]["dur"] == 3000.0);
  CHECK(x0["F2"]["args"]["pair"] == 3);
  CHECK(x0["BW0"]["args"]["pair"] == 2);
  CHECK_FALSE(x0["F1"]["args"].contains("pair"));
  CHECK(starts[2] == std::vector<double>{5000.0});
  CHECK(starts[3] == std::vector<double>{2000.0});
  // Every flow end sits on a thread that has an op starting then (the pair's thread for the
  // second op's arrows).
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "s" || e["ph"] == "f") {
      const auto& st = starts[e["tid"].get<std::uint64_t>()];
      INFO(e.dump());
      CHECK(std::find(st.begin(), st.end(), e["ts"].get<double>()) != st.end());
    }
  }
}
