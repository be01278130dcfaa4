#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/ops.hpp"
#include "support/registry_shapes.hpp"

using namespace pipesched;
using namespace test_ops;

TEST_CASE("a valid schedule gives an empty report", "[validate]") {
  const auto r = validate(generate(zb_h1{}, 4, 8));
  CHECK(r.ok());
  CHECK(r.violations.empty());
  CHECK_FALSE(r.deadlock.has_value());
}

TEST_CASE("out-of-range indices are reported with stage and op index", "[validate]") {
  schedule s = schedule::sequential("t", 1, 2);
  s.stage_ops(0) = {F(0), BW(0), F(5), F(1), BW(1), make_op(op_kind::forward, 0, 3)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::out_of_range) == 2);
  CHECK(r.violations[0].stage == 0);
  CHECK(r.violations[0].op_index == 2);
  CHECK(r.violations[0].message == "stage 0, op 2 (F5): micro-batch 5 must be < m (2)");
  CHECK(r.violations[1].message == "stage 0, op 5 (F0): chunk 3 must be < chunks (1)");
}

TEST_CASE("duplicates and missing ops are counted", "[validate]") {
  schedule s = schedule::sequential("t", 1, 2);
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
  schedule s = schedule::sequential("t", 1, 1);
  s.stage_ops(0) = {F(0), B(0), BW(0), W(0)};
  const auto r = validate(s);
  CHECK(r.count(violation_kind::mixed_backward) >= 2);
}

TEST_CASE("local order: B before F and W before B", "[validate]") {
  schedule s = schedule::sequential("t", 1, 1);
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
  schedule s = schedule::sequential("t", 2, 2);
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
  schedule s = schedule::sequential("t", 2, 1);
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
  schedule s = schedule::sequential("t", 1, 100);
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
  schedule d = schedule::sequential("d", 1, 3);  // p = 1, m = 3
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
        if (const auto s = test_support::generate_if_served(e, gp)) {
          CHECK(validate(*s).ok());
        }
      }
    }
  }
}

TEST_CASE("overlapped pairs: a valid schedule with pairs on every stage", "[validate][overlap]") {
  schedule s = schedule::sequential("pairs", 2, 3);
  s.stage_ops(0) = {F(0), F(1), overlapping_next(F(2)), BW(0), BW(1), BW(2)};
  s.stage_ops(1) = {F(0), overlapping_next(F(1)), BW(0), F(2), BW(1), BW(2)};
  CHECK(validate(s).ok());
  // The backward may come first.
  s.stage_ops(0) = {F(0), F(1), overlapping_next(BW(0)), F(2), BW(1), BW(2)};
  CHECK(validate(s).ok());
  // Split backward: B with F is a pair too.
  schedule z = schedule::sequential("split", 2, 2);
  z.stage_ops(1) = {F(0), overlapping_next(B(0)), F(1), W(0), B(1), W(1)};
  z.stage_ops(0) = {F(0), F(1), B(0), W(0), B(1), W(1)};
  CHECK(validate(z).ok());
  CHECK(to_string(violation_kind::overlap) == "overlap");
}

TEST_CASE("overlapped pairs: the marked op needs a next op", "[validate][overlap]") {
  schedule s = schedule::sequential("t", 1, 1);
  s.stage_ops(0) = {F(0), overlapping_next(BW(0))};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  REQUIRE(r.total == 1);
  CHECK(r.violations[0].stage == 0);
  CHECK(r.violations[0].op_index == 1);
  CHECK(r.violations[0].message ==
        "stage 0, op 1 (BW0): marked to overlap with the next op, but it is the last op of the "
        "stage");
}

TEST_CASE("overlapped pairs: one F and one B or BW", "[validate][overlap]") {
  schedule s = schedule::sequential("t", 1, 2);
  s.stage_ops(0) = {overlapping_next(F(0)), F(1), BW(0), BW(1)};
  auto r = validate(s);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  CHECK(r.violations[0].message ==
        "stage 0, op 0 (F0): overlapped pair (F0;F1) must be one F and one B or BW (a forward "
        "with a backward, either first)");
  // A W is no partner, nor is a transfer.
  s.stage_ops(0) = {F(0), B(0), overlapping_next(W(0)), F(1), B(1), W(1)};
  r = validate(s);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  CHECK(r.violations[0].op_index == 2);
}

TEST_CASE("overlapped pairs: the two ops must not need each other", "[validate][overlap]") {
  schedule s = schedule::sequential("t", 1, 1);
  s.stage_ops(0) = {overlapping_next(F(0)), BW(0)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  CHECK(r.violations[0].message ==
        "stage 0, op 0 (F0): overlapped pair (F0;BW0) runs both ops at once, so they need "
        "different micro-batches or chunks: the backward needs its own forward");
}

TEST_CASE("overlapped pairs don't chain into three", "[validate][overlap]") {
  schedule s = schedule::sequential("t", 1, 2);
  s.stage_ops(0) = {F(0), overlapping_next(F(1)), overlapping_next(BW(0)), BW(1)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  CHECK(r.violations[0].op_index == 2);
  CHECK(r.violations[0].message ==
        "stage 0, op 2 (BW0): pairs don't chain: BW0 is the second op of the overlapped pair "
        "(F1;BW0) and is marked to overlap with the next op too");
}

TEST_CASE("overlapped pairs: both ops' inputs must be ready when the pair starts",
          "[validate][overlap]") {
  // Stage 0 overlaps F1 with BW0; BW0 needs stage 1's BW0, which stage 1 runs after its F1,
  // which needs stage 0's F1: op by op this runs, as a pair it waits for itself.
  schedule s = schedule::sequential("t", 2, 2);
  s.stage_ops(0) = {F(0), overlapping_next(F(1)), BW(0), BW(1)};
  s.stage_ops(1) = {F(0), F(1), BW(0), BW(1)};
  auto r = validate(s);
  REQUIRE(r.total == 1);
  REQUIRE(r.count(violation_kind::overlap) == 1);
  CHECK(r.violations[0].stage == 0);
  CHECK(r.violations[0].op_index == 1);
  CHECK(r.violations[0].message ==
        "stage 0, op 1 (F1): overlapped with BW0, whose inputs wait for this pair itself "
        "(through other stages): the inputs of both ops must be ready when the pair starts");
  CHECK_FALSE(r.deadlock.has_value());
  // Stage 1 running BW0 first frees the pair.
  s.stage_ops(1) = {F(0), BW(0), F(1), BW(1)};
  CHECK(validate(s).ok());
}

TEST_CASE("recomputation: one R per F marked recompute, after it, before its backward",
          "[validate][recompute]") {
  schedule s = schedule::sequential("t", 1, 2);
  s.stage_ops(0) = {Fr(0), F(1), R(0), BW(0), BW(1)};
  CHECK(validate(s).ok());

  SECTION("B before its R") {
    s.stage_ops(0) = {Fr(0), F(1), BW(0), R(0), BW(1)};
    const auto r = validate(s);
    REQUIRE(r.total == 4);  // BW0 before R0, R0 after its backward, the deadlock (2 lines)
    CHECK(r.count(violation_kind::local_order) == 2);
    CHECK(r.violations[0].message ==
          "stage 0, op 2 (BW0): BW0 of chunk 0 before R0 of chunk 0 (F0 of chunk 0 is marked "
          "recompute: R rebuilds its activations)");
    CHECK(r.violations[1].message ==
          "stage 0, op 3 (R0): R0 of chunk 0 after its backward (R rebuilds the activations the "
          "backward needs)");
    // BW0 waits for R0, later on its own stage.
    CHECK(r.count(violation_kind::deadlock) == 2);
    CHECK(r.violations[2].message ==
          "stage 0, op 2 (BW0): blocked waiting for F/R0 of chunk 0 on stage 0");
  }
  SECTION("R without a marked F") {
    s.stage_ops(0) = {F(0), F(1), R(0), BW(0), BW(1)};
    const auto r = validate(s);
    REQUIRE(r.total == 1);
    CHECK(r.count(violation_kind::recompute) == 1);
    CHECK(r.violations[0].message ==
          "stage 0, op 2 (R0): R0 of chunk 0 re-runs F0 of chunk 0, which is not marked "
          "recompute (it keeps its activations): mark the F (\"recompute\": true in a schedule "
          "JSON, op_flag::recompute in C++) or drop the R");
  }
  SECTION("R before its F, a marked F without R, two R") {
    s.stage_ops(0) = {R(0), Fr(0), Fr(1), R(1), R(1), BW(1), BW(0)};
    const auto r = validate(s);
    CHECK(r.count(violation_kind::duplicate) == 1);
    CHECK(r.count(violation_kind::local_order) == 1);  // R0 before F0 (it does run before BW0)
    CHECK(r.violations[0].message ==
          "stage 0, op 0 (R0): R0 of chunk 0 before F0 of chunk 0 (R re-runs its forward)");
    CHECK(r.count(violation_kind::missing) == 0);  // R0 exists, only misplaced
    s.stage_ops(0) = {Fr(0), F(1), BW(0), BW(1)};
    const auto r2 = validate(s);
    CHECK(r2.count(violation_kind::missing) == 1);
    bool said = false;
    for (const auto& v : r2.violations) {
      said = said || v.message ==
                         "stage 0: R0 of chunk 0 is missing (F0 of chunk 0 is marked "
                         "recompute)";
    }
    CHECK(said);
  }
  SECTION("a pair with an R is not an F and a backward") {
    s.stage_ops(0) = {Fr(0), F(1), overlapping_next(R(0)), BW(0), BW(1)};
    CHECK(validate(s).count(violation_kind::overlap) == 1);
  }
}

namespace {
// p = 2, m = 2 on the dual placement: micro-batch 0 runs stage 0 -> 1 (chunk 0), micro-batch 1
// stage 1 -> 0 (chunk 1).
schedule validate_dual_two() {
  schedule s = schedule::on("dual", placement::dual(2), 2);
  s.stage_ops(0) = {F(0, 0), F(1, 1), BW(1, 1), BW(0, 0)};
  s.stage_ops(1) = {F(1, 1), F(0, 0), BW(0, 0), BW(1, 1)};
  return s;
}
}  // namespace

TEST_CASE("routes: dependencies run along each micro-batch's route", "[validate][routes]") {
  CHECK(validate(validate_dual_two()).ok());

  schedule off = validate_dual_two();
  off.stage_ops(0).push_back(F(0, 1));  // micro-batch 0 never passes chunk 1
  const auto r = validate(off);
  REQUIRE(r.count(violation_kind::out_of_range) == 1);
  CHECK(r.violations[0].message ==
        "stage 0, op 4 (F0.1): micro-batch 0 runs along route 0, which does not pass chunk 1 of "
        "this stage");

  schedule missing = validate_dual_two();
  missing.stage_ops(0).erase(missing.stage_ops(0).begin() + 2);  // BW1 of chunk 1
  const auto rm = validate(missing);
  REQUIRE(rm.count(violation_kind::missing) == 1);  // none for micro-batch 0 on chunk 1
  bool found = false;
  for (const auto& v : rm.violations) {
    if (v.kind == violation_kind::missing) {
      found = true;
      CHECK(v.message == "stage 0: backward (BW, or B and W) 1 of chunk 1 is missing");
    }
  }
  CHECK(found);
}

TEST_CASE("routes: a deadlock across the two directions has a witness", "[validate][routes]") {
  schedule s = schedule::on("dual", placement::dual(2), 2);
  // Stage 0 runs micro-batch 0's backward (waiting for stage 1's) before micro-batch 1's loss;
  // stage 1 runs micro-batch 1's backward (waiting for stage 0's) before micro-batch 0's loss.
  s.stage_ops(0) = {F(0, 0), F(1, 1), BW(0, 0), BW(1, 1)};
  s.stage_ops(1) = {F(1, 1), F(0, 0), BW(1, 1), BW(0, 0)};
  const auto r = validate(s);
  REQUIRE(r.deadlock.has_value());
  CHECK(r.deadlock->cycle == std::vector<stage_index>{0, 1});
  CHECK(r.deadlock->describe() ==
        "deadlock: stage 0 blocked at op 2 (BW0) waiting for B/BW0 of chunk 0 on stage 1; "
        "stage 1 blocked at op 2 (BW1.1) waiting for B/BW1 of chunk 1 on stage 0; "
        "cycle: stage 0 -> stage 1 -> stage 0");
}
