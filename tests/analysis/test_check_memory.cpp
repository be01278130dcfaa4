#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/ops.hpp"

using namespace pipesched;
using namespace test_ops;

namespace {

schedule one_stage(std::vector<op> ops) {
  schedule s = schedule::sequential("hand", 1, 2);
  s.stage_ops(0) = std::move(ops);
  return s;
}

live_buffer act(stage_index s, microbatch_index j, double size) {
  return live_buffer{buffer_id{buffer_kind::activation, s, 0, j}, size};
}
live_buffer wgrad(stage_index s, microbatch_index j, double size) {
  return live_buffer{buffer_id{buffer_kind::weight_grad_input, s, 0, j}, size};
}

}  // namespace

TEST_CASE("check_memory: closed-form peaks over a grid", "[memory]") {
  for (auto [mb, mw] : {std::pair{1.0, 0.5}, std::pair{3.0, 1.0}, std::pair{4.0, 0.0}}) {
    const auto model = memory_model::uniform(mb, mw);
    for (std::uint32_t p = 1; p <= 6; ++p) {
      for (std::uint32_t m : {1u, 2u, p, p + 1, 2 * p, 2 * p + 3, 3 * p}) {
        INFO("p=" << p << " m=" << m << " M_B=" << mb << " M_W=" << mw);
        const auto r1 = check_memory(generate(one_f_one_b{}, p, m), model);
        const auto rg = check_memory(generate(gpipe{}, p, m), model);
        const auto rgs = check_memory(generate(gpipe{true}, p, m), model);
        const auto rh1 = check_memory(generate(zb_h1{}, p, m), model);
        const auto rh2 = check_memory(generate(zb_h2{}, p, m), model);
        for (const auto* r : {&r1, &rg, &rgs, &rh1, &rh2}) {
          CHECK(r->lifetimes_ok());
          CHECK(r->within_budget());
        }
        for (std::uint32_t i = 1; i <= p; ++i) {  // 1-based stage, as in the formulas
          INFO("stage " << i);
          const stage_index s = i - 1;
          CHECK(r1.peak_memory(s) == std::min(p - i + 1, m) * mb);
          CHECK(r1.stages[s].peak_stage_units == std::min(p - i + 1, m));
          CHECK(rg.peak_memory(s) == m * mb);
          CHECK(rgs.peak_memory(s) == m * mb);
          if (m >= p) {
            CHECK(rh1.peak_memory(s) == (p - i + 1) * mb + (i - 1) * mw);
          }
          if (m >= 2 * p - 1) {
            CHECK(rh2.peak_memory(s) == (2 * p - 2 * i + 1) * mb + (2 * i - 2) * mw);
          }
          CHECK(r1.stages[s].final_value == 0);
          CHECK(rh2.stages[s].final_value == 0);
        }
      }
    }
  }
}

TEST_CASE("check_memory: small-m peaks, computed by hand", "[memory]") {
  const auto model = memory_model::uniform(4, 1);
  // ZB-H1 p=4 m=2. Stage 4: F0 (4) B0 (1) F1 (5) B1 (2) W0 W1. Stage 3: F0 F1 (8) ...
  const auto h1 = check_memory(generate(zb_h1{}, 4, 2), model);
  CHECK(h1.stages[0].peak == 8);
  CHECK(h1.stages[2].peak == 8);
  CHECK(h1.stages[3].peak == 5);
  CHECK(h1.stages[3].peak_op_index == 2);
  CHECK(h1.stages[3].curve == std::vector<double>{4, 1, 5, 2, 1, 0});
  // ZB-H2 p=4 m=6, stage 2: five warm-up F (20), B0 (17), F5 (21), B1 (18), B2 W0 ...
  const auto h2 = check_memory(generate(zb_h2{}, 4, 6), model);
  CHECK(h2.stages[0].peak == 24);
  CHECK(h2.stages[1].peak == 21);
  CHECK(h2.stages[1].peak_op_index == 6);
}

TEST_CASE("check_memory: peak position, curve and static memory", "[memory]") {
  auto model = memory_model::uniform(4, 1);
  model.set_static_memory({10, 20, 30, 40});
  const auto r = check_memory(generate(one_f_one_b{}, 4, 8), model);
  // Stage 0: F1 F2 F3 F4 -> peak 16 (+10 static) after op 3.
  CHECK(r.stages[0].static_memory == 10);
  CHECK(r.stages[0].peak == 26);
  CHECK(r.stages[0].peak_op_index == 3);
  CHECK(r.stages[0].peak_stage_units == 4);
  CHECK(r.stages[3].peak == 44);
  CHECK(r.stages[3].peak_op_index == 0);
  CHECK(r.stages[3].curve.size() == 16);
  CHECK(r.stages[3].curve[0] == 44);
  CHECK(r.stages[3].curve[1] == 40);
  CHECK(r.stages[2].final_value == 30);
  CHECK(r.max_peak() == 44);

  memory_options o;
  o.record_curve = false;
  const auto lean = check_memory(generate(one_f_one_b{}, 4, 8), model, o);
  CHECK(lean.stages[0].curve.empty());
  CHECK(lean.stages[0].peak == 26);

  auto two = memory_model::uniform(4, 1);
  two.set_static_memory({10, 20});
  const auto empty = check_memory(schedule::sequential("e", 2, 1), two);
  CHECK(empty.stages[1].peak == 20);
  CHECK(empty.stages[1].peak_op_index == stage_memory::no_index);
}

TEST_CASE("check_memory: per-stage peak in units of the stage for multi-chunk stages", "[memory]") {
  // Loop placement, p=2, v=2: stage 0 holds chunks with M_B 2 and 1.
  schedule s = schedule::on("loop", placement::loop(2, 2), 1);
  s.stage_ops(0) = {F(0, 0), F(0, 1), BW(0, 1), BW(0, 0)};
  s.stage_ops(1) = {F(0, 0), F(0, 1), BW(0, 1), BW(0, 0)};
  memory_model model;
  model.set_chunk_memory(2, {{2, 1, 0}, {1, 0.5, 0}, {3, 1, 0}, {3, 1, 0}});
  const auto r = check_memory(s, model);
  CHECK(r.lifetimes_ok());
  CHECK(r.stages[0].peak == 3);
  CHECK(r.stages[0].peak_stage_units == 1);
  CHECK(r.stages[1].peak == 6);
  CHECK(r.stages[1].curve == std::vector<double>{3, 6, 3, 0});
}

TEST_CASE("check_memory: budget violation at the right op with the right live buffers",
          "[memory]") {
  const auto s = generate(zb_h1{}, 4, 8);
  const auto model = memory_model::uniform(4, 1);
  // Peaks 16 / 13 / 10 / 7; limit 12 catches stages 0 and 1.
  const auto r = check_memory(s, model, memory_options::with_limit(12));
  CHECK(r.lifetimes_ok());
  CHECK_FALSE(r.within_budget());
  CHECK_FALSE(r.ok());
  REQUIRE(r.violations.size() == 2);

  const auto& v0 = r.violations[0];
  CHECK(v0.stage == 0);
  CHECK(v0.limit == 12);
  CHECK(v0.op_index == 3);  // F1 F2 F3 F4: the fourth forward
  CHECK(v0.value == 16);
  CHECK(v0.peak == 16);
  CHECK(v0.peak_op_index == 3);
  CHECK(v0.live ==
        std::vector<live_buffer>{act(0, 0, 4), act(0, 1, 4), act(0, 2, 4), act(0, 3, 4)});

  // Stage 1: F1 F2 F3 B1 F4 -> 4, 8, 12, 9, 13: over at op 4 with M_W of mb 0 still held.
  const auto& v1 = r.violations[1];
  CHECK(v1.stage == 1);
  CHECK(v1.op_index == 4);
  CHECK(v1.value == 13);
  CHECK(v1.live ==
        std::vector<live_buffer>{act(1, 1, 4), act(1, 2, 4), wgrad(1, 0, 1), act(1, 3, 4)});
  double sum = 0;
  for (const auto& b : v1.live) {
    sum += b.size;
  }
  CHECK(sum == v1.value);
  CHECK(v1.message == "stage 1 exceeds its memory limit 12 at op 4 (F3): 13 (peak 13 at op 4)");
  CHECK(to_string(v1.live[2].id) == "weight_grad_input(stage 1, chunk 0, mb 0)");

  // Per-stage limits, static memory included.
  auto with_static = model;
  with_static.set_static_memory({0, 0, 0, 5});
  const auto r2 = check_memory(s, with_static, memory_options::with_limit({16, 13, 10, 11}));
  REQUIRE(r2.violations.size() == 1);
  CHECK(r2.violations[0].stage == 3);
  // 5 static + F1 B1 F2 B2 F3 B3 F4: three M_W and one M_B alive -> 12 after op 6.
  CHECK(r2.violations[0].value == 12);
  CHECK(r2.violations[0].op_index == 6);
  CHECK(r2.violations[0].live ==
        std::vector<live_buffer>{wgrad(3, 0, 1), wgrad(3, 1, 1), wgrad(3, 2, 1), act(3, 3, 4)});
  CHECK(check_memory(s, model, memory_options::with_limit({16, 13, 10, 7})).within_budget());

  CHECK_THROWS_AS(check_memory(s, model, memory_options::with_limit({1, 2})), invalid_argument);
  CHECK_THROWS_AS(check_memory(s, model, memory_options::with_limit(-1)), invalid_argument);
}

TEST_CASE("check_memory: lifetime errors on hand-built schedules", "[memory]") {
  SECTION("use before create, then a leak") {
    const auto r = check_memory(one_stage({BW(0), F(0), F(1), BW(1)}));
    REQUIRE(r.total_errors == 2);
    CHECK(r.errors[0].kind == lifetime_error_kind::use_before_create);
    CHECK(r.errors[0].op_index == 0);
    CHECK(r.errors[0].buffer == buffer_id{buffer_kind::activation, 0, 0, 0});
    CHECK(r.errors[0].message ==
          "stage 0, op 0 (BW0): uses before it is created activation(stage 0, chunk 0, mb 0)");
    CHECK(r.errors[1].kind == lifetime_error_kind::leak);
    CHECK(r.errors[1].op_index == 1);
    CHECK(r.stages[0].final_value == 1);
  }
  SECTION("double free") {
    const auto r = check_memory(one_stage({F(0), B(0), W(0), W(0), F(1), BW(1), BW(1)}));
    REQUIRE(r.total_errors == 2);
    CHECK(r.errors[0].kind == lifetime_error_kind::double_free);
    CHECK(r.errors[0].op_index == 3);
    CHECK(r.errors[0].buffer.kind == buffer_kind::weight_grad_input);
    CHECK(r.errors[1].kind == lifetime_error_kind::double_free);
    CHECK(r.errors[1].op_index == 6);
    CHECK(r.count(lifetime_error_kind::double_free) == 2);
    CHECK(r.stages[0].final_value == 0);
  }
  SECTION("double create") {
    const auto r = check_memory(one_stage({F(0), F(0), BW(0), F(1), BW(1)}));
    REQUIRE(r.total_errors == 1);
    CHECK(r.errors[0].kind == lifetime_error_kind::double_create);
    CHECK(r.errors[0].op_index == 1);
    CHECK(r.stages[0].peak == 1);
  }
  SECTION("leak of the weight-gradient input when W is missing") {
    const auto r = check_memory(one_stage({F(0), B(0), F(1), B(1), W(1)}));
    REQUIRE(r.total_errors == 1);
    CHECK(r.errors[0].kind == lifetime_error_kind::leak);
    CHECK(r.errors[0].op_index == 1);
    CHECK(r.errors[0].buffer == buffer_id{buffer_kind::weight_grad_input, 0, 0, 0});
    CHECK(r.stages[0].final_value == 0.5);
  }
  SECTION("W after a fused BW uses a buffer that never existed") {
    const auto r = check_memory(one_stage({F(0), BW(0), W(0), F(1), BW(1)}));
    REQUIRE(r.total_errors == 1);
    CHECK(r.errors[0].kind == lifetime_error_kind::use_before_create);
    CHECK(r.errors[0].op_index == 2);
  }
  SECTION("max_errors caps the stored list, total counts all") {
    memory_options o;
    o.max_errors = 1;
    const auto r = check_memory(one_stage({W(0), W(1), F(0), F(1)}), {}, o);
    CHECK(r.total_errors == 4);
    CHECK(r.errors.size() == 1);
  }
}

TEST_CASE("check_memory: receive buffers in a lowered schedule", "[memory]") {
  using k = op_kind;
  schedule s = schedule::sequential("lowered", 2, 1);
  s.stage_ops(0) = {F(0), make_op(k::send_forward, 0), make_op(k::recv_backward, 0), BW(0)};
  s.stage_ops(1) = {make_op(k::recv_forward, 0), F(0), BW(0), make_op(k::send_backward, 0)};
  const auto model = memory_model(chunk_memory{1, 0.5, 0.25});
  const auto r = check_memory(s, model);
  CHECK(r.lifetimes_ok());
  CHECK(r.stages[0].curve == std::vector<double>{1, 1, 1.25, 0});
  CHECK(r.stages[0].peak == 1.25);
  CHECK(r.stages[0].peak_op_index == 2);
  CHECK(r.stages[1].curve == std::vector<double>{0.25, 1, 0, 0});

  // F before its RECV_F: the receive buffer is used before it exists, then leaks.
  s.stage_ops(1) = {F(0), make_op(k::recv_forward, 0), BW(0), make_op(k::send_backward, 0)};
  const auto bad = check_memory(s, model);
  REQUIRE(bad.total_errors == 2);
  CHECK(bad.errors[0].kind == lifetime_error_kind::use_before_create);
  CHECK(bad.errors[0].stage == 1);
  CHECK(bad.errors[0].op_index == 0);
  CHECK(bad.errors[0].buffer.kind == buffer_kind::received_forward);
  CHECK(bad.errors[1].kind == lifetime_error_kind::leak);
  CHECK(bad.errors[1].op_index == 1);
}

TEST_CASE("check_memory: curve stamped with simulated time agrees with the simulation",
          "[memory]") {
  const auto s = generate(zb_h1{}, 4, 8);
  const auto c = cost_model::uniform(3, 4, 2);
  const auto sim = simulate(s, c);
  const auto r = check_memory(s, memory_model::uniform(4, 1), memory_options{}, sim);
  for (stage_index i = 0; i < 4; ++i) {
    REQUIRE(r.stages[i].curve_time.size() == s.ops(i).size());
    CHECK(std::is_sorted(r.stages[i].curve_time.begin(), r.stages[i].curve_time.end()));
    for (std::size_t j = 0; j < s.ops(i).size(); ++j) {
      CHECK(r.stages[i].curve_time[j] == sim.ops[i][j].end);
    }
    CHECK(r.stages[i].peak_time == sim.ops[i][r.stages[i].peak_op_index].end);
  }
  // Stage 0 peaks after its fourth forward, at 4·T_F; stage 3 after F1 (started at 3·T_F).
  CHECK(r.stages[0].peak_time == 12);
  CHECK(r.stages[3].peak == 7);
  CHECK(r.stages[3].peak_time == sim.ops[3][r.stages[3].peak_op_index].end);

  simulate_options lean;
  lean.record_ops = false;
  CHECK_THROWS_AS(check_memory(s, {}, {}, simulate(s, c, lean)), invalid_argument);
}
