// Validation of lowered schedules (SEND_F / RECV_F / SEND_B / RECV_B): pairing, local order,
// and the blocking rendezvous simulation with its deadlock witness.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/ir/dependencies.hpp>
#include <pipesched/ir/traversal.hpp>

#include "support/ops.hpp"

using namespace pipesched;
using namespace test_ops;

namespace {

/// p=2, m=1, correctly lowered.
schedule two_stage_lowered() {
  schedule s = schedule::sequential("t", 2, 1);
  s.stage_ops(0) = {F(0), SF(0), RB(0), BW(0)};
  s.stage_ops(1) = {RF(0), F(0), BW(0), SB(0)};
  return s;
}

/// Each receive right before its consumer, each send right after its producer.
schedule naive_lowering(const schedule& in) {
  const placement& pl = in.layout();
  schedule out = schedule::on(in.name(), pl, in.microbatches());
  for (stage_index s = 0; s < in.stages(); ++s) {
    for (const op& o : in.ops(s)) {
      const global_chunk g = pl.global(s, o.chunk);
      const bool fwd = o.kind == op_kind::forward;
      if (fwd && g > 0 && pl.stage_of(g - 1) != s) {
        out.stage_ops(s).push_back(RF(o.mb, o.chunk));
      } else if (!fwd && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
        out.stage_ops(s).push_back(RB(o.mb, o.chunk));
      }
      out.stage_ops(s).push_back(o);
      if (fwd && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
        out.stage_ops(s).push_back(SF(o.mb, o.chunk));
      } else if (!fwd && g > 0 && pl.stage_of(g - 1) != s) {
        out.stage_ops(s).push_back(SB(o.mb, o.chunk));
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("comm_peer names the stage of the partner", "[validate][comm]") {
  const placement v = placement::v_shape(3);  // stage 0: chunks 0, 5; 1: 1, 4; 2: 2, 3
  CHECK(comm_peer(v, 0, SF(0, 0)) == std::optional<stage_index>{1});
  CHECK(comm_peer(v, 1, RB(4, 1)) == std::optional<stage_index>{0});  // gradient of chunk 5
  CHECK(comm_peer(v, 2, SF(0, 1)) == std::optional<stage_index>{1});  // chunk 3 -> 4
  CHECK(comm_peer(v, 2, SF(0, 0)) == std::optional<stage_index>{2});  // the V turn: itself
  CHECK_FALSE(comm_peer(v, 0, SF(0, 1)).has_value());                 // last chunk
  CHECK_FALSE(comm_peer(v, 0, RF(0, 0)).has_value());                 // first chunk
  CHECK_FALSE(comm_peer(v, 0, F(0)).has_value());
}

TEST_CASE("a correctly lowered schedule validates and rendezvous are visited in pairs",
          "[validate][comm]") {
  const schedule s = two_stage_lowered();
  CHECK(validate(s).ok());
  std::vector<std::string> order;
  const auto tr = traverse(s, [&](stage_index st, std::size_t, const op& o) {
    order.push_back(std::to_string(st) + ":" + to_string(o));
  });
  CHECK(tr.complete);
  CHECK(order == std::vector<std::string>{"0:F0", "0:SEND_F0", "1:RECV_F0", "1:F0", "1:BW0",
                                          "1:SEND_B0", "0:RECV_B0", "0:BW0"});
}

TEST_CASE("pairing: a missing receive is reported, and the send waits for it forever",
          "[validate][comm]") {
  schedule s = two_stage_lowered();
  s.stage_ops(1) = {F(0), BW(0), SB(0)};  // RECV_F0 dropped
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::comm_mismatch) == 1);
  CHECK(r.violations[0].message ==
        "stage 1: RECV_F0 of chunk 0 is missing (its partner transfer needs it)");
  REQUIRE(r.deadlock.has_value());
  // Stage 1's F0 waits for a local RECV_F0 that never comes; stage 0's SEND_F0 waits on it.
  REQUIRE(r.deadlock->stuck.size() == 2);
  CHECK(r.deadlock->stuck[0].blocked == SF(0));
  CHECK(r.deadlock->stuck[0].waits_for == "matching RECV_F0.0 on stage 1");
  CHECK(r.deadlock->stuck[1].blocked == F(0));
  CHECK(r.deadlock->stuck[1].waits_for == "RECV_F0 of chunk 0 on stage 1");
}

TEST_CASE("pairing: duplicates, transfers without a peer, same-stage transfers",
          "[validate][comm]") {
  SECTION("a send twice") {
    schedule s = two_stage_lowered();
    s.stage_ops(0) = {F(0), SF(0), SF(0), RB(0), BW(0)};
    const auto r = validate(s);
    REQUIRE(r.count(violation_kind::duplicate) == 1);
    CHECK(r.violations[0].message ==
          "stage 0, op 2 (SEND_F0): appears more than once on this stage");
    CHECK(r.deadlock.has_value());  // the second SEND_F0 has no receive left
  }
  SECTION("SEND_B of the first chunk and RECV_F of the first chunk") {
    schedule s = two_stage_lowered();
    s.stage_ops(0) = {RF(0), F(0), SF(0), RB(0), BW(0), SB(0)};
    const auto r = validate(s);
    REQUIRE(r.count(violation_kind::comm_mismatch) == 2);
    CHECK(r.violations[0].message ==
          "stage 0, op 0 (RECV_F0): no transfer exists for this op (first or last chunk)");
    CHECK(r.violations[1].message ==
          "stage 0, op 5 (SEND_B0): no transfer exists for this op (first or last chunk)");
    CHECK_FALSE(r.deadlock.has_value());  // peerless comm ops run as no-ops
  }
  SECTION("the V turn needs no transfer") {
    // V, p=1: stage 0 holds chunks 0 and 1.
    schedule s = schedule::on("v", placement::v_shape(1), 1);
    s.stage_ops(0) = {F(0, 0), SF(0, 0), RF(0, 1), F(0, 1), BW(0, 1), BW(0, 0)};
    const auto r = validate(s);
    REQUIRE(r.count(violation_kind::comm_mismatch) == 2);
    CHECK(r.violations[0].message ==
          "stage 0, op 1 (SEND_F0.0): producer and consumer are on the same stage: no transfer "
          "is needed");
  }
  SECTION("a receive for the wrong micro-batch") {
    schedule s = schedule::sequential("t", 2, 2);
    s.stage_ops(0) = {F(0), SF(0), RB(0), BW(0), F(1), SF(1), RB(1), BW(1)};
    s.stage_ops(1) = {RF(1), F(0), BW(0), SB(0), RF(1), F(1), BW(1), SB(1)};
    const auto r = validate(s);
    CHECK(r.count(violation_kind::duplicate) == 1);
    CHECK(r.count(violation_kind::comm_mismatch) == 1);  // RECV_F0 missing on stage 1
    CHECK(r.deadlock.has_value());
  }
}

TEST_CASE("local order: a send before its producer, a receive after its consumer",
          "[validate][comm]") {
  schedule s = two_stage_lowered();
  s.stage_ops(0) = {SF(0), F(0), RB(0), BW(0)};
  s.stage_ops(1) = {F(0), RF(0), BW(0), SB(0)};
  const auto r = validate(s);
  REQUIRE(r.count(violation_kind::local_order) == 2);
  CHECK(r.violations[0].message ==
        "stage 0, op 0 (SEND_F0): SEND_F0 of chunk 0 before F0 of chunk 0");
  CHECK(r.violations[1].message ==
        "stage 1, op 1 (RECV_F0): RECV_F0 of chunk 0 after its consumer F0 of chunk 0");
  CHECK(r.deadlock.has_value());
}

TEST_CASE("two stages each sending first to the other deadlock with blocking sends",
          "[validate][comm][deadlock]") {
  // Fine with buffered sends, stuck with rendezvous: stage 0 sends F1 before receiving B0,
  // stage 1 sends B0 before receiving F1.
  schedule s = schedule::sequential("t", 2, 2);
  s.stage_ops(0) = {F(0), SF(0), F(1), SF(1), RB(0), BW(0), RB(1), BW(1)};
  s.stage_ops(1) = {RF(0), F(0), BW(0), SB(0), RF(1), F(1), BW(1), SB(1)};
  const auto r = validate(s);
  CHECK(r.count(violation_kind::comm_mismatch) == 0);
  CHECK(r.count(violation_kind::local_order) == 0);
  CHECK(r.count(violation_kind::missing) == 0);
  REQUIRE(r.deadlock.has_value());
  const auto& w = *r.deadlock;
  CHECK(w.cycle == std::vector<stage_index>{0, 1});
  REQUIRE(w.stuck.size() == 2);
  CHECK(w.stuck[0].stage == 0);
  CHECK(w.stuck[0].op_index == 3);
  CHECK(w.stuck[0].blocked == SF(1));
  CHECK(w.stuck[0].waits_on_stage == 1);
  CHECK_FALSE(w.stuck[0].never_produced);
  CHECK(w.stuck[1].stage == 1);
  CHECK(w.stuck[1].op_index == 3);
  CHECK(w.stuck[1].blocked == SB(0));
  CHECK(w.stuck[1].waits_on_stage == 0);
  CHECK(w.describe() ==
        "deadlock: stage 0 blocked at op 3 (SEND_F1) waiting for matching RECV_F1.0 on stage 1; "
        "stage 1 blocked at op 3 (SEND_B0) waiting for matching RECV_B0.0 on stage 0; "
        "cycle: stage 0 -> stage 1 -> stage 0");
  CHECK(r.count(violation_kind::deadlock) == 3);  // two stuck ops and the summary

  // Swapping stage 1's SEND_B0 and RECV_F1 resolves it.
  s.stage_ops(1) = {RF(0), F(0), BW(0), RF(1), SB(0), F(1), BW(1), SB(1)};
  CHECK(validate(s).ok());
}

TEST_CASE("naive lowering of 1F1B deadlocks along a chain of neighbours",
          "[validate][comm][deadlock]") {
  for (std::uint32_t p : {2u, 3u, 4u, 6u}) {
    const schedule s = naive_lowering(generate(one_f_one_b{}, p, 2 * p));
    INFO("p=" << p);
    const auto r = validate(s);
    CHECK(r.count(violation_kind::comm_mismatch) == 0);
    CHECK(r.count(violation_kind::local_order) == 0);
    REQUIRE(r.deadlock.has_value());
    const auto& cycle = r.deadlock->cycle;
    REQUIRE(cycle.size() == 2);  // two neighbours sending to each other
    CHECK(cycle[1] == cycle[0] + 1);
    for (const auto& b : r.deadlock->stuck) {
      if (b.stage == cycle[0]) {
        CHECK(b.blocked.kind == op_kind::send_forward);
      }
      if (b.stage == cycle[1]) {
        CHECK(b.blocked.kind == op_kind::send_backward);
      }
    }
  }
}
