#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

#include "support/ops.hpp"

using namespace pipesched;
using namespace test_ops;

namespace {

schedule one_f_one_b_2x(std::uint32_t m) {
  schedule s = schedule::sequential("1f1b", 2, m);
  if (m == 2) {
    s.stage_ops(0) = {F(0), F(1), BW(0), BW(1)};
    s.stage_ops(1) = {F(0), BW(0), F(1), BW(1)};
  } else {  // m == 3
    s.stage_ops(0) = {F(0), F(1), BW(0), F(2), BW(1), BW(2)};
    s.stage_ops(1) = {F(0), BW(0), F(1), BW(1), F(2), BW(2)};
  }
  return s;
}

// M_B = 1, M_W = 0.5 per stage, M_in = 0.25.
memory_model sizes() {
  return memory_model(chunk_memory{1.0, 0.5, 0.0, 0.25});
}

}  // namespace

TEST_CASE("with_recompute before the backward: marks each F, puts R right before its BW",
          "[transform][recompute]") {
  const schedule r = with_recompute(one_f_one_b_2x(2), all_chunks(one_f_one_b_2x(2)));
  CHECK(r.stage_ops(0) == std::vector<op>{Fr(0), Fr(1), R(0), BW(0), R(1), BW(1)});
  CHECK(r.stage_ops(1) == std::vector<op>{Fr(0), R(0), BW(0), Fr(1), R(1), BW(1)});
  REQUIRE(validate(r).ok());

  // Unit costs, R = T_F = 1 (worked by hand): stage 1 runs F0 1-2, R0 2-3, BW0 3-5, F1 5-6,
  // R1 6-7, BW1 7-9; stage 0's BW1 waits for it: 9-11. Without recompute: 9.
  const simulation_result sim = simulate(r, cost_model::unit());
  CHECK(sim.makespan == Approx(11.0));
  CHECK(simulate(one_f_one_b_2x(2), cost_model::unit()).makespan == Approx(9.0));
  CHECK(sim.stages[0].busy == Approx(8.0));  // 2 F + 2 R + 2 BW of 2

  // Memory: stage 0 holds F0, F1 inputs (0.5), then R0 turns one into M_B: 1.25 (2.0 without).
  const memory_report mem = check_memory(r, sizes());
  REQUIRE(mem.ok());
  CHECK(mem.stages[0].peak == Approx(1.25));
  CHECK(mem.stages[1].peak == Approx(1.0));
  CHECK(check_memory(one_f_one_b_2x(2), sizes()).stages[0].peak == Approx(2.0));

  // T_R of its own: R lasts 0.5; stage 1: F0 1-2, R0 2-2.5, BW0 2.5-4.5, F1 4.5-5.5,
  // R1 5.5-6, BW1 6-8; stage 0: R1 after BW0 (4.5-6.5) 6.5-7, BW1 8-10.
  cost_model half = cost_model::unit();
  half.set_recompute(0.5);
  CHECK(simulate(r, half).makespan == Approx(10.0));
}

TEST_CASE("with_recompute: only the chosen chunks", "[transform][recompute]") {
  const schedule r = with_recompute(one_f_one_b_2x(2), {1});
  CHECK(r.stage_ops(0) == std::vector<op>{F(0), F(1), BW(0), BW(1)});
  CHECK(r.stage_ops(1) == std::vector<op>{Fr(0), R(0), BW(0), Fr(1), R(1), BW(1)});
  CHECK(validate(r).ok());
  CHECK(with_recompute(one_f_one_b_2x(2), {}) == one_f_one_b_2x(2));
}

TEST_CASE("with_recompute in idle slots: earliest gap after the F within the memory limit",
          "[transform][recompute]") {
  const schedule base = one_f_one_b_2x(3);
  recompute_options idle;
  idle.placement = recompute_placement::idle_slot;
  idle.memory = sizes();
  idle.memory_limit = {10.0};
  const schedule r = with_recompute(base, all_chunks(base), idle);
  // Before the backward, stage 0 runs F0 0-1, F1 1-2, R0 2-3, waits for stage 1's BW0 until 5,
  // BW0 5-7, F2 7-8, R1 8-9, BW1 9-11 (stage 1's BW1 ends at 9), R2 11-12, BW2 13-15.
  // Round 1 moves R1 into the gap 3-5; round 2 finds F2 ending at 8 and BW1 waiting until 9,
  // and moves R2 there. Stage 1 never waits after its first F: its R stay put.
  CHECK(r.stage_ops(0) ==
        std::vector<op>{Fr(0), Fr(1), R(0), R(1), BW(0), Fr(2), R(2), BW(1), BW(2)});
  CHECK(r.stage_ops(1) ==
        std::vector<op>{Fr(0), R(0), BW(0), Fr(1), R(1), BW(1), Fr(2), R(2), BW(2)});
  REQUIRE(validate(r).ok());
  CHECK(simulate(r, cost_model::unit()).makespan == Approx(15.0));
  // R1 before BW0 holds two M_B at once: 1 + 1 = 2.0 at R1.
  CHECK(check_memory(r, sizes()).stages[0].peak == Approx(2.0));

  SECTION("default limit: the before-backward peak, which no move may raise") {
    idle.memory_limit.reset();
    const schedule d = with_recompute(base, all_chunks(base), idle);
    const schedule b = with_recompute(base, all_chunks(base));
    // Stage 0 before the backward peaks at 1.25; R1 before BW0 would make it 2.0. The gap
    // before BW1 only opens once R1 has moved.
    CHECK(d == b);
  }
  SECTION("a limit between the two") {
    idle.memory_limit = {2.0, 2.0};  // R1 early: 1.25 + 0.75 = 2.0 fits; R2 early: 1.25 + 0.75 fits
    const schedule d = with_recompute(base, all_chunks(base), idle);
    CHECK(d.stage_ops(0) == r.stage_ops(0));
    idle.memory_limit = {1.9};
    CHECK(with_recompute(base, all_chunks(base), idle) == with_recompute(base, all_chunks(base)));
  }
}

TEST_CASE("with_recompute in idle slots: the limit holds in any memory unit",
          "[transform][recompute]") {
  // The move test used to allow 1e-9 above any limit below 1, so with sizes in units of 1e-9
  // (M_B = 1e-9) R1 moved before BW0 under the default limit (the before-backward peak
  // 1.25e-9), raising the peak to 2e-9. It is limit_threshold now: relative to the limit.
  const schedule base = one_f_one_b_2x(3);
  for (const double scale : {1e-9, 1e-3, 1.0, 1e6}) {
    INFO("memory scale " << scale);
    recompute_options idle;
    idle.placement = recompute_placement::idle_slot;
    idle.memory = memory_model(chunk_memory{scale, 0.5 * scale, 0.0, 0.25 * scale});
    const schedule d = with_recompute(base, all_chunks(base), idle);
    CHECK(d == with_recompute(base, all_chunks(base)));
    CHECK(check_memory(d, idle.memory).stages[0].peak == Approx(1.25 * scale));
  }
}

TEST_CASE("with_recompute: an overlapped pair is not split", "[transform][recompute]") {
  schedule s = schedule::sequential("pair", 1, 2);
  s.stage_ops(0) = {F(0), overlapping_next(F(1)), B(0), W(0), B(1), W(1)};
  REQUIRE(validate(s).ok());
  const schedule r = with_recompute(s, {0});
  CHECK(r.stage_ops(0) ==
        std::vector<op>{Fr(0), R(0), overlapping_next(Fr(1)), B(0), W(0), R(1), B(1), W(1)});
  CHECK(validate(r).ok());
}

TEST_CASE("with_recompute never lengthens a generated schedule in idle slots",
          "[transform][recompute]") {
  const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.05);
  const memory_model mem(chunk_memory{1.0, 0.5, 0.0, 0.1});
  for (const char* name : {"1f1b", "zb-h1", "zb-v", "interleaved-1f1b", "v-min", "dualpipev"}) {
    generator_params gp;
    gp.stages = 4;
    gp.microbatches = 8;
    gp.costs = costs;
    const schedule base = default_registry().generate(name, gp);
    recompute_options idle;
    idle.placement = recompute_placement::idle_slot;
    idle.costs = costs;
    idle.memory = mem;
    const schedule before = with_recompute(base, all_chunks(base));
    const schedule in_gaps = with_recompute(base, all_chunks(base), idle);
    INFO(name);
    REQUIRE(validate(before).ok());
    REQUIRE(validate(in_gaps).ok());
    CHECK(simulate(in_gaps, costs).makespan <= simulate(before, costs).makespan + 1e-9);
    const memory_report a = check_memory(before, mem);
    const memory_report b = check_memory(in_gaps, mem);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    for (stage_index st = 0; st < base.stages(); ++st) {
      CHECK(b.stages[st].peak <= a.stages[st].peak + 1e-9);
    }
    // Recomputation lowers the peak: every F keeps 0.1 until shortly before its backward.
    CHECK(a.max_peak() < check_memory(base, mem).max_peak());
  }
}

TEST_CASE("with_recompute refuses what it cannot transform, naming the rule",
          "[transform][recompute]") {
  const schedule s = one_f_one_b_2x(2);
  CHECK_THROWS_WITH(with_recompute(s, {2}),
                    "with_recompute: chunk (2) must be < the number of global chunks (2)");
  const schedule lowered = lower_communication(s);
  CHECK_THROWS_WITH(with_recompute(lowered, {0}),
                    Catch::Contains("has SEND / RECV ops: add recomputation before "
                                    "lower_communication"));
  const schedule twice = with_recompute(s, {0});
  CHECK_THROWS_WITH(with_recompute(twice, {1}),
                    Catch::Contains("already recomputes (F0 on stage 0)"));
  schedule broken = s;
  broken.stage_ops(1).pop_back();
  CHECK_THROWS_WITH(with_recompute(broken, {0}),
                    Catch::Contains("with_recompute: schedule \"1f1b\" is invalid: "));
  recompute_options bad;
  bad.memory_limit = {1.0, 2.0, 3.0};
  CHECK_THROWS_WITH(
      with_recompute(s, {0}, bad),
      "with_recompute: memory_limit: must hold one value or one per stage (p=2), got 3");
}

TEST_CASE("a recomputed schedule: JSON round trip, PyTorch CSV refused", "[transform][recompute]") {
  const schedule r = with_recompute(one_f_one_b_2x(2), {0});
  const std::string text = write_schedule_json(r);
  CHECK(text.find(R"({"kind":"F","mb":0,"recompute":true})") != std::string::npos);
  CHECK(text.find(R"({"kind":"R","mb":0})") != std::string::npos);
  CHECK(read_schedule_json(text) == r);
  CHECK_THROWS_WITH(read_schedule_json(R"({"version":1,"stages":1,"microbatches":1,"ops":[[
                      {"kind":"F","mb":0},{"kind":"BW","mb":0,"recompute":true}]]})"),
                    "/ops/0/1/recompute: only an F can be marked recompute, not BW");
  CHECK_THROWS_WITH(read_schedule_json(R"({"version":1,"stages":1,"microbatches":1,"ops":[[
                      {"kind":"F","mb":0,"recompute":1},{"kind":"BW","mb":0}]]})"),
                    "/ops/0/0/recompute: must be true or false, not number");
  // PyTorch's actions have no recompute; the first offending op is named.
  CHECK_THROWS_WITH(to_torch_csv(r),
                    "to_torch_csv: stage 0, op 0 (F0.0): PyTorch pipelining has no recompute "
                    "action (R, or an F marked recompute); checkpoint inside the stage module and "
                    "export the schedule without with_recompute");
  CHECK_NOTHROW(to_torch_csv(with_recompute(one_f_one_b_2x(2), {})));
}
