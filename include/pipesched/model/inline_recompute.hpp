#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// Recomputation inside the backward (docs/model.md §5, §10): what production runtimes do
// (PyTorch's checkpointing, Megatron-LM's recompute) as costs and sizes of a plain schedule,
// so any order, generator or search can use it without R ops.

namespace pipesched {

/// The costs and sizes of a schedule whose every chunk recomputes its forward at the start of
/// its backward: the backward lasts T_R + T_B, an F holds max(M_in, M_W) until it, and each
/// stage's static memory grows by the largest transient M_B − max(M_in, M_W) of its chunks,
/// the activations the backward rebuilds while it runs. Any order timed and checked with
/// these is the same order recomputing inside its backward, as long and no higher; with explicit
/// R ops right before each backward (transform/recompute.hpp) it is never longer either (an R
/// there may start before the gradient arrives). R ops timed with these costs take no time (their
/// work is in the backward), so such an order times exactly as the plain one. Tables come out
/// per chunk (p × v).
inline std::pair<cost_model, memory_model> inline_recompute(const cost_model& costs,
                                                            const memory_model& memory,
                                                            std::uint32_t stages,
                                                            std::uint32_t chunks) {
  const shaped_cost_model c = costs.for_shape(stages, chunks, "inline_recompute");
  const shaped_memory_model m = memory.for_shape(stages, chunks, "inline_recompute");
  std::vector<op_costs> oc(std::size_t{stages} * chunks);
  std::vector<chunk_memory> cm(std::size_t{stages} * chunks);
  std::vector<double> statics(stages);
  for (stage_index s = 0; s < stages; ++s) {
    double transient = 0.0;
    for (chunk_index k = 0; k < chunks; ++k) {
      const std::size_t i = std::size_t{s} * chunks + k;
      const op_costs t = c.at(s, k);
      oc[i] = op_costs{t.forward, c.duration(s, op_kind::recompute, k) + t.backward_input,
                       t.backward_weight};
      oc[i].recompute = 0.0;  // an R op, if the order has them, is the backward's first part
      if (t.overlapped) {
        // The recompute is compute in the backward: a pair still hides what it hid.
        oc[i].overlapped = *t.overlapped + c.duration(s, op_kind::recompute, k);
      }
      const chunk_memory x = m.at(s, k);
      const double held = std::max(x.input, x.weight_grad_input);
      cm[i] = chunk_memory{held, x.weight_grad_input, x.received, 0.0};
      transient = std::max(transient, x.activation - held);
    }
    statics[s] = m.static_memory(s) + transient;
  }
  cost_model out_c = costs;
  out_c.set_chunk_costs(chunks, std::move(oc));
  memory_model out_m;
  out_m.set_chunk_memory(chunks, std::move(cm));
  out_m.set_static_memory(std::move(statics));
  return {std::move(out_c), std::move(out_m)};
}

}  // namespace pipesched
