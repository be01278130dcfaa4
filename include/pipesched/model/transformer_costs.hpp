#pragma once

#include <cmath>
#include <cstdint>

#include "pipesched/ir/error.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/transformer_spec.hpp"

namespace pipesched {

/// Shape of a slice of a transformer (docs/model.md §5). All fields must be >= 1. For
/// make_cost_model / make_memory_model, describe one stage's whole slice (`layers` = the
/// layers per stage): they are per-stage models, split over a schedule's v chunks.
struct transformer_dims {
  std::uint64_t hidden = 0;      ///< h, hidden size
  std::uint64_t heads = 0;       ///< a, attention heads
  std::uint64_t sequence = 0;    ///< s, sequence length
  std::uint64_t microbatch = 0;  ///< b, micro-batch size (sequences per micro-batch)
  std::uint32_t layers = 1;      ///< transformer layers in the slice (per stage for the models)
  /// Bytes per activation element: 2 for bf16 / fp16 (the formulas' own), 1 for fp8, 4 for
  /// fp32. Dropout masks stay 1 byte per element whatever the precision.
  std::uint32_t activation_bytes = 2;
};

/// Units of transformer_profile.
enum class transformer_units : std::uint8_t {
  /// Costs in FLOPs, memory in bytes (at transformer_dims::activation_bytes): the raw per-layer
  /// formulas times `layers`.
  absolute,
  /// Costs relative to the forward FLOPs of ONE layer (so T_F = layers), memory relative to
  /// M_B of one layer (so M_B = layers). Convenient for cost_model / memory_model directly.
  per_layer,
};

/// Costs and memory of a slice of `dims.layers` layers for one micro-batch.
struct transformer_profile {
  op_costs costs{};  ///< T_F, T_B, T_W (T_B + T_W = 2·T_F; T_W < T_F < T_B)
  /// M_B, M_W; `received` = the s·b·h activation one transfer carries, and `input` (M_in, what
  /// an F marked recompute keeps) the same tensor: the slice's input.
  chunk_memory memory{};
  transformer_units units = transformer_units::absolute;
};

/// Derives T_F, T_B, T_W and M_B, M_W, M_in for a slice of `dims.layers` transformer layers from
/// the per-layer formulas of docs/model.md §5 (Korthikanti et al., as used by the zero-bubble
/// paper), with e = dims.activation_bytes:
///   F: s·b·h·(24h + 4s)  B: s·b·h·(24h + 8s)  W: 24·s·b·h²  FLOPs
///   M_B: s·b·(16e·h + 2h + 2e·a·s + a·s)  M_W: 16e·s·b·h  bytes;  received buffer and M_in:
///   e·s·b·h bytes (once per slice, not per layer).
/// At e = 2 M_B is the published s·b·(34h + 5·a·s): 32h and 4as of it are e-byte tensors, 2h
/// and as the two 1-byte dropout masks. Throws invalid_argument when a dimension is 0.
inline transformer_profile transformer_costs(
    const transformer_dims& dims, transformer_units units = transformer_units::absolute) {
  auto need = [](std::uint64_t v, const char* field) {
    if (v == 0) {
      detail::fail("transformer_costs: ", field, " must be at least 1");
    }
  };
  need(dims.hidden, "hidden (h=0)");
  need(dims.heads, "heads (a=0)");
  need(dims.sequence, "sequence (s=0)");
  need(dims.microbatch, "microbatch (b=0)");
  need(dims.layers, "layers (0)");
  need(dims.activation_bytes, "activation_bytes (0)");
  // The zero-bubble paper's layer (docs/model.md §10): GELU MLP with f = 4h, multi-head
  // attention, no tensor parallelism, the attention core unmasked.
  transformer_spec layer;
  layer.layers = 1;
  layer.hidden = dims.hidden;
  layer.ffn = 4 * dims.hidden;
  layer.heads = static_cast<std::uint32_t>(dims.heads);
  layer.vocab = 1;
  layer.activation_bytes = dims.activation_bytes;
  const layer_flops work = flops_of_layer(layer, dims.sequence, dims.microbatch, false);
  const layer_activation_bytes kept =
      activation_bytes_of_layer(layer, dims.sequence, dims.microbatch, 1, false);
  const auto l = static_cast<double>(dims.layers);
  const double f = work.forward();
  const double bi = work.backward_input();
  const double w = work.backward_weight();
  const double mb = kept.full;
  const double mw = kept.weight_grad;
  const double recv = kept.input;

  const double cost_unit = units == transformer_units::per_layer ? f : 1.0;
  const double mem_unit = units == transformer_units::per_layer ? mb : 1.0;
  transformer_profile out;
  out.units = units;
  out.costs = op_costs{l * f / cost_unit, l * bi / cost_unit, l * w / cost_unit};
  out.memory = chunk_memory{l * mb / mem_unit, l * mw / mem_unit, recv / mem_unit, recv / mem_unit};
  if (!std::isfinite(out.costs.backward_input) || !std::isfinite(out.memory.activation)) {
    detail::fail("transformer_costs: dimensions are too large (costs overflow)");
  }
  return out;
}

/// A uniform cost_model from a profile of one stage's slice (per stage: a schedule with v
/// chunks gives each chunk 1/v of it), with transfer latency `comm` (same units as costs).
inline cost_model make_cost_model(const transformer_profile& prof, double comm = 0.0) {
  return cost_model(prof.costs, comm);
}

/// A uniform memory_model from a profile of one stage's slice (per stage, split over v).
inline memory_model make_memory_model(const transformer_profile& prof) {
  return memory_model(prof.memory);
}

}  // namespace pipesched
