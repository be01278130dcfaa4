#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/ir/traversal.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/ops.hpp"
#include "support/options.hpp"

using namespace pipesched;
using namespace test_ops;
using namespace test_options;

namespace {

// The (start, end) of each timed op: what the timing tests pin.
using spans = std::vector<std::pair<double, double>>;
spans intervals(std::span<const timed_op> ops) {
  spans out;
  for (const timed_op& t : ops) {
    out.emplace_back(t.start, t.end);
  }
  return out;
}

struct triple {
  double f, b, w;
};

const std::vector<triple> cost_triples = {{3, 4, 2}, {1, 1, 1}, {2, 3, 1},
                                          {1, 2, 1}, {5, 6, 4}, {4, 5, 1}};

// Sum of the ops' durations along the critical path plus T_comm on each remote hop, where
// consecutive ops touch: for a non-lowered schedule this equals the makespan exactly.
void check_critical_path(const schedule& s, const cost_model& c, const simulation_result& r) {
  REQUIRE_FALSE(r.critical_path.empty());
  const auto& first = r.critical_path.front();
  CHECK(r.ops[first.stage][first.op_index].start == 0.0);
  const auto& last = r.critical_path.back();
  CHECK(r.ops[last.stage][last.op_index].end == r.makespan);
  for (std::size_t k = 1; k < r.critical_path.size(); ++k) {
    const auto& a = r.critical_path[k - 1];
    const auto& b = r.critical_path[k];
    const double gap = a.stage == b.stage ? 0.0 : c.comm(a.stage, b.stage);
    CHECK(r.ops[b.stage][b.op_index].start == Approx(r.ops[a.stage][a.op_index].end + gap));
    if (a.stage == b.stage) {
      CHECK(b.op_index > a.op_index);
    }
  }
  (void)s;
}

}  // namespace

TEST_CASE("simulate: closed-form bubbles for 1F1B, ZB-H1, ZB-H2 and GPipe", "[sim]") {
  for (const auto& t : cost_triples) {
    for (auto [p, m] : {std::pair{8u, 24u}, std::pair{4u, 8u}, std::pair{3u, 9u},
                        std::pair{5u, 10u}, std::pair{2u, 6u}}) {
      const auto c = cost_model::uniform(t.f, t.b, t.w);
      const double all = t.f + t.b + t.w;
      // schedule, bubble per stage (p−1)·x with x per schedule
      const std::vector<std::tuple<schedule, double>> cases = {
          {generate(one_f_one_b{}, p, m), all},
          {generate(gpipe{}, p, m), all},
          {generate(zb_h1{}, p, m), t.f + t.b - t.w},
          {generate(zb_h2{}, p, m), t.f + t.b - 2 * t.w},
      };
      for (const auto& [s, x] : cases) {
        INFO(s.name() << " p=" << p << " m=" << m << " costs " << t.f << "," << t.b << "," << t.w);
        if (x < 0) {
          continue;  // ZB-H2's closed form needs T_F + T_B >= 2·T_W
        }
        const auto r = simulate(s, c);
        REQUIRE(r.completed());
        const double busy = m * all;
        // Stage 0 starts first and spans busy + (p−1)·x; the last stage never idles and starts
        // (p−1)·T_F late, so it ends last when x < T_F (ZB-H2 with T_B < 2·T_W).
        CHECK(r.makespan == Approx(busy + (p - 1) * std::max(x, t.f)));
        CHECK(r.max_span_stage == 0);
        CHECK(r.bubble_rate == Approx((p - 1) * x / (busy + (p - 1) * x)));
        for (stage_index i = 0; i < p; ++i) {
          INFO("stage " << i);
          const auto& st = r.stages[i];
          CHECK(st.busy == Approx(busy));
          // Stage i (0-based) starts i forwards late and stops early by as much: its own span
          // holds (p−1−i)·x idle, and idle over the whole iteration is the bubble (p−1)·x.
          CHECK(st.idle == Approx((p - 1 - i) * x).margin(1e-9));
          CHECK(st.span == Approx(busy + (p - 1 - i) * x));
          CHECK(st.makespan_idle == Approx(r.makespan - busy).margin(1e-9));
          CHECK(st.idle == Approx(st.span - st.busy).margin(1e-9));
          CHECK(st.comm == 0.0);
        }
      }
    }
  }
}

TEST_CASE("simulate: (T_F,T_B,T_W) = (3,4,2), p=8, m=24 gives bubbles 63 / 35 / 21", "[sim]") {
  const auto c = cost_model::uniform(3, 4, 2);
  const auto a = simulate(generate(one_f_one_b{}, 8, 24), c);
  const auto b = simulate(generate(zb_h1{}, 8, 24), c);
  const auto d = simulate(generate(zb_h2{}, 8, 24), c);
  CHECK(a.max_idle() == 63);
  CHECK(b.max_idle() == 35);
  CHECK(d.max_idle() == 21);
  for (stage_index i = 0; i < 8; ++i) {
    CHECK(a.stages[i].makespan_idle == 63);
    CHECK(b.stages[i].makespan_idle == 35);
    CHECK(d.stages[i].makespan_idle == 21);
    CHECK(a.idle(i) == 63 - 9 * i);
    CHECK(b.idle(i) == 35 - 5 * i);
    CHECK(d.idle(i) == 21 - 3 * i);
  }
  CHECK(a.span(0) == 24 * 9 + 63);
  CHECK(a.bubble_rate == Approx(63.0 / 279.0));
  CHECK(b.bubble_rate == Approx(35.0 / 251.0));
  CHECK(d.bubble_rate == Approx(21.0 / 237.0));
}

TEST_CASE("simulate: unit costs p=4 m=8: spans 33 / 27 / 24", "[sim]") {
  const auto a = simulate(generate(one_f_one_b{}, 4, 8));
  const auto b = simulate(generate(zb_h1{}, 4, 8));
  const auto d = simulate(generate(zb_h2{}, 4, 8));
  CHECK(a.span(0) == 33);
  CHECK(b.span(0) == 27);
  CHECK(d.span(0) == 24);
  CHECK(a.makespan == 33);
  CHECK(b.makespan == 27);
  // ZB-H2 with equal costs: every stage busy for its whole span, but stage 3 starts 3 late.
  CHECK(d.makespan == 27);
  for (stage_index i = 0; i < 4; ++i) {
    CHECK(d.span(i) == 24);
    CHECK(d.idle(i) == 0);
  }
  CHECK(d.bubble_rate == 0.0);
}

TEST_CASE("simulate: small-m iteration times (m <= p)", "[sim]") {
  for (const auto& t : cost_triples) {
    for (std::uint32_t p : {3u, 4u, 6u}) {
      for (std::uint32_t m = 1; m <= p; ++m) {
        INFO("p=" << p << " m=" << m << " costs " << t.f << "," << t.b << "," << t.w);
        const auto c = cost_model::uniform(t.f, t.b, t.w);
        const double one = (m + p - 1) * (t.f + t.b + t.w);
        const double zb = (m + p - 1) * (t.f + t.b) + t.w;
        CHECK(simulate(generate(one_f_one_b{}, p, m), c).makespan == Approx(one));
        CHECK(simulate(generate(gpipe{}, p, m), c).makespan == Approx(one));
        CHECK(simulate(generate(zb_h1{}, p, m), c).makespan == Approx(zb));
        if (t.b >= 2 * t.w) {  // ZB-H2's doubled W delay costs more when T_B < 2·T_W
          CHECK(simulate(generate(zb_h2{}, p, m), c).makespan == Approx(zb));
        }
        CHECK(simulate(generate(zb_h1{}, p, m), c).span(0) == Approx(zb));
      }
    }
  }
}

TEST_CASE("simulate: GPipe with T_comm pays 2(p-1) transfers", "[sim]") {
  for (auto [p, m] : {std::pair{4u, 5u}, std::pair{2u, 3u}, std::pair{6u, 2u}}) {
    for (double comm : {0.5, 2.0}) {
      const auto c = cost_model::uniform(1, 2, 1, comm);
      const auto r = simulate(generate(gpipe{}, p, m), c);
      CHECK(r.makespan == Approx((m + p - 1) * 4.0 + 2.0 * (p - 1) * comm));
    }
  }
  CHECK(simulate(generate(gpipe{}, 4, 5), cost_model::uniform(1, 2, 1, 0.5)).makespan == 35);
}

TEST_CASE("simulate: heterogeneous stages and T_comm, computed by hand", "[sim]") {
  // 1F1B p=2 m=2. stage 0: F0 F1 BW0 BW1, stage 1: F0 BW0 F1 BW1.
  auto c = cost_model::uniform(1, 1, 1, 0.5);
  c.set_stage_costs({op_costs{1, 2, 1}, op_costs{2, 3, 1}});
  const auto s = generate(one_f_one_b{}, 2, 2);
  const auto r = simulate(s, c);
  REQUIRE(r.completed());
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {1, 2}, {8, 11}, {14, 17}});
  CHECK(intervals(r.ops[1]) == spans{{1.5, 3.5}, {3.5, 7.5}, {7.5, 9.5}, {9.5, 13.5}});
  CHECK(r.makespan == 17);
  CHECK(r.stages[0].span == 17);
  CHECK(r.stages[0].busy == 8);
  CHECK(r.stages[0].idle == 9);
  CHECK(r.stages[0].idle_fraction == Approx(9.0 / 17.0));
  CHECK(r.stages[1].first_start == 1.5);
  CHECK(r.stages[1].last_end == 13.5);
  CHECK(r.stages[1].span == 12);
  CHECK(r.stages[1].busy == 12);
  CHECK(r.stages[1].idle == 0);
  CHECK(r.stages[1].idle_fraction == 0);
  // Longest span 17 (stage 0) against the busiest stage's 12 (stage 1).
  CHECK(r.bubble_rate == Approx((17.0 - 12.0) / 17.0));
  CHECK(r.utilization == Approx((8.0 + 12.0) / (2 * 17.0)));
  CHECK(r.critical_path ==
        std::vector<op_location>{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {1, 3}, {0, 3}});
  check_critical_path(s, c, r);
}

TEST_CASE("simulate: bubble rate is the longest span against the busiest stage", "[sim]") {
  // GPipe p=2 m=1: stage 1 (last) costs (4,4,4), stage 0 costs (1,1,1).
  auto c = cost_model::unit();
  c.set_stage_costs({op_costs{1, 1, 1}, op_costs{4, 4, 4}});
  const auto r = simulate(generate(gpipe{}, 2, 1), c);
  // stage 0: F [0,1], BW [13,15]; stage 1: F [1,5], BW [5,13].
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {13, 15}});
  CHECK(intervals(r.ops[1]) == spans{{1, 5}, {5, 13}});
  CHECK(r.max_span_stage == 0);
  // Not stage 0's own busy time (3): the busiest stage (12) is what the span can't go below.
  CHECK(r.bubble_rate == Approx((15.0 - 12.0) / 15.0));
  CHECK(r.utilization == Approx((3.0 + 12.0) / (2 * 15.0)));
  CHECK(r.stages[1].idle_fraction == 0);

  // 1F1B p=2 m=4 with stage costs (1,1,1) and (3,3,3): the heavy stage is busy 36 of its
  // span, so the bubble is small (it was 0.69 when the light stage's busy time was used).
  c.set_stage_costs({op_costs{1, 1, 1}, op_costs{3, 3, 3}});
  const auto u = simulate(generate(one_f_one_b{}, 2, 4), c);
  const double longest = u.span(u.max_span_stage);
  CHECK(u.stages[1].busy == Approx(36.0));
  CHECK(u.bubble_rate == Approx((longest - 36.0) / longest));
  CHECK(u.bubble_rate < 0.1);
  CHECK(u.utilization == Approx((12.0 + 36.0) / (2 * u.makespan)));
}

TEST_CASE("simulate: per-link communication latencies", "[sim]") {
  // GPipe p=3 m=1, unit costs; latency 0->1: 1, 1->2: 2, 2->1: 3, 1->0: 4.
  auto c = cost_model::unit();
  c.set_link_comm(3, {0, 1, 0, 4, 0, 2, 0, 3, 0});
  const auto s = generate(gpipe{}, 3, 1);
  const auto r = simulate(s, c);
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {17, 19}});
  CHECK(intervals(r.ops[1]) == spans{{2, 3}, {11, 13}});
  CHECK(intervals(r.ops[2]) == spans{{5, 6}, {6, 8}});
  CHECK(r.makespan == 19);
  CHECK(r.critical_path ==
        std::vector<op_location>{{0, 0}, {1, 0}, {2, 0}, {2, 1}, {1, 1}, {0, 1}});
  check_critical_path(s, c, r);
}

TEST_CASE("simulate: lowered schedule with blocking SEND/RECV rendezvous", "[sim]") {
  // p=2, m=2, GPipe-like order with explicit transfers; stage 1 has a slower forward.
  schedule s = schedule::sequential("lowered", 2, 2);
  using k = op_kind;
  s.stage_ops(0) = {F(0),
                    make_op(k::send_forward, 0),
                    F(1),
                    make_op(k::send_forward, 1),
                    make_op(k::recv_backward, 0),
                    BW(0),
                    make_op(k::recv_backward, 1),
                    BW(1)};
  s.stage_ops(1) = {make_op(k::recv_forward, 0),  F(0),  make_op(k::recv_forward, 1), F(1), BW(0),
                    make_op(k::send_backward, 0), BW(1), make_op(k::send_backward, 1)};
  auto c = cost_model::uniform(1, 1, 1, 0.5);
  c.set_stage_costs({op_costs{1, 1, 1}, op_costs{2, 1, 1}});
  const auto r = simulate(s, c);
  REQUIRE(r.completed());
  // SEND_F1 is ready at 2.5 but its RECV only at 3.5 (stage 1 still runs F0): the sender
  // blocks. RECV_B0 is ready at 4, its SEND at 8: the receiver blocks.
  CHECK(intervals(r.ops[0]) ==
        spans{{0, 1}, {1, 1.5}, {1.5, 2.5}, {3.5, 4}, {8, 8.5}, {8.5, 10.5}, {10.5, 11}, {11, 13}});
  CHECK(intervals(r.ops[1]) ==
        spans{{1, 1.5}, {1.5, 3.5}, {3.5, 4}, {4, 6}, {6, 8}, {8, 8.5}, {8.5, 10.5}, {10.5, 11}});
  CHECK(r.makespan == 13);
  CHECK(r.stages[0].busy == 6);
  CHECK(r.stages[0].comm == 2);
  CHECK(r.stages[0].idle == 7);
  CHECK(r.stages[1].first_start == 1);
  CHECK(r.stages[1].span == 10);
  CHECK(r.stages[1].busy == 8);
  CHECK(r.stages[1].idle == 2);
  CHECK(r.bubble_rate == Approx((13.0 - 8.0) / 13.0));  // busiest stage: 8
  // Back from BW1 on stage 0: the rendezvous RECV_B0 waited for its SEND, RECV_F0 for its.
  CHECK(r.critical_path == std::vector<op_location>{{0, 0},
                                                    {0, 1},
                                                    {1, 0},
                                                    {1, 1},
                                                    {1, 2},
                                                    {1, 3},
                                                    {1, 4},
                                                    {1, 5},
                                                    {0, 4},
                                                    {0, 5},
                                                    {0, 6},
                                                    {0, 7}});
}

TEST_CASE("simulate: a deadlocking schedule returns the traversal witness", "[sim]") {
  // Stage 1 wants F1 first; stage 0 only makes F1 after BW0, which needs stage 1's BW0.
  schedule s = schedule::sequential("dead", 2, 2);
  s.stage_ops(0) = {F(0), BW(0), F(1), BW(1)};
  s.stage_ops(1) = {F(1), F(0), BW(0), BW(1)};
  // Timing a partial order on purpose: the caller opts out of validation.
  simulate_options partial;
  partial.validate = false;
  const auto r = simulate(s, cost_model::uniform(1, 1, 1), partial);
  REQUIRE(r.deadlock.has_value());
  CHECK_FALSE(r.completed());
  const auto t = traverse(s, [](stage_index, std::size_t, const op&) {});
  CHECK(r.deadlock->describe() == t.witness.describe());
  CHECK(r.deadlock->cycle == std::vector<stage_index>{0, 1});
  CHECK(intervals(r.ops[0]) == spans{{0, 1}});
  CHECK(r.ops[1].empty());
  CHECK(r.stages[0].ops_run == 1);
  CHECK(r.stages[1].ops_run == 0);
  CHECK(r.critical_path.empty());
}

TEST_CASE("simulate: record_ops off gives the same statistics and critical path", "[sim]") {
  const auto s = generate(zb_h1{}, 5, 12);
  const auto c = cost_model::uniform(3, 4, 2, 0.25);
  const auto full = simulate(s, c);
  simulate_options o;
  o.record_ops = false;
  const auto lean = simulate(s, c, o);
  CHECK(lean.ops.empty());
  CHECK(lean.makespan == full.makespan);
  CHECK(lean.bubble_rate == full.bubble_rate);
  CHECK(lean.critical_path == full.critical_path);
  for (stage_index i = 0; i < 5; ++i) {
    CHECK(lean.stages[i].span == full.stages[i].span);
    CHECK(lean.stages[i].busy == full.stages[i].busy);
  }
  check_critical_path(s, c, full);
  o.critical_path = false;
  CHECK(simulate(s, c, o).critical_path.empty());
}

TEST_CASE("simulate: critical path is tight for every generator with T_comm", "[sim]") {
  const auto c = cost_model::uniform(2, 3, 1, 0.75);
  for (const auto& s : {generate(one_f_one_b{}, 4, 8), generate(zb_h1{}, 4, 8),
                        generate(zb_h2{}, 4, 8), generate(gpipe{true}, 3, 5)}) {
    INFO(s.name());
    check_critical_path(s, c, simulate(s, c));
  }
}

TEST_CASE("simulate: empty schedule and larger shapes", "[sim]") {
  const auto e =
      simulate(schedule::sequential("empty", 3, 2), {}, simulate_options{true, true, false});
  CHECK(e.completed());
  CHECK(e.makespan == 0);
  CHECK(e.bubble_rate == 0);
  CHECK(e.critical_path.empty());
  CHECK(e.stages.size() == 3);

  // p=64, m=512 ZB-H1 with unit costs: span 3m + (p−1).
  simulate_options o;
  o.record_ops = false;
  const auto r = simulate(generate(zb_h1{}, 64, 512), cost_model::unit(), o);
  CHECK(r.span(0) == 3 * 512 + 63);
  CHECK(r.critical_path.size() > 512);
}

namespace {

// p = 2, m = 3, 1F1B-like with one overlapped pair per stage: stage 0 runs F2 with BW0, stage
// 1 runs F1 with BW0.
schedule overlapped_pairs() {
  schedule s = schedule::sequential("pairs", 2, 3);
  s.stage_ops(0) = {F(0), F(1), overlapping_next(F(2)), BW(0), BW(1), BW(2)};
  s.stage_ops(1) = {F(0), overlapping_next(F(1)), BW(0), F(2), BW(1), BW(2)};
  return s;
}

}  // namespace

TEST_CASE("simulate: an overlapped pair is one slot of T_F + T_B by default", "[sim][overlap]") {
  // T_F 1, BW 3. Stage 1's pair waits for F1 (2) and lasts 4; stage 0's pair waits for stage
  // 1's BW0 (6), so F2 starts only then, though its own input was ready at 2.
  const auto c = cost_model::uniform(1, 2, 1);
  const schedule s = overlapped_pairs();
  const auto r = simulate(s, c);
  REQUIRE(r.completed());
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {1, 2}, {6, 10}, {6, 10}, {14, 17}, {17, 20}});
  CHECK(intervals(r.ops[1]) == spans{{1, 2}, {2, 6}, {2, 6}, {10, 11}, {11, 14}, {14, 17}});
  CHECK(r.makespan == 20);
  // The slot counts once: 1 + 1 + 4 + 3 + 3.
  CHECK(r.stages[0].busy == 12);
  CHECK(r.stages[1].busy == 1 + 4 + 1 + 3 + 3);
  check_critical_path(s, c, r);
  // Without the marks the same order runs op by op.
  schedule plain = s;
  for (stage_index st = 0; st < 2; ++st) {
    for (op& o : plain.stage_ops(st)) {
      o.flags = 0;
    }
  }
  const auto rp = simulate(plain, c);
  CHECK(intervals(rp.ops[0])[2] == std::pair<double, double>{2, 3});
  CHECK(rp.stages[0].busy == 1 + 1 + 1 + 3 + 3 + 3);
}

TEST_CASE("simulate: T_FB sets how long an overlapped pair lasts", "[sim][overlap]") {
  // T_FB = 2.5: a pair of an F and a BW lasts T_FB + T_W = 3.5 (gain T_F + T_B - T_FB = 0.5).
  auto c = cost_model::uniform(1, 2, 1);
  c.set_overlapped(2.5);
  CHECK(c.for_shape(2, 1, "t").overlap_gain(0) == 0.5);
  const schedule s = overlapped_pairs();
  const auto r = simulate(s, c);
  REQUIRE(r.completed());
  CHECK(intervals(r.ops[1]) == spans{{1, 2}, {2, 5.5}, {2, 5.5}, {9, 10}, {10, 13}, {13, 16}});
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {1, 2}, {5.5, 9}, {5.5, 9}, {13, 16}, {16, 19}});
  CHECK(r.makespan == 19);
  CHECK(r.stages[0].busy == 1 + 1 + 3.5 + 3 + 3);
  check_critical_path(s, c, r);
  // Per stage, split over v like T_F and T_B; checked like them.
  CHECK(c.for_shape(2, 2, "test").at(0, 1).overlapped == 1.25);
  CHECK_THROWS_WITH(cost_model{}.set_overlapped(-1),
                    Catch::Contains("overlapped cost (T_FB) (-1) must be finite and >= 0"));
}

TEST_CASE("simulate: a pair may put the backward first", "[sim][overlap]") {
  // Stage 0 runs BW0 with F2: the same slot as F2 with BW0.
  schedule s = overlapped_pairs();
  s.stage_ops(0) = {F(0), F(1), overlapping_next(BW(0)), F(2), BW(1), BW(2)};
  const auto r = simulate(s, cost_model::uniform(1, 2, 1));
  REQUIRE(r.completed());
  CHECK(intervals(r.ops[0]) == spans{{0, 1}, {1, 2}, {6, 10}, {6, 10}, {14, 17}, {17, 20}});
}

TEST_CASE("simulate: a pair whose second op waits for the pair itself never runs",
          "[sim][overlap]") {
  // Stage 0 overlaps F1 with BW0; BW0 needs stage 1's BW0, which stage 1 runs after F1,
  // which needs stage 0's F1: one op at a time this runs, as one slot it cannot.
  schedule s = schedule::sequential("self-waiting pair", 2, 2);
  s.stage_ops(0) = {F(0), overlapping_next(F(1)), BW(0), BW(1)};
  s.stage_ops(1) = {F(0), F(1), BW(0), BW(1)};
  CHECK(traverse(s, [](stage_index, std::size_t, const op&) {}).complete);
  CHECK_THROWS_WITH(simulate(s, cost_model::uniform(1, 1, 1)),
                    Catch::Contains("whose inputs wait for this pair itself"));
  const auto r = simulate(s, cost_model::uniform(1, 1, 1), simulate_options{true, true, false});
  REQUIRE_FALSE(r.completed());
  REQUIRE(r.deadlock->stuck.size() == 1);
  CHECK(r.deadlock->stuck[0].stage == 0);
  CHECK(r.deadlock->stuck[0].op_index == 1);
  CHECK(r.deadlock->describe() ==
        "deadlock: stage 0 blocked at op 1 (F1) waiting for the inputs of BW0, the op it "
        "overlaps, which wait for this pair itself;");
}

TEST_CASE("check_memory applies both ops of an overlapped pair, in list order, at its end",
          "[sim][overlap][memory]") {
  // Memory is per op (docs/model.md §5): F2 +M_B then BW0 -M_B, both at the pair's end.
  const schedule s = overlapped_pairs();
  const auto r = simulate(s, cost_model::uniform(1, 2, 1));
  const memory_report m = check_memory(s, memory_model::uniform(1, 0), memory_options{}, r);
  REQUIRE(m.ok());
  CHECK(m.stages[0].curve == std::vector<double>{1, 2, 3, 2, 1, 0});
  CHECK(m.stages[0].peak == 3);
  CHECK(m.stages[0].peak_op_index == 2);  // after F2, the pair's first op
  CHECK(m.stages[0].peak_time == 10);     // the pair's end
  CHECK(m.stages[1].curve == std::vector<double>{1, 2, 1, 2, 1, 0});
  // The marks change no memory: the same ops in the same order.
  schedule plain = s;
  for (stage_index st = 0; st < 2; ++st) {
    for (op& o : plain.stage_ops(st)) {
      o.flags = 0;
    }
  }
  CHECK(check_memory(plain, memory_model::uniform(1, 0)).stages[0].curve == m.stages[0].curve);
}

TEST_CASE("simulate refuses an invalid or deadlocked schedule by default", "[sim]") {
  // 1F1B without its W ops: timed as it stands it gave makespan 22 instead of 27.
  schedule s = generate(zb_h1{}, 4, 8);
  for (stage_index st = 0; st < 4; ++st) {
    auto& ops = s.stage_ops(st);
    ops.erase(std::remove_if(ops.begin(), ops.end(),
                             [](const op& o) { return o.kind == op_kind::backward_weight; }),
              ops.end());
  }
  CHECK_THROWS_WITH(simulate(s), Catch::StartsWith("simulate: schedule \"zb-h1\" is invalid: ") &&
                                     Catch::Contains("missing"));
  simulate_options trusted;
  trusted.validate = false;
  CHECK(simulate(s, {}, trusted).completed());
  // A deadlocked order never yields a makespan by default.
  schedule dead = schedule::sequential("dead", 2, 2);
  dead.stage_ops(0) = {F(0), BW(0), F(1), BW(1)};
  dead.stage_ops(1) = {F(1), F(0), BW(0), BW(1)};
  CHECK_THROWS_WITH(simulate(dead), Catch::StartsWith("simulate: schedule \"dead\" is invalid: "));
  CHECK_THROWS_WITH(simulate_perturbed(dead, {}, perturbed(perturbation{}, 0)),
                    Catch::StartsWith("simulate_perturbed: schedule \"dead\" is invalid: "));
}

// Posted transfers (isend / irecv, PyTorch's runtime): SEND and RECV post and return, the data
// lands T_comm after both sides posted, only its consumer waits. 1F1B, p = 2, m = 4, costs
// (1, 1, 1), T_comm 0.5, lowered eagerly: stage 0 posts RECV_B1 at 8 (after its F2), after the
// SEND_B1 posted at 7.5, so B1 lands at 8.5 and BW1 runs 8.5-10.5, half a unit later than the
// compute-only timing's 8-10: makespan 17.5 against 17. Blocking rendezvous wait more.
TEST_CASE("simulate: posted transfers", "[simulate][comm]") {
  generator_params gp;
  gp.stages = 2;
  gp.microbatches = 4;
  const cost_model c = cost_model::uniform(1, 1, 1, 0.5);
  const schedule s = default_registry().generate("1f1b", gp);
  lowering_options lo;
  lo.costs = c;
  const schedule low = lower_communication(s, lo);
  simulate_options posted;
  posted.transfers = transfer_timing::posted;
  const simulation_result r = simulate(low, c, posted);
  CHECK(simulate(s, c).makespan == 17.0);
  CHECK(r.makespan == 17.5);
  CHECK(simulate(low, c).makespan > 17.5);
  for (stage_index st = 0; st < 2; ++st) {
    CHECK(r.stages[st].comm == 0.0);  // posts take no time on the stage
    for (std::size_t i = 0; i < low.ops(st).size(); ++i) {
      if (is_comm(low.ops(st)[i].kind)) {
        CHECK(r.ops[st][i].end == r.ops[st][i].start);
      }
    }
  }
  // Never earlier than the compute-only timing, never later than blocking rendezvous.
  for (const std::string name : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v",
                                 "v-half", "v-min", "zb-auto"}) {
    gp.stages = 4;
    gp.microbatches = 8;
    gp.costs = cost_model::uniform(1, 1.5, 0.5, 0.3);
    const schedule plain = default_registry().generate(name, gp);
    for (receive_placement rp : {receive_placement::eager, receive_placement::late}) {
      lowering_options l;
      l.costs = gp.costs;
      l.receives = rp;
      const schedule lowered = lower_communication(plain, l);
      const double compute_only = simulate(plain, gp.costs).makespan;
      const double p = simulate(lowered, gp.costs, posted).makespan;
      const double b = simulate(lowered, gp.costs).makespan;
      INFO(name);
      CHECK(compute_only <= p + 1e-12);
      CHECK(p <= b + 1e-12);
    }
  }
}
