#include <catch2/catch.hpp>

#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/validate/traversal.hpp>

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
  schedule s("t", 1, 1);
  s.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  const auto r = traverse(s, [](stage_index, std::size_t, const op&) {});
  CHECK_FALSE(r.complete);
  CHECK(r.witness.cycle == std::vector<stage_index>{0});
}
