#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Durations of the three compute passes of one chunk for one micro-batch. BW lasts
/// backward_input + backward_weight.
struct op_costs {
  double forward = 1.0;          ///< T_F
  double backward_input = 1.0;   ///< T_B
  double backward_weight = 1.0;  ///< T_W

  friend bool operator==(const op_costs&, const op_costs&) = default;
};

/// Time model of the zero-bubble paper (background §2): per-(stage, local chunk) compute costs
/// and the latency of a transfer between two different stages.
///
/// Costs are uniform by default; set_stage_costs() gives each stage its own triple (used for
/// every chunk on that stage) and set_chunk_costs() one triple per (stage, local chunk).
/// Communication is uniform (set_comm) or per ordered link (set_link_comm, p*p entries).
/// Communication ops (SEND_*/RECV_*) take zero compute time; the transfer latency is charged
/// on the cross-stage edge.
class cost_model {
 public:
  cost_model() = default;
  cost_model(op_costs uniform, double comm) : uniform_(uniform), comm_(comm) {
    check(uniform_, "cost_model");
    check_value(comm_, "cost_model", "comm (T_comm)");
  }

  /// Unit costs (1, 1, 1) and no communication latency.
  static cost_model unit() { return cost_model{}; }
  static cost_model uniform(double tf, double tb, double tw, double comm = 0.0) {
    return cost_model(op_costs{tf, tb, tw}, comm);
  }

  /// One triple per stage (size p), applied to every chunk on that stage.
  cost_model& set_stage_costs(std::vector<op_costs> per_stage) {
    for (std::size_t i = 0; i < per_stage.size(); ++i) {
      check(per_stage[i], "cost_model::set_stage_costs");
    }
    stage_costs_ = std::move(per_stage);
    chunk_costs_.clear();
    return *this;
  }
  /// One triple per (stage, local chunk): index s*chunks + c.
  cost_model& set_chunk_costs(std::uint32_t chunks, std::vector<op_costs> per_chunk) {
    if (chunks == 0 || per_chunk.size() % chunks != 0) {
      detail::fail("cost_model::set_chunk_costs: size (", per_chunk.size(),
                   ") must be a multiple of chunks (v=", chunks, ")");
    }
    for (const auto& c : per_chunk) {
      check(c, "cost_model::set_chunk_costs");
    }
    chunks_ = chunks;
    chunk_costs_ = std::move(per_chunk);
    stage_costs_.clear();
    return *this;
  }
  cost_model& set_comm(double comm) {
    check_value(comm, "cost_model::set_comm", "comm (T_comm)");
    comm_ = comm;
    link_comm_.clear();
    return *this;
  }
  /// p*p latencies: entry from*p + to is the latency of a transfer from stage `from` to `to`.
  cost_model& set_link_comm(std::uint32_t stages, std::vector<double> latencies) {
    if (latencies.size() != std::size_t{stages} * stages) {
      detail::fail("cost_model::set_link_comm: size (", latencies.size(),
                   ") must be stages*stages (", std::size_t{stages} * stages, ")");
    }
    for (double v : latencies) {
      check_value(v, "cost_model::set_link_comm", "latency");
    }
    link_stages_ = stages;
    link_comm_ = std::move(latencies);
    return *this;
  }

  /// Costs of local chunk c on stage s (falls back to the uniform triple where no per-stage or
  /// per-chunk entry covers s).
  const op_costs& at(stage_index s, chunk_index c = 0) const noexcept {
    if (!chunk_costs_.empty()) {
      std::size_t i = std::size_t{s} * chunks_ + c;
      if (i < chunk_costs_.size()) {
        return chunk_costs_[i];
      }
    } else if (s < stage_costs_.size()) {
      return stage_costs_[s];
    }
    return uniform_;
  }

  /// Duration of an op of kind k for local chunk c on stage s. Comm ops take 0.
  double duration(stage_index s, op_kind k, chunk_index c = 0) const noexcept {
    const op_costs& t = at(s, c);
    switch (k) {
      case op_kind::forward:
        return t.forward;
      case op_kind::backward_input:
        return t.backward_input;
      case op_kind::backward_weight:
        return t.backward_weight;
      case op_kind::backward_full:
        return t.backward_input + t.backward_weight;
      default:
        return 0.0;
    }
  }

  /// Latency of a transfer from stage `from` to stage `to`; 0 when from == to.
  double comm(stage_index from, stage_index to) const noexcept {
    if (from == to) {
      return 0.0;
    }
    if (!link_comm_.empty() && from < link_stages_ && to < link_stages_) {
      return link_comm_[std::size_t{from} * link_stages_ + to];
    }
    return comm_;
  }

  const op_costs& uniform_costs() const noexcept { return uniform_; }
  double uniform_comm() const noexcept { return comm_; }
  bool is_uniform() const noexcept {
    return stage_costs_.empty() && chunk_costs_.empty() && link_comm_.empty();
  }
  const std::vector<op_costs>& stage_costs() const noexcept { return stage_costs_; }
  const std::vector<op_costs>& chunk_costs() const noexcept { return chunk_costs_; }
  std::uint32_t chunk_costs_chunks() const noexcept { return chunks_; }
  const std::vector<double>& link_comm() const noexcept { return link_comm_; }

 private:
  static void check_value(double v, const char* where, const char* field) {
    if (!std::isfinite(v) || v < 0.0) {
      detail::fail(where, ": ", field, " (", v, ") must be finite and >= 0");
    }
  }
  static void check(const op_costs& c, const char* where) {
    check_value(c.forward, where, "forward cost (T_F)");
    check_value(c.backward_input, where, "backward-input cost (T_B)");
    check_value(c.backward_weight, where, "backward-weight cost (T_W)");
  }

  op_costs uniform_{};
  double comm_ = 0.0;
  std::vector<op_costs> stage_costs_;
  std::uint32_t chunks_ = 1;
  std::vector<op_costs> chunk_costs_;
  std::uint32_t link_stages_ = 0;
  std::vector<double> link_comm_;
};

}  // namespace pipesched
