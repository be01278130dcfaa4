#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/link_timing.hpp>
#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/dualpipev.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/v_shape.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

// One options style: the links inside the options.
template <class S>
concept old_links_spelling = requires(const S& s, const link_model& l) {
  simulate_links(s, cost_model{}, l);
};
static_assert(!old_links_spelling<schedule>, "simulate_links(sched, costs, links, options)");

namespace {

// Every registered family's shape on p stages, m micro-batches (dualpipev needs m >= 2p,
// interleaved a multiple of p: callers pick such m).
std::vector<schedule> families(std::uint32_t p, std::uint32_t m, const cost_model& costs) {
  generator_params g;
  g.stages = p;
  g.microbatches = m;
  g.costs = costs;
  std::vector<schedule> out{one_f_one_b{}.generate(g), zb_h1{}.generate(g),    zb_h2{}.generate(g),
                            gpipe{}.generate(g),       zb_v{}.generate(g),     v_half{}.generate(g),
                            v_min{}.generate(g),       dualpipev{}.generate(g)};
  g.chunks = 2;
  out.push_back(interleaved_1f1b{}.generate(g));
  // Recompute ops, as the engine times them (R before its backward, backward waits for R).
  out.push_back(with_recompute(out[0], all_chunks(out[0])));
  out.push_back(with_recompute(out[4], {0}));  // zb-v, chunk 0 recomputed
  return out;
}

void require_same_times(const simulation_result& a,
                        const link_timing_result& b,
                        const std::string& what) {
  INFO(what);
  REQUIRE(a.completed());
  REQUIRE(b.completed());
  REQUIRE(a.ops.size() == b.ops.size());
  for (std::size_t s = 0; s < a.ops.size(); ++s) {
    REQUIRE(a.ops[s].size() == b.ops[s].size());
    for (std::size_t i = 0; i < a.ops[s].size(); ++i) {
      INFO("stage " << s << " op " << i);
      REQUIRE(a.ops[s][i] == b.ops[s][i]);  // exact: start, end, op and position
    }
  }
  CHECK(b.makespan == a.makespan);
  CHECK(b.iteration == a.makespan);
  CHECK(b.stall_behind_bulk == 0.0);
}

}  // namespace

TEST_CASE("simulate_links: free links reproduce simulate exactly on every family",
          "[link_timing]") {
  cost_model uneven = cost_model::uniform(1.0, 1.7, 0.6, 0.3);
  uneven.set_overlapped(2.1);  // dualpipev's pairs gain
  const std::vector<cost_model> models{cost_model::uniform(1, 1, 1, 0.05), uneven,
                                       cost_model::uniform(2, 3, 1, 0.0)};
  link_model free_links;  // infinite bandwidth, no bulk
  link_model zero_bytes;  // finite bandwidth, messages of 0 bytes
  zero_bytes.bandwidth = {0.5};
  zero_bytes.discipline = link_discipline::priority;
  for (std::uint32_t p : {2u, 3u, 4u}) {
    for (std::uint32_t k : {2u, 3u}) {
      const std::uint32_t m = k * p;
      for (std::size_t c = 0; c < models.size(); ++c) {
        for (const schedule& s : families(p, m, models[c])) {
          const simulation_result want = simulate(s, models[c]);
          const std::string what = s.name() + " p=" + std::to_string(p) +
                                   " m=" + std::to_string(m) + " costs " + std::to_string(c);
          require_same_times(want, simulate_links(s, models[c], {.links = free_links}),
                             what + " free");
          require_same_times(want, simulate_links(s, models[c], {.links = zero_bytes}),
                             what + " 0 bytes");
        }
      }
    }
  }
}

TEST_CASE("simulate_links: free links under noise reproduce simulate_perturbed", "[link_timing]") {
  const cost_model costs = cost_model::uniform(1, 1, 1, 0.1);
  perturbation noise;
  noise.set_cv(0.1).set_link_cv(0.2).set_straggler(4, 2, 1.1).set_seed(9);
  link_timing_options o;
  o.noise = noise;
  for (std::uint64_t sample : {0u, 1u, 7u}) {
    o.sample = sample;
    for (const schedule& s : families(4, 8, costs)) {
      require_same_times(simulate_perturbed(s, costs, perturbed(noise, sample)),
                         simulate_links(s, costs, with_links(o, link_model{})), s.name());
    }
  }
}

TEST_CASE("simulate_links: a message waits for the link, then T_comm", "[link_timing]") {
  // 1F1B, p = 2, m = 1: F on stage 0 [0,1]; its 4-byte activation at bandwidth 2 leaves at 3
  // and arrives at 3.5; F on stage 1 [3.5,4.5], BW [4.5,6.5]; the gradient leaves at 8.5,
  // arrives at 9; BW on stage 0 [9,11].
  const schedule s = generate(one_f_one_b{}, 2, 1);
  link_model l;
  l.bandwidth = {2.0};
  l.activation_bytes = 4.0;
  l.gradient_bytes = 4.0;
  link_timing_options o;
  o.record_messages = true;
  const link_timing_result r =
      simulate_links(s, cost_model::uniform(1, 1, 1, 0.5), with_links(o, l));
  REQUIRE(r.completed());
  CHECK(r.ops[1][0].start == 3.5);
  CHECK(r.ops[0][1].start == 9.0);
  CHECK(r.makespan == 11.0);
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].kind == message_kind::activation);
  CHECK(r.messages[0].from == 0);
  CHECK(r.messages[0].to == 1);
  CHECK(r.messages[0].submitted == 1.0);
  CHECK(r.messages[0].sent == 3.0);
  CHECK(r.messages[0].wait == 0.0);
  CHECK(r.messages[1].kind == message_kind::input_gradient);
  CHECK(r.messages[1].sent == 8.5);
  CHECK(r.links[0].busy == 2.0);
  CHECK(r.links[1].pipeline_bytes == 4.0);

  // Per-stage links: stage 1's at bandwidth 4 sends the gradient in 1 (leaves 7.5, arrives 8).
  l.bandwidth = {2.0, 4.0};
  const link_timing_result two =
      simulate_links(s, cost_model::uniform(1, 1, 1, 0.5), with_links(o, l));
  CHECK(two.ops[1][0].start == 3.5);
  CHECK(two.messages[1].sent == 7.5);
  CHECK(two.ops[0][1].start == 8.0);
  CHECK(two.makespan == 10.0);
  CHECK(two.links[1].busy == 1.0);
}

namespace {

// Interleaved placement, p = 2, v = 2, m = 1: stage 0 holds chunks 0 and 2, stage 1 chunks 1
// and 3. Per chunk T_F = T_B = T_W = 1, T_comm = 0.
schedule two_message_case() {
  schedule s = schedule::on("tiny", placement::loop(2, 2), 1);
  using k = op_kind;
  s.stage_ops(0) = {make_op(k::forward, 0, 0),        make_op(k::forward, 0, 1),
                    make_op(k::backward_input, 0, 1), make_op(k::backward_weight, 0, 1),
                    make_op(k::backward_input, 0, 0), make_op(k::backward_weight, 0, 0)};
  s.stage_ops(1) = s.stage_ops(0);
  return s;
}

}  // namespace

TEST_CASE("simulate_links: two messages on one link, FIFO against priority (by hand)",
          "[link_timing]") {
  // Bandwidth 1, activations 0 bytes, gradients 1 byte; D = 2 replicas reduce 4 bytes per
  // chunk (8 per stage): 2 ring steps of 2 bytes each. Up to t = 8 both disciplines agree:
  // F g0 [0,1], F g1 [1,2], F g2 [2,3], F g3 [3,4], B g3 [4,5] (gradient sent [5,6]),
  // W g3 [5,6] (bucket g3: step 0 on stage 1's link [6,8]), B g2 [6,7] (gradient [7,8]),
  // W g2 [7,8] (bucket g2 on stage 0's link from 8), B g1 [8,9]: its gradient to stage 0
  // meets ring step 1 of bucket g3 (submitted at 8, 1 of its 2 bytes left at 9).
  //   FIFO: the gradient waits for the step: sent [10,11]; B g0 [11,12], W g0 [12,13];
  //         stage 0's buckets: g2 [8,12], g0 [13,17]: iteration 17.
  //   priority: the gradient goes first [9,10], the step resumes [10,11]; B g0 [10,11],
  //         W g0 [11,12]; stage 0's buckets g2 [8,12], g0 [12,16]: iteration 16.
  // Stage 1: bucket g3 ends at 10 (FIFO) or 11 (priority), then bucket g1 (ready at 10) takes
  // 4 more after the FIFO gradient: 15 either way.
  const schedule s = two_message_case();
  const cost_model costs = cost_model::uniform(2, 2, 2, 0.0);  // per stage: 1 per chunk
  link_model l;
  l.bandwidth = {1.0};
  l.gradient_bytes = 1.0;
  l.bulk.replicas = 2;
  l.bulk.gradient_bytes = {8.0};
  link_timing_options o;
  o.record_messages = true;

  l.discipline = link_discipline::fifo;
  const link_timing_result f = simulate_links(s, costs, with_links(o, l));
  REQUIRE(f.completed());
  CHECK(f.ops[0][4].start == 11.0);  // B of chunk 0 (g0) on stage 0
  CHECK(f.makespan == 13.0);
  CHECK(f.links[0].allreduce_end == 17.0);
  CHECK(f.links[1].allreduce_end == 15.0);
  CHECK(f.iteration == 17.0);
  CHECK(f.stall_behind_bulk == 1.0);
  CHECK(f.pipeline_wait == 1.0);
  CHECK(f.links[1].behind_bulk == 1.0);

  l.discipline = link_discipline::priority;
  const link_timing_result q = simulate_links(s, costs, with_links(o, l));
  REQUIRE(q.completed());
  CHECK(q.ops[0][4].start == 10.0);
  CHECK(q.makespan == 12.0);
  CHECK(q.links[0].allreduce_end == 16.0);
  CHECK(q.links[1].allreduce_end == 15.0);
  CHECK(q.iteration == 16.0);
  CHECK(q.stall_behind_bulk == 0.0);
  CHECK(q.pipeline_wait == 0.0);
  // The preempted step: submitted at 8, 2 bytes, sent at 11 (1 time unit lent to the gradient).
  bool found = false;
  for (const link_message& msg : q.messages) {
    if (msg.kind == message_kind::allreduce && msg.from == 1 && msg.submitted == 8.0) {
      found = true;
      CHECK(msg.sent == 11.0);
      CHECK(msg.wait == 1.0);
      CHECK(msg.behind_bulk == 0.0);
    }
  }
  CHECK(found);
}

TEST_CASE("simulate_links: an uncontended bucket takes the ring formula", "[link_timing]") {
  // 1F1B p = 4, m = 8, free pipeline messages: each stage's one bucket starts at its last BW
  // and lasts ring_allreduce_time(D, bytes, bandwidth, latency), as simulate_data_parallel has it.
  const schedule s = generate(one_f_one_b{}, 4, 8);
  link_model l;
  l.bandwidth = {1e5};
  l.bulk.replicas = 4;
  l.bulk.gradient_bytes = {1e6};
  l.bulk.step_latency = 0.5;
  const link_timing_result r = simulate_links(s, cost_model{}, {.links = l});
  const double ring = ring_allreduce_time(4, 1e6, 1e5, 0.5);
  const std::vector<double> last{33, 31, 29, 27};
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(r.links[st].allreduce_end == Approx(last[st] + ring));
    CHECK(r.links[st].bulk_messages == 6);
  }
  CHECK(r.iteration == Approx(51.0));
  CHECK(r.makespan == 33.0);

  // Two buckets per chunk: the first is ready halfway through the last BW (its layers' weight
  // gradients come one after the other), the second at its end, after the first's ring. Under
  // priority, as the first bucket's ring now overlaps the BW's gradient send (FIFO makes that
  // send wait for a ring step: 0.25 on stages 0-2).
  l.bulk.buckets_per_chunk = 2;
  l.discipline = link_discipline::priority;
  const link_timing_result two = simulate_links(s, cost_model{}, {.links = l});
  const double half = ring_allreduce_time(4, 5e5, 1e5, 0.5);
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(two.links[st].allreduce_end == Approx(last[st] - 1.0 + 2 * half));
    CHECK(two.links[st].bulk_messages == 12);
  }
  l.discipline = link_discipline::fifo;
  const link_timing_result fifo = simulate_links(s, cost_model{}, {.links = l});
  CHECK(fifo.stall_behind_bulk == Approx(0.75));
  CHECK(fifo.makespan == 33.75);
}

TEST_CASE("simulate_links: priority is never slower than FIFO on the test scenarios",
          "[link_timing]") {
  for (std::uint32_t p : {2u, 4u}) {
    const std::uint32_t m = 2 * p;
    const cost_model costs = cost_model::uniform(1, 1, 1, 0.05);
    for (const schedule& s : families(p, m, costs)) {
      for (double bytes : {0.5, 2.0, 8.0}) {
        for (std::uint32_t buckets : {1u, 4u}) {
          link_model l;
          l.bandwidth = {4.0};
          l.activation_bytes = 0.5;
          l.gradient_bytes = 0.5;
          l.bulk.replicas = 8;
          l.bulk.gradient_bytes = {bytes * 8.0};
          l.bulk.step_latency = 0.01;
          l.bulk.buckets_per_chunk = buckets;
          l.discipline = link_discipline::fifo;
          const link_timing_result f = simulate_links(s, costs, {.links = l});
          l.discipline = link_discipline::priority;
          const link_timing_result q = simulate_links(s, costs, {.links = l});
          INFO(s.name() << " p=" << p << " bucket bytes " << bytes << " buckets " << buckets);
          REQUIRE(f.completed());
          REQUIRE(q.completed());
          CHECK(q.makespan <= f.makespan + 1e-9);
          CHECK(q.iteration <= f.iteration + 1e-9);
          CHECK(q.stall_behind_bulk == 0.0);
        }
      }
    }
  }
}

TEST_CASE("simulate_links: invalid input throws, deadlocks are reported", "[link_timing]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  link_model l;
  l.bandwidth = {0.0};
  CHECK_THROWS_WITH(simulate_links(s, cost_model{}, {.links = l}),
                    "simulate_links: link bandwidth (0) must be > 0 (bytes per time unit; "
                    "infinity: no serialization)");
  l.bandwidth = {1.0, 1.0, 1.0};
  CHECK_THROWS_WITH(
      simulate_links(s, cost_model{}, {.links = l}),
      "simulate_links: link bandwidth (3 entries) must hold one value or one per stage (p=2)");
  const schedule lowered = lower_communication(s);
  CHECK_THROWS_AS(simulate_links(lowered, cost_model{}, {.links = link_model{}}),
                  pipesched::invalid_argument);
  cost_model wrong;
  wrong.set_stage_costs({op_costs{}, op_costs{}, op_costs{}});
  CHECK_THROWS_WITH(simulate_links(s, wrong, {.links = link_model{}}),
                    Catch::Contains("simulate_links: cost model stages table (3 entries)"));

  schedule stuck = schedule::on("stuck", placement::sequential(2), 1);
  stuck.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  stuck.stage_ops(1) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  const link_timing_result r = simulate_links(stuck, cost_model{}, {.links = link_model{}});
  REQUIRE_FALSE(r.completed());
  CHECK(r.deadlock->describe() ==
        simulate(stuck, {}, simulate_options{true, true, false}).deadlock->describe());
}
