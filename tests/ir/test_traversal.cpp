#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/ir/traversal.hpp>

using namespace pipesched;

TEST_CASE("traverse visits every op once, respecting dependencies", "[validate][traversal]") {
  const auto s = generate(zb_h2{}, 4, 6);
  std::vector<std::vector<bool>> seen(4);
  for (stage_index st = 0; st < 4; ++st) {
    seen[st].assign(s.ops(st).size(), false);
  }
  std::size_t n = 0;
  // F of stage st must come after F of stage st-1 for the same micro-batch.
  std::vector<std::vector<int>> f_done(4, std::vector<int>(6, 0));
  const auto r = traverse(s, [&](stage_index st, std::size_t i, const op& o) {
    CHECK_FALSE(seen[st][i]);
    seen[st][i] = true;
    if (i > 0) {
      CHECK(seen[st][i - 1]);
    }
    if (o.kind == op_kind::forward) {
      if (st > 0) {
        CHECK(f_done[st - 1][o.mb] == 1);
      }
      f_done[st][o.mb] = 1;
    }
    ++n;
  });
  CHECK(r.complete);
  CHECK(n == s.size());
}

TEST_CASE("traverse reports a self-deadlock on a single stage", "[validate][traversal]") {
  schedule s = schedule::sequential("t", 1, 1);
  s.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  const auto r = traverse(s, [](stage_index, std::size_t, const op&) {});
  CHECK_FALSE(r.complete);
  CHECK(r.witness.cycle == std::vector<stage_index>{0});
}

TEST_CASE("a deadlock cycle through every stage: on_cycle, describe", "[validate][traversal]") {
  // Interleaved 1F1B, m = 1, v = 2, with each stage's first two ops swapped: stage s starts
  // with F0 of its chunk 1 (global chunk p+s), which waits for stage s-1's, and stage 0's for
  // stage p-1's chunk 0: one cycle through all p stages. Listing the stuck stages on it is
  // one pass (was a scan of the cycle per stuck stage, p² steps).
  const std::uint32_t p = 65536;
  schedule s = interleaved_1f1b{}.order(p, 1, 2);
  for (stage_index st = 0; st < p; ++st) {
    std::swap(s.stage_ops(st)[0], s.stage_ops(st)[1]);
  }
  const auto r = traverse(s, [](stage_index, std::size_t, const op&) {});
  REQUIRE_FALSE(r.complete);
  REQUIRE(r.witness.stuck.size() == p);
  REQUIRE(r.witness.cycle.size() == p);
  const std::vector<bool> on = r.witness.on_cycle();
  REQUIRE(on.size() == p);
  CHECK(static_cast<std::uint32_t>(std::count(on.begin(), on.end(), true)) == p);
  const std::string d = r.witness.describe();
  CHECK(d.rfind("deadlock: stage 0 blocked at op 0 (F0.1) waiting for F0 of chunk 0 on stage "
                "65535;",
                0) == 0);
  CHECK(d.size() > 60 * std::size_t{p});  // every stuck stage is listed, then the cycle

  // A stuck stage off the cycle (waiting on one that is on it) is not listed.
  deadlock_witness w;
  for (const stage_index st : {0u, 3u, 5u}) {
    blocked_stage b;
    b.stage = st;
    w.stuck.push_back(b);
  }
  w.cycle = {5, 0};
  CHECK(w.on_cycle() == std::vector<bool>{true, false, false, false, false, true});
  CHECK(w.describe().find("stage 3") == std::string::npos);
}
