#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/model/cost_model.hpp>

using namespace pipesched;

namespace {
// A chunk's costs are read only from a model read for a shape (for_shape): on a plain model a
// chunk > 0 would take the stage's whole slice, v times too large.
template <class M>
concept reads_chunk_costs = requires(const M& m) {
  m.at(stage_index{0}, chunk_index{1});
  m.duration(stage_index{0}, op_kind::forward, chunk_index{1});
  m.overlap_gain(stage_index{0}, chunk_index{1});
};
static_assert(!reads_chunk_costs<cost_model>);
static_assert(reads_chunk_costs<shaped_cost_model>);
static_assert(std::is_convertible_v<shaped_cost_model, cost_model>);  // goes where one goes
}  // namespace

TEST_CASE("cost_model: defaults and uniform costs", "[sim][cost]") {
  const shaped_cost_model unit = cost_model{}.for_shape(6, 1, "t");
  CHECK(unit.is_uniform());
  CHECK(unit.duration(0, op_kind::forward) == 1);
  CHECK(unit.duration(5, op_kind::backward_full) == 2);
  CHECK(unit.duration(1, op_kind::send_forward) == 0);
  CHECK(unit.duration(1, op_kind::recv_backward) == 0);
  CHECK(unit.comm(0, 1) == 0);

  const auto c = cost_model::uniform(3, 4, 2, 0.5).for_shape(3, 1, "t");
  CHECK(c.duration(2, op_kind::forward) == 3);
  CHECK(c.duration(2, op_kind::backward_input) == 4);
  CHECK(c.duration(2, op_kind::backward_weight) == 2);
  CHECK(c.duration(2, op_kind::backward_full) == 6);
  CHECK(c.comm(0, 1) == 0.5);
  CHECK(c.comm(1, 1) == 0);  // same stage: no transfer
  CHECK(c.uniform_costs() == op_costs{3, 4, 2});
}

TEST_CASE("cost_model: per-stage and per-chunk costs", "[sim][cost]") {
  cost_model c;
  c.set_stage_costs({op_costs{1, 2, 3}, op_costs{4, 5, 6}});
  CHECK_FALSE(c.is_uniform());
  CHECK(c.for_shape(2, 1, "t").at(1).backward_input == 5);
  CHECK(c.for_shape(2, 1, "t").duration(0, op_kind::backward_full) == 5);

  c.set_chunk_costs(2,
                    {op_costs{1, 1, 1}, op_costs{2, 2, 2}, op_costs{3, 3, 3}, op_costs{4, 4, 4}});
  CHECK(c.stage_costs().empty());  // per-chunk replaces per-stage
  const shaped_cost_model v2 = c.for_shape(2, 2, "t");
  CHECK(v2.at(0, 1).forward == 2);
  CHECK(v2.at(1, 0).forward == 3);
  CHECK(v2.duration(1, op_kind::backward_full, 1) == 8);
  CHECK(c.chunk_costs_chunks() == 2);
}

TEST_CASE("cost_model: per-link latencies", "[sim][cost]") {
  cost_model c = cost_model::uniform(1, 1, 1, 0.25);
  c.set_link_comm(2, {0, 1.5, 2.5, 0});
  CHECK(c.comm(0, 1) == 1.5);
  CHECK(c.comm(1, 0) == 2.5);
  CHECK(c.comm(0, 0) == 0);
  c.set_comm(0.75);  // clears the table
  CHECK(c.link_comm().empty());
  CHECK(c.comm(0, 1) == 0.75);
}

TEST_CASE("cost_model: rejects negative, NaN and infinite values and bad sizes", "[sim][cost]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(cost_model::uniform(-1, 1, 1), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, nan, 1), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, 1, inf), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, 1, 1, -0.5), invalid_argument);
  cost_model c;
  CHECK_THROWS_AS(c.set_stage_costs({op_costs{1, -1, 1}}), invalid_argument);
  CHECK_THROWS_AS(c.set_chunk_costs(2, {op_costs{}, op_costs{}, op_costs{}}), invalid_argument);
  CHECK_THROWS_AS(c.set_chunk_costs(0, {}), invalid_argument);
  CHECK_THROWS_AS(c.set_comm(nan), invalid_argument);
  CHECK_THROWS_AS(c.set_link_comm(2, {0, 1, 1}), invalid_argument);
  CHECK_THROWS_AS(c.set_link_comm(2, {0, 1, -1, 0}), invalid_argument);
  CHECK_THROWS_WITH(cost_model::uniform(-1, 1, 1),
                    Catch::Contains("forward cost (T_F)") && Catch::Contains("must be finite"));
}

TEST_CASE("cost_model: per-stage costs are split over the chunks, per-chunk ones are not",
          "[sim][cost][units]") {
  // One stage's whole slice costs (4, 6, 2) per micro-batch: with v = 2 a chunk costs half,
  // with v = 4 a quarter; T_comm is one transfer's latency and is not split.
  const auto c = cost_model::uniform(4, 6, 2, 0.5);
  const shaped_cost_model v2 = c.for_shape(3, 2, "t");
  CHECK(v2.stages() == 3);
  CHECK(v2.chunks() == 2);
  CHECK(v2.at(2, 1) == op_costs{2, 3, 1});
  CHECK(v2.duration(0, op_kind::backward_full, 1) == 4);
  CHECK(v2.comm(0, 1) == 0.5);
  CHECK(c.for_shape(3, 4, "t").at(1, 3) == op_costs{1, 1.5, 0.5});
  CHECK(c.for_shape(3, 1, "t").at(1, 0) == op_costs{4, 6, 2});
  // Per-stage table: split too. Per-chunk table: each chunk's own cost.
  cost_model st;
  st.set_stage_costs({op_costs{2, 2, 2}, op_costs{4, 4, 4}});
  CHECK(st.for_shape(2, 2, "t").at(1, 1) == op_costs{2, 2, 2});
  cost_model ch;
  ch.set_chunk_costs(2,
                     {op_costs{1, 1, 1}, op_costs{2, 2, 2}, op_costs{3, 3, 3}, op_costs{4, 4, 4}});
  CHECK(ch.for_shape(2, 2, "t").at(1, 1) == op_costs{4, 4, 4});
  // T_R: T_F unless set, split like the others.
  CHECK(v2.duration(0, op_kind::recompute, 1) == 2);
  cost_model r = cost_model::uniform(4, 6, 2);
  r.set_recompute(3);
  CHECK(r.for_shape(3, 2, "t").duration(1, op_kind::recompute, 0) == 1.5);
  CHECK(r.for_shape(3, 2, "t").at(1, 0).recompute == 1.5);
  CHECK_THROWS_WITH(r.set_recompute(-1),
                    "cost_model::set_recompute: recompute cost (T_R) (-1) "
                    "must be finite and >= 0");
  // Reading again for another shape starts from the per-stage values, not the split ones.
  CHECK(v2.for_shape(3, 1, "t").at(0, 0) == op_costs{4, 6, 2});
}

TEST_CASE("cost_model: tables must have the schedule's shape", "[sim][cost][units]") {
  cost_model st;
  st.set_stage_costs({op_costs{1, 1, 1}, op_costs{2, 2, 2}});
  CHECK_NOTHROW(st.for_shape(2, 2, "simulate"));
  CHECK_THROWS_WITH(st.for_shape(4, 1, "simulate"),
                    "simulate: cost model stages table (2 entries) must hold one entry per stage "
                    "(p=4)");
  CHECK_THROWS_WITH(st.for_shape(1, 1, "simulate"),
                    "simulate: cost model stages table (2 entries) must hold one entry per stage "
                    "(p=1)");
  cost_model ch;
  ch.set_chunk_costs(2, std::vector<op_costs>(4));
  CHECK_NOTHROW(ch.for_shape(2, 2, "zb-v"));
  CHECK_THROWS_WITH(ch.for_shape(4, 1, "simulate"),
                    "simulate: cost model chunks table (2 x 2) must be p x v (4 x 1)");
  CHECK_THROWS_WITH(ch.for_shape(1, 2, "simulate"),
                    "simulate: cost model chunks table (2 x 2) must be p x v (1 x 2)");
  cost_model ln;
  ln.set_link_comm(2, {0, 1, 1, 0});
  CHECK_NOTHROW(ln.for_shape(2, 1, "simulate"));
  CHECK_THROWS_WITH(ln.for_shape(3, 1, "simulate"),
                    "simulate: cost model links matrix (2 x 2) must be p x p (3 x 3)");
}

TEST_CASE("overlap_split: compute runs slower beside the communication it hides",
          "[sim][cost][overlap]") {
  // 10 s of compute hide 4 s of communication, 25 % slower for those 4 s: 11 s, nothing exposed.
  overlapped_seconds o = overlap_split(10.0, 4.0, 0.25);
  CHECK(o.compute == 11.0);
  CHECK(o.exposed == 0.0);
  // Communication-bound: 4 s of compute slowed to 5 beside 8 s of communication: 3 s exposed,
  // the pair lasts the communication.
  o = overlap_split(4.0, 8.0, 0.25);
  CHECK(o.compute == 5.0);
  CHECK(o.exposed == 3.0);
  CHECK(o.total() == 8.0);
  // ... until the slowed compute outlasts it: max(communication, compute + slowdown·h).
  CHECK(overlap_split(7.0, 8.0, 0.25).total() == 8.75);
  // Without slowdown the pair lasts the longer of the two; nothing beside, nothing slower.
  CHECK(overlap_split(10.0, 4.0, 0.0).total() == 10.0);
  CHECK(overlap_split(4.0, 8.0, 0.0).total() == 8.0);
  CHECK(overlap_split(10.0, 0.0, 0.5).total() == 10.0);
  // The slowed pair never lasts less than without slowdown, nor more than one after the other.
  for (double c : {0.0, 1.0, 3.0, 9.0}) {
    for (double a : {0.0, 0.5, 3.0, 12.0}) {
      for (double s : {0.0, 0.189, 1.0}) {
        const double t = overlap_split(c, a, s).total();
        CHECK(t >= std::max(c, a));
        CHECK(t <= c + a);
      }
    }
  }
}

TEST_CASE("overlapped_pair_time: each op's communication hides behind the other's compute",
          "[sim][cost][overlap]") {
  // F computes 3 and sends 1, B computes 5 and sends 2: both sends fit under the other's
  // compute, the pair lasts the two computations, 8 (3 saved of 4 + 7).
  CHECK(overlapped_pair_time({3, 1}, {5, 2}) == 8.0);
  // Without communication nothing is hidden: T_F + T_B.
  CHECK(overlapped_pair_time({3, 0}, {5, 0}) == 8.0);
  // Communication-bound: the links carry 4 + 4 while the units compute 1 + 2.
  CHECK(overlapped_pair_time({1, 4}, {2, 4}) == 8.0);
  // F alone binds: its send waits for its compute, 1 + 6 = 7, against 6.5 of sends and 3 of
  // compute; with a longer B send the links bind instead, 6 + 1 = 7 against F's 6.5.
  CHECK(overlapped_pair_time({1, 6}, {2, 0.5}) == 7.0);
  CHECK(overlapped_pair_time({0.5, 6}, {2, 1}) == 7.0);
  // F alone 2 + 5 = 7 against compute 2 + 4 = 6 and sends 5 + 0 = 5.
  CHECK(overlapped_pair_time({2, 5}, {4, 0}) == 7.0);
  // With compute half again as slow beside what it hides: the first pair's 3 hidden seconds
  // add 1.5 (8 + 1.5); communication-bound, the slowed compute (3 · 1.5) still fits under 8.
  CHECK(overlapped_pair_time({3, 1}, {5, 2}, 0.5) == 9.5);
  CHECK(overlapped_pair_time({1, 4}, {2, 4}, 0.5) == 8.0);
  CHECK(overlapped_pair_time({3, 0}, {5, 0}, 0.5) == 8.0);
  // Never below either op alone, never above the two in turn.
  for (double cf : {0.0, 1.0, 3.0}) {
    for (double af : {0.0, 0.5, 4.0}) {
      for (double cb : {0.0, 2.0, 5.0}) {
        for (double ab : {0.0, 1.0, 6.0}) {
          const double t = overlapped_pair_time({cf, af}, {cb, ab});
          CHECK(t >= std::max(cf + af, cb + ab));
          CHECK(t <= cf + af + cb + ab);
          const double slowed = overlapped_pair_time({cf, af}, {cb, ab}, 0.189);
          CHECK(slowed >= t);
          CHECK(slowed <= cf + af + cb + ab);
        }
      }
    }
  }
}
