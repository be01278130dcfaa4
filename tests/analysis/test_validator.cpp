#include <catch2/catch.hpp>

#include <pipesched/gen/registry.hpp>
#include <pipesched/analysis/validator.hpp>

#include "support/ops.hpp"

using namespace pipesched;
using namespace test_ops;

TEST_CASE("a valid schedule gives an empty report", "[validate]") {
  const auto r = validate(generate(zb_h1{}, 4, 8));
  CHECK(r.ok());
  CHECK(r.violations.empty());
  CHECK_FALSE(r.deadlock.has_value());
}

TEST_CASE("out-of-range indices are reported with stage and op index", "[validate]") {
  schedule s("t", 1, 2);
  s.stage_ops(0) = {F(0), BW(0), F(5), F(1), BW(1), make_op(op_kind::forward, 0, 3)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::out_of_range) == 2);
  CHECK(r.violations[0].stage == 0);
  CHECK(r.violations[0].op_index == 2);
  CHECK(r.violations[0].message == "stage 0, op 2 (F5): micro-batch 5 must be < m (2)");
  CHECK(r.violations[1].message == "stage 0, op 5 (F0): chunk 3 must be < chunks (1)");
}

TEST_CASE("duplicates and missing ops are counted", "[validate]") {
  schedule s("t", 1, 2);
  s.stage_ops(0) = {F(0), F(0), BW(0), F(1)};
  const auto r = validate(s);
  CHECK(r.count(violation_kind::duplicate) == 1);
  REQUIRE(r.count(violation_kind::missing) == 1);
  bool found = false;
  for (const auto& v : r.violations) {
    if (v.kind == violation_kind::missing) {
      found = true;
      CHECK(v.op_index == violation::no_index);
      CHECK(v.message == "stage 0: backward (BW, or B and W) 1 of chunk 0 is missing");
    }
  }
  CHECK(found);
  CHECK_FALSE(r.ok());
}

TEST_CASE("BW mixed with B/W is reported", "[validate]") {
  schedule s("t", 1, 1);
  s.stage_ops(0) = {F(0), B(0), BW(0), W(0)};
  const auto r = validate(s);
  CHECK(r.count(violation_kind::mixed_backward) >= 2);
}

TEST_CASE("local order: B before F and W before B", "[validate]") {
  schedule s("t", 1, 1);
  s.stage_ops(0) = {W(0), B(0), F(0)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::local_order) == 2);
  CHECK(r.violations[0].message == "stage 0, op 0 (W0): W0 of chunk 0 before B0 of chunk 0");
  CHECK(r.violations[1].message == "stage 0, op 1 (B0): B0 of chunk 0 before F0 of chunk 0");
  REQUIRE(r.deadlock.has_value());
}

TEST_CASE("a cross-stage deadlock with locally fine orders is found and its cycle named",
          "[validate][deadlock]") {
  // Stage 0 wants BW0 before sending F1; stage 1 wants F1 before BW0 can... never run.
  schedule s("t", 2, 2);
  s.stage_ops(0) = {F(0), BW(0), F(1), BW(1)};
  s.stage_ops(1) = {F(0), F(1), BW(1), BW(0)};
  const auto r = validate(s);
  CHECK(r.count(violation_kind::local_order) == 0);
  CHECK(r.count(violation_kind::missing) == 0);
  REQUIRE(r.deadlock.has_value());
  const auto& w = *r.deadlock;
  REQUIRE(w.cycle == std::vector<stage_index>{0, 1});
  REQUIRE(w.stuck.size() == 2);
  CHECK(w.stuck[0].op_index == 1);
  CHECK(w.stuck[0].blocked == BW(0));
  CHECK(w.stuck[0].waits_on_stage == 1);
  CHECK(w.stuck[1].op_index == 1);
  CHECK(w.stuck[1].blocked == F(1));
  CHECK(w.stuck[1].waits_on_stage == 0);
  CHECK(w.describe() ==
        "deadlock: stage 0 blocked at op 1 (BW0) waiting for B/BW0 of chunk 0 on stage 1; "
        "stage 1 blocked at op 1 (F1) waiting for F1 of chunk 0 on stage 0; "
        "cycle: stage 0 -> stage 1 -> stage 0");
  CHECK(r.count(violation_kind::deadlock) == 3);
}

TEST_CASE("waiting on an op no stage schedules is reported as never produced",
          "[validate][deadlock]") {
  schedule s("t", 2, 1);
  s.stage_ops(0) = {F(0), BW(0)};
  s.stage_ops(1) = {F(0)};  // its BW is missing
  const auto r = validate(s);
  REQUIRE(r.deadlock.has_value());
  CHECK(r.deadlock->cycle.empty());
  REQUIRE(r.deadlock->stuck.size() == 1);
  CHECK(r.deadlock->stuck[0].never_produced);
  CHECK(r.count(violation_kind::missing) == 1);
}

TEST_CASE("the violation list is capped but the total is exact", "[validate]") {
  schedule s("t", 1, 100);
  validate_options o;
  o.max_violations = 5;
  o.check_feasibility = false;
  const auto r = validate(s, o);
  CHECK(r.violations.size() == 5);
  CHECK(r.total == 200);  // F and backward missing for 100 micro-batches
  CHECK(r.truncated() == 195);
  // count(kind) is the true total per kind, not the stored examples (it said 5 here).
  CHECK(r.count(violation_kind::missing) == 200);
  CHECK(r.count(violation_kind::duplicate) == 0);

  // Two kinds, most of them beyond the cap: each kind's count is exact and they add up.
  schedule d("d", 1, 3);  // p = 1, m = 3
  for (microbatch_index mb = 0; mb < 3; ++mb) {
    d.stage_ops(0).push_back(F(mb));
    d.stage_ops(0).push_back(F(mb));  // a duplicate
  }
  for (microbatch_index mb = 0; mb < 3; ++mb) {
    d.stage_ops(0).push_back(BW(mb));
  }
  d.stage_ops(0).push_back(F(7));  // out of range (m = 3)
  o.max_violations = 1;
  const auto rd = validate(d, o);
  CHECK(rd.violations.size() == 1);
  CHECK(rd.count(violation_kind::duplicate) == 3);
  CHECK(rd.count(violation_kind::out_of_range) == 1);
  std::size_t sum = 0;
  for (std::size_t k = 0; k < violation_kind_count; ++k) {
    sum += rd.count(static_cast<violation_kind>(k));
  }
  CHECK(sum == rd.total);
}

TEST_CASE("every registered generator validates on a small grid", "[validate][registry]") {
  for (const auto& e : default_registry().entries()) {
    for (std::uint32_t p : {1u, 2u, 3u, 5u}) {
      for (std::uint32_t m : {1u, 2u, 7u, 12u}) {
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        INFO(e.name << " p=" << p << " m=" << m);
        CHECK(validate(e.generate(gp)).ok());
      }
    }
  }
}
