#include <catch2/catch.hpp>

#include <pipesched/analysis/memory_checker.hpp>
#include <pipesched/analysis/memory_events.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/zb_auto.hpp>

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

TEST_CASE("memory events: the search's peak is the memory checker's", "[memory_events]") {
  // order_peak (the zero-bubble search's memory count) and check_memory apply the same rule;
  // they must agree on every registered schedule, with several chunks and unequal sizes.
  for (const auto& e : default_registry().entries()) {
    for (const std::uint32_t p : {2u, 3u, 5u}) {
      INFO(e.name << " p=" << p);
      generator_params gp;
      gp.stages = p;
      gp.microbatches = 2 * p + 1;
      gp.chunks = e.default_chunks;
      std::vector<chunk_memory> sizes;
      for (std::uint32_t i = 0; i < p * gp.chunks; ++i) {
        sizes.push_back({1.0 + 0.25 * i, 0.3 + 0.05 * i, 0.0});
      }
      memory_model mm;
      mm.set_chunk_memory(gp.chunks, sizes);
      gp.memory = mm;
      const schedule s = e.generate(gp);
      std::vector<std::vector<op>> lists(p);
      for (stage_index st = 0; st < p; ++st) {
        lists[st].assign(s.ops(st).begin(), s.ops(st).end());
      }
      const memory_model bound = mm.for_shape(p, gp.chunks, "test");
      const std::vector<double> peaks = detail::order_peak(lists, bound);
      const memory_report r = check_memory(s, mm);
      REQUIRE(r.ok());
      for (stage_index st = 0; st < p; ++st) {
        CHECK(peaks[st] == Approx(r.stages[st].peak));
      }
    }
  }
}
