#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/telemetry.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/transform/recompute.hpp>

using namespace pipesched;
using Catch::Matchers::Contains;

TEST_CASE("read_chrome_trace_run: reads back what simulate --format chrome writes", "[telemetry]") {
  for (const schedule& s : {generate(zb_h1{}, 3, 6), generate(zb_v{}, 3, 6)}) {
    const simulation_result r = simulate(s, cost_model::uniform(1, 2, 1));
    const measured_run run = read_chrome_trace_run(to_chrome_trace(s, to_timeline(s, r)));
    CHECK(run.name == s.name());
    CHECK(run.microbatches == 6);
    CHECK(run.layout == s.layout());
    CHECK(run.ops.size() == s.size());
    const schedule ran = order_of(run);
    for (stage_index st = 0; st < 3; ++st) {
      CHECK(std::vector<op>(ran.ops(st).begin(), ran.ops(st).end()) ==
            std::vector<op>(s.ops(st).begin(), s.ops(st).end()));
    }
    // Times in microseconds (1000 per unit by default).
    const std::vector<stage_estimate> e = estimate_costs(run);
    CHECK(e[1].backward_input->median == Approx(2000.0 / s.chunks()));
  }
  CHECK_THROWS_WITH(read_chrome_trace_run("{"), Contains("chrome trace: not JSON"));
  CHECK_THROWS_WITH(read_chrome_trace_run(R"({"otherData":{"p":2,"m":1},"traceEvents":[]})"),
                    Contains("/otherData/v must be a positive integer"));
  CHECK_THROWS_WITH(
      read_chrome_trace_run(
          R"({"otherData":{"p":2,"m":1,"v":1},"traceEvents":[{"ph":"X","cat":"Q","tid":0}]})"),
      Contains("/traceEvents/0/cat: unknown op kind \"Q\""));
  // Positions are 32-bit (timed_op::index): a larger one is refused, not cut.
  CHECK_THROWS_WITH(
      read_chrome_trace_run(
          R"({"otherData":{"p":1,"m":1,"v":1},"traceEvents":[{"ph":"X","cat":"F","tid":0,)"
          R"("ts":0,"dur":1,"args":{"mb":0,"chunk":0,"index":8589934592}}]})"),
      Contains("/traceEvents/0/args: index (8589934592) is beyond max_stage_ops (4294967295)"));
}

TEST_CASE("read_timing_csv: the plain format, and its errors", "[telemetry]") {
  const measured_run run = read_timing_csv(
      "stage,kind,mb,chunk,start,end\n0,F,0,0,0,1\n1,F,0,0,1,2.5\n1,B,0,0,2.5,4\n0,B,0,0,4,5\n"
      "0,W,0,0,5,6\n1,W,0,0,4,5\n");
  CHECK(run.layout.stages() == 2);
  CHECK(run.microbatches == 1);
  CHECK(estimate_costs(run)[1].forward->median == 1.5);
  CHECK(order_of(run).ops(1)[2] == op{op_kind::backward_weight, 0});
  CHECK_THROWS_WITH(read_timing_csv("stage,kind\n"), Contains("timing csv line 1: the header"));
  CHECK_THROWS_WITH(read_timing_csv("stage,kind,mb,chunk,start,end\n0,X,0,0,0,1\n"),
                    Contains("timing csv line 2: kind \"X\" is not an op kind"));
  CHECK_THROWS_WITH(read_timing_csv("stage,kind,mb,chunk,start,end\n0,F,0,0,2,1\n"),
                    Contains("line 2: end (1) is before start (2)"));
  CHECK_THROWS_WITH(read_timing_csv("stage,kind,mb,chunk,start,end\n0,F,0,1,0,1\n"),
                    Contains("need a global_chunk column or a placement"));
  CHECK(read_timing_csv("stage,kind,mb,chunk,start,end,global_chunk\n0,F,0,0,0,1,0\n0,F,0,1,1,2,"
                        "1\n")
            .layout.chunks() == 2);
}

TEST_CASE("read_measured_run: a Chrome trace or a timing CSV, by the text", "[telemetry]") {
  const schedule s = generate(zb_h1{}, 3, 6);
  const std::string trace = to_chrome_trace(s, to_timeline(s, simulate(s, cost_model{})));
  // Leading blanks do not hide a trace.
  CHECK(read_measured_run(" \n\t" + trace).ops == read_chrome_trace_run(trace).ops);
  const std::string csv = "stage,kind,mb,chunk,start,end\n0,F,0,0,0,1\n";
  CHECK(read_measured_run(csv).ops == read_timing_csv(csv).ops);
  // Each reader's own errors.
  CHECK_THROWS_WITH(read_measured_run("{"), Contains("chrome trace: not JSON"));
  CHECK_THROWS_WITH(read_measured_run(""), Contains("timing csv: empty"));
}

TEST_CASE("telemetry: the injected straggler of a sleep-executor run is found in its trace",
          "[telemetry][exec]") {
  // 1F1B, p = 3, m = 6, ops sleeping 5 ms per cost unit; stage 1 runs 1.6x slower. A sleep
  // overshoots by the scheduler's latency (milliseconds on a loaded machine, whatever its
  // length): 5 ms units keep that well below the 0.6 units that make stage 1 the straggler.
  const schedule s = generate(one_f_one_b{}, 3, 6);
  cost_model costs;
  costs.set_stage_costs({{1, 1, 1}, {1.6, 1.6, 1.6}, {1, 1, 1}});
  sleep_executor sleeper(s, costs, std::chrono::milliseconds(5));
  instrumented_executor<sleep_executor> timed(sleeper, s.stages());
  run_threaded(timed, s);
  std::vector<timed_op> all;
  for (stage_index st = 0; st < 3; ++st) {
    all.insert(all.end(), timed.timings(st).begin(), timed.timings(st).end());
  }
  chrome_trace_options co;
  co.time_scale = 1e6;  // seconds -> microseconds
  const measured_run run =
      read_chrome_trace_run(to_chrome_trace(s, timeline_from_measured(s, all), co));
  const std::vector<straggler> found = find_stragglers(estimate_costs(run), {2500.0, 0.2});
  REQUIRE(found.size() == 1);
  CHECK(found[0].stage == 1);
  // The measured costs: about 5000 us per unit, 8000 on stage 1 (sleeps overshoot a little).
  const cost_model measured = measured_cost_model(estimate_costs(run), 1);
  CHECK(measured.stage_costs()[1].forward == Approx(8000).epsilon(0.3));
}

TEST_CASE("read_chrome_trace_run: an F's recompute mark reads back, with or without the arg",
          "[telemetry]") {
  const schedule s = with_recompute(generate(zb_h1{}, 3, 6), all_chunks(generate(zb_h1{}, 3, 6)));
  const std::string trace = to_chrome_trace(s, to_timeline(s, simulate(s, cost_model{})));
  CHECK_THAT(trace, Contains(R"("mb":0,"recompute":true},"cat":"F")"));
  // Written before the argument existed: the R says it.
  std::string old = trace;
  for (std::size_t at = old.find(",\"recompute\":true"); at != std::string::npos;
       at = old.find(",\"recompute\":true")) {
    old.erase(at, std::string(",\"recompute\":true").size());
  }
  for (const std::string& text : {trace, old}) {
    const measured_run run = read_chrome_trace_run(text);
    const schedule ran = order_of(run);
    for (stage_index st = 0; st < 3; ++st) {
      CHECK(std::vector<op>(ran.ops(st).begin(), ran.ops(st).end()) ==
            std::vector<op>(s.ops(st).begin(), s.ops(st).end()));
    }
  }
  CHECK(is_recomputed(read_chrome_trace_run(trace).ops[0].o));
  const std::string bad =
      R"({"otherData":{"p":1,"m":1,"v":1},"traceEvents":[{"ph":"X","cat":"B","tid":0,)"
      R"("ts":0,"dur":1,"args":{"mb":0,"chunk":0,"recompute":true}}]})";
  CHECK_THROWS_WITH(read_chrome_trace_run(bad),
                    Contains("/traceEvents/0/args/recompute: only an F can be marked recompute, "
                             "not B"));
  std::string not_bool = bad;
  not_bool.replace(not_bool.find("true"), 4, "1");
  CHECK_THROWS_WITH(read_chrome_trace_run(not_bool),
                    Contains("/traceEvents/0/args/recompute must be true or false"));
}
