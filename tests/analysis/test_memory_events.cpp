#include <cstddef>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/memory_events.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/detail/zb_search.hpp>
#include <pipesched/gen/zb_auto.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

TEST_CASE("memory events: the buffers each op kind frees and creates", "[memory_events]") {
  STATIC_REQUIRE(buffer_effect_of(op_kind::forward).creates == buffer_kind::activation);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::forward).frees);
  STATIC_REQUIRE(buffer_effect_of(op_kind::backward_input).frees == buffer_kind::activation);
  STATIC_REQUIRE(buffer_effect_of(op_kind::backward_input).creates ==
                 buffer_kind::weight_grad_input);
  STATIC_REQUIRE(buffer_effect_of(op_kind::backward_weight).frees ==
                 buffer_kind::weight_grad_input);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::backward_weight).consumes_received);
  STATIC_REQUIRE(buffer_effect_of(op_kind::backward_full).frees == buffer_kind::activation);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::backward_full).creates);
  STATIC_REQUIRE(buffer_effect_of(op_kind::recv_forward).creates == buffer_kind::received_forward);
  STATIC_REQUIRE(buffer_effect_of(op_kind::recv_backward).creates ==
                 buffer_kind::received_backward);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::send_forward).creates);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::send_backward).frees);

  const chunk_memory c{3.0, 1.25, 0.5};
  CHECK(memory_delta(op_kind::forward, c) == 3.0);
  CHECK(memory_delta(op_kind::backward_input, c) == -1.75);
  CHECK(memory_delta(op_kind::backward_weight, c) == -1.25);
  CHECK(memory_delta(op_kind::backward_full, c) == -3.0);
  CHECK(memory_delta(op_kind::recv_forward, c) == 0.0);  // receive buffers: check_memory's
  CHECK(buffer_size(buffer_kind::received_backward, c) == 0.5);
}

TEST_CASE("memory events: an F marked recompute keeps M_in, its R turns it into M_B",
          "[memory_events][recompute]") {
  STATIC_REQUIRE(buffer_effect_of(recomputing(make_op(op_kind::forward, 0))).creates ==
                 buffer_kind::forward_input);
  STATIC_REQUIRE(buffer_effect_of(make_op(op_kind::forward, 0)).creates == buffer_kind::activation);
  STATIC_REQUIRE(buffer_effect_of(op_kind::recompute).frees == buffer_kind::forward_input);
  STATIC_REQUIRE(buffer_effect_of(op_kind::recompute).creates == buffer_kind::activation);
  STATIC_REQUIRE(!buffer_effect_of(op_kind::recompute).consumes_received);
  const chunk_memory c{3.0, 1.25, 0.5, 0.75};
  CHECK(memory_delta(recomputing(make_op(op_kind::forward, 2)), c) == 0.75);
  CHECK(memory_delta(make_op(op_kind::forward, 2), c) == 3.0);
  CHECK(memory_delta(op_kind::recompute, c) == 2.25);  // -0.75 + 3
  CHECK(buffer_size(buffer_kind::forward_input, c) == 0.75);
  CHECK(to_string(buffer_kind::forward_input) == "forward_input");
}

TEST_CASE(
    "memory engine: the search's peak, the running sum and the closed form are the "
    "checker's on every schedule family",
    "[memory_events]") {
  // order_peak (the zero-bubble search's memory count), walk_live_memory and held_after (the
  // closed form the exact search and the search's bounds count with) against check_memory,
  // after every op of every registered schedule (compute-only, nothing recomputed: what the
  // closed form is for), with several chunks, unequal sizes and static memory.
  for (const auto& e : default_registry().entries()) {
    for (const std::uint32_t p : {1u, 2u, 3u, 4u, 5u}) {
      INFO(e.name << " p=" << p);
      generator_params gp;
      gp.stages = p;
      gp.microbatches = 2 * p + 1;
      if (!test_support::serves(e.name, p, gp.microbatches)) {
        ++gp.microbatches;  // dualpipe: an even m
      }
      if (!test_support::serves(e.name, p, gp.microbatches)) {
        continue;  // dualpipe: an odd p
      }
      gp.chunks = e.default_chunks;
      std::vector<chunk_memory> sizes;
      for (std::uint32_t i = 0; i < p * gp.chunks; ++i) {
        sizes.push_back({1.0 + 0.25 * i, 0.3 + 0.05 * i, 0.0});
      }
      memory_model mm;
      mm.set_chunk_memory(gp.chunks, sizes);
      mm.set_static_memory(std::vector<double>(p, 0.7));
      gp.memory = mm;
      const schedule s = e.generate(gp);
      std::vector<std::vector<op>> lists(p);
      for (stage_index st = 0; st < p; ++st) {
        lists[st].assign(s.ops(st).begin(), s.ops(st).end());
      }
      const shaped_memory_model bound = mm.for_shape(p, gp.chunks, "test");
      const std::vector<double> peaks = detail::order_peak(lists, bound, gp.chunks);
      const memory_report r = check_memory(s, mm);
      REQUIRE(r.ok());
      for (stage_index st = 0; st < p; ++st) {
        CHECK(peaks[st] == Approx(r.stages[st].peak));
        std::vector<double> f(gp.chunks, 0.0), b(gp.chunks, 0.0), w(gp.chunks, 0.0);
        std::size_t checked = 0;
        const bool whole =
            walk_live_memory(lists[st], bound.static_memory(st), stage_deltas(bound, st, gp.chunks),
                             [&](std::size_t i, double value) {
                               const op& o = lists[st][i];
                               const bool full = o.kind == op_kind::backward_full;
                               f[o.chunk] += o.kind == op_kind::forward ? 1.0 : 0.0;
                               b[o.chunk] += o.kind == op_kind::backward_input || full ? 1.0 : 0.0;
                               w[o.chunk] += o.kind == op_kind::backward_weight || full ? 1.0 : 0.0;
                               double closed = bound.static_memory(st);
                               for (chunk_index c = 0; c < gp.chunks; ++c) {
                                 closed += held_after(f[c], b[c], w[c], bound.at(st, c));
                               }
                               CHECK(value == Approx(closed));
                               CHECK(value == Approx(r.stages[st].curve[i]));
                               ++checked;
                               return true;
                             });
        CHECK(whole);
        CHECK(checked == lists[st].size());
      }
    }
  }
  // A visit returning false stops the walk.
  std::size_t seen = 0;
  const std::vector<op> list = {make_op(op_kind::forward, 0), make_op(op_kind::forward, 1)};
  CHECK_FALSE(walk_live_memory(list, 0.0,
                               stage_deltas(1, [](chunk_index) { return chunk_memory{}; }),
                               [&](std::size_t, double) { return ++seen < 1; }));
  CHECK(seen == 1);
}

TEST_CASE("memory engine: the minimum budget, checked in one place", "[memory_events]") {
  memory_model mm;
  mm.set_chunk_memory(2, {{0.5, 0.1, 0}, {0.25, 0.1, 0}, {1.0, 0.5, 0}, {2.0, 0.5, 0}});
  mm.set_static_memory({1.0, 0.5});
  const placement pl = placement::v_shape(2);
  const shaped_memory_model bound = mm.for_shape(2, 2, "test");
  CHECK(stage_activation(bound, 0, 2) == 0.75);
  CHECK(minimum_stage_memory(bound, 0, 2) == 1.75);
  CHECK(minimum_stage_memory(bound, 1, 2) == 3.5);
  CHECK_THROWS_WITH(
      detail::require_minimum_memory("who", pl, bound, {3.0}),
      "who: memory_limit (3) is below the minimum any schedule needs on stage 1 (3.5 = static "
      "memory 0.5 + one micro-batch's activations M_B of its 2 chunk(s) 3)");
  CHECK_NOTHROW(detail::require_minimum_memory("who", pl, bound, {1.75, 3.5}));
  // Relative: a limit rounding left just below the minimum passes, whatever the unit.
  CHECK_NOTHROW(detail::require_minimum_memory("who", pl, bound, {3.5 * (1.0 - 1e-12)}));
  CHECK_THROWS(detail::require_minimum_memory("who", pl, bound, {3.5 * (1.0 - 1e-8)}));
  // check_memory's stage unit is the same sum.
  CHECK(limit_threshold(2.0) == 2.0 + 2e-9);
  CHECK(limit_threshold(2.0, 0.5) == 3.0);
}

TEST_CASE("memory engine: admission keeps room for the chunks later in the model",
          "[memory_events]") {
  // A custom placement whose local order is not the model's: stage 0 holds global chunks 2
  // (local 0) and 0 (local 1). An F of global chunk 0 must leave room for chunk 2, whose F the
  // oldest micro-batch still has to run here; an F of chunk 2 need not leave any.
  const placement pl = placement::custom(2, 2, {2, 0, 1, 3});
  memory_model mm;
  mm.set_chunk_memory(2, {{1.0, 0.5, 0}, {2.0, 0.5, 0}, {1.0, 0.5, 0}, {1.0, 0.5, 0}});
  CHECK(detail::later_chunk_reserve(pl, mm.for_shape(2, 2, "t"), 0, 1) ==
        1.0);  // global 0: room for global 2
  CHECK(detail::later_chunk_reserve(pl, mm.for_shape(2, 2, "t"), 0, 0) == 0.0);
  CHECK(detail::later_chunk_reserve(pl, mm.for_shape(2, 2, "t"), 1, 0) ==
        1.0);  // global 1: room for global 3
  CHECK(detail::admits_forward(0.0, 2.0, 1.0, 3.0));
  CHECK_FALSE(detail::admits_forward(0.5, 2.0, 1.0, 3.0));
  // The tolerance is relative to the budgets and sizes: 1e-9 of the largest.
  CHECK(detail::memory_tolerance(pl, mm.for_shape(2, 2, "t"), {4.0, 1.0}) == Approx(4e-9));
  CHECK(detail::memory_tolerance(pl, mm.for_shape(2, 2, "t"), {0.0, 0.0}) == Approx(2e-9));
}
