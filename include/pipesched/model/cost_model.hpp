#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/model/microbatch_factors.hpp"

namespace pipesched {

/// Durations of the three compute passes of one chunk for one micro-batch. BW lasts
/// backward_input + backward_weight.
struct op_costs {
  double forward = 1.0;          ///< T_F
  double backward_input = 1.0;   ///< T_B
  double backward_weight = 1.0;  ///< T_W
  /// T_FB: how long an F runs overlapped with a B (an op pair marked with overlapping_next,
  /// docs/model.md §3), as one slot. Unset: T_F + T_B, no gain. Split over v like the others.
  std::optional<double> overlapped{};
  /// T_R: how long a recompute R (re-running a forward, docs/model.md §3) lasts. Unset: T_F.
  /// Split over v like the others.
  std::optional<double> recompute{};

  friend bool operator==(const op_costs&, const op_costs&) = default;
};

/// One op's duration split for the overlap rule (overlapped_pair_time): the part that computes
/// and the communication inside it that another op's compute can hide (an MoE layer's
/// dispatch and combine all-to-all).
struct op_time_split {
  double compute = 0.0;
  double communication = 0.0;
  double total() const noexcept { return compute + communication; }
};

/// Compute and the communication that runs beside it (overlap_split).
struct overlapped_seconds {
  double compute = 0.0;  ///< the compute's seconds, slowed by what runs beside it
  double exposed = 0.0;  ///< the communication's seconds the compute does not hide
  double total() const noexcept { return compute + exposed; }
};

/// `compute` seconds of kernels with `communication` seconds of collectives beside them. The
/// communication kernels take SMs and HBM bandwidth, so the compute runs slower for as long as
/// they run beside it: by `slowdown` of the hidden time h = min(compute, communication) (Lee et
/// al., arXiv 2507.03114, measure 18.9 % on average on A100 and H100, 40 % at most; docs/
/// model.md §10.2). The pair lasts max(communication, compute + slowdown·h); with slowdown 0,
/// the longer of the two.
inline overlapped_seconds overlap_split(double compute,
                                        double communication,
                                        double slowdown) noexcept {
  const double slowed = compute + slowdown * std::min(compute, communication);
  return {slowed, std::max(0.0, communication - slowed)};
}

/// T_FB: how long an F and a B of two other micro-batches last overlapped on one stage
/// (op_costs::overlapped; docs/model.md §3, "What an overlapped pair hides"; DeepSeek-V3 §3.2.1).
/// The two computations run one after the other on the compute units, the two communications
/// one after the other on the links, and each op's communication beside the other's compute;
/// an op's own communication and compute stay in order (its dispatch before its experts, its
/// combine after them). So the pair lasts at least each stream's sum and each op alone:
///   T_FB = max(c_F + c_B, a_F + a_B, c_F + a_F, c_B + a_B),
/// which cutting each op into pieces and interleaving them (attention, dispatch, MLP, combine)
/// reaches. Without communication it is T_F + T_B: no gain. With `slowdown`, the compute also
/// runs slower beside the communication it hides (overlap_split): the hidden time is what the
/// two streams' sums exceed T_FB by.
inline double overlapped_pair_time(const op_time_split& f,
                                   const op_time_split& b,
                                   double slowdown = 0.0) noexcept {
  const double compute = f.compute + b.compute;
  const double communication = f.communication + b.communication;
  const double t = std::max({compute, communication, f.total(), b.total()});
  const double hidden = compute + communication - t;
  return std::max(t, overlap_split(compute, hidden, slowdown).total());
}

/// Time model of the zero-bubble paper (docs/model.md §3): compute costs per stage or per
/// (stage, local chunk), and the latency of a transfer between two different stages.
///
/// Units. A **per-stage** value is the cost of one stage's whole slice of the model (all its
/// layers) for one micro-batch: with v chunks per stage each chunk costs a v-th of it, so one
/// number means the same work for 1F1B (v = 1), interleaved 1F1B and ZB-V (v = 2), and their
/// makespans compare directly. The uniform triple (constructor, uniform()) and the
/// set_stage_costs() table are per stage. A **per-chunk** value (set_chunk_costs()) is that
/// chunk's own cost and is not divided. T_comm (set_comm, set_link_comm) is the latency of one
/// transfer and is not divided either.
///
/// A model is read for one schedule shape: for_shape(p, v) checks every table against it (a
/// `stages` table needs p entries, a `chunks` table p x v, a `links` matrix p x p) and fixes
/// the v the per-stage values are split over, returning a shaped_cost_model: only that type
/// reads a chunk's costs (at, duration, overlap_gain): reading them from a model not read for a
/// shape does not compile. The library's entry points (simulate, generators, lowering, executors)
/// take a plain model and read it for the schedule themselves. Communication ops (SEND_*/RECV_*)
/// take zero compute time; the transfer latency is charged on the cross-stage edge.
///
/// Micro-batches that differ (docs/model.md §3.1): set_microbatch_factors() multiplies each
/// micro-batch's costs (cost_factors), for every stage and chunk or per stage or per chunk;
/// at(s, c, mb) and duration(s, k, c, mb) read them. Without factors every micro-batch costs
/// at(s, c); factors of 1 give the same numbers bit for bit. T_comm is not scaled.
class shaped_cost_model;

class cost_model {
 public:
  cost_model() = default;
  /// Per stage: `uniform` is one stage's whole slice (split over its v chunks).
  cost_model(op_costs uniform, double comm) : uniform_(uniform), comm_(comm) {
    check(uniform_, "cost_model");
    check_value(comm_, "cost_model", "comm (T_comm)");
  }

  /// Unit costs (1, 1, 1) per stage and no communication latency.
  static cost_model unit() { return cost_model{}; }
  /// Per stage: T_F, T_B, T_W of one stage's whole slice for one micro-batch (a chunk costs
  /// T/v); `comm` is the latency of one transfer between two stages.
  static cost_model uniform(double tf, double tb, double tw, double comm = 0.0) {
    return cost_model(op_costs{tf, tb, tw}, comm);
  }

  /// Per stage: T_FB for every stage (op_costs::overlapped of the uniform costs; split over v):
  /// an overlapped F and B pair lasts T_FB instead of T_F + T_B (docs/model.md §3).
  cost_model& set_overlapped(double t_fb) {
    check_value(t_fb, "cost_model::set_overlapped", "overlapped cost (T_FB)");
    uniform_.overlapped = t_fb;
    return *this;
  }

  /// Per stage: T_R for every stage (op_costs::recompute of the uniform costs; split over v):
  /// a recompute R lasts T_R instead of T_F (docs/model.md §3).
  cost_model& set_recompute(double t_r) {
    check_value(t_r, "cost_model::set_recompute", "recompute cost (T_R)");
    uniform_.recompute = t_r;
    return *this;
  }

  /// Per stage: one triple per stage (size p), the stage's whole slice (a chunk costs T/v).
  cost_model& set_stage_costs(std::vector<op_costs> per_stage) {
    for (std::size_t i = 0; i < per_stage.size(); ++i) {
      check(per_stage[i], "cost_model::set_stage_costs");
    }
    stage_costs_ = std::move(per_stage);
    chunk_costs_.clear();
    return *this;
  }
  /// Per chunk: one triple per (stage, local chunk), each chunk's own cost; index s*chunks + c.
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

  /// Per micro-batch (docs/model.md §3.1): one cost_factors per micro-batch, for every stage and
  /// chunk; micro-batch j's ops of any chunk cost at(s, c) scaled by per_mb[j].
  cost_model& set_microbatch_factors(std::vector<cost_factors> per_mb) {
    return set_microbatch_factors(1, 1, std::move(per_mb));
  }
  /// Per micro-batch and stage (`chunks` 1: every chunk of the stage) or per (stage, chunk):
  /// index (mb·stages + s)·chunks + c, `stages` 1 or p and `chunks` 1 or v (for_shape checks).
  cost_model& set_microbatch_factors(std::uint32_t stages,
                                     std::uint32_t chunks,
                                     std::vector<cost_factors> table) {
    const char* who = "cost_model::set_microbatch_factors";
    for (std::size_t i = 0; i < table.size(); ++i) {
      const cost_factors& f = table[i];
      detail::check_factor(f.forward, who, i, "forward");
      detail::check_factor(f.backward_input, who, i, "backward_input");
      detail::check_factor(f.backward_weight, who, i, "backward_weight");
      if (f.recompute) {
        detail::check_factor(*f.recompute, who, i, "recompute");
      }
    }
    factors_ = detail::microbatch_table<cost_factors>(stages, chunks, std::move(table), who);
    return *this;
  }
  /// Removes the per-micro-batch factors: every micro-batch costs at(s, c) again.
  cost_model& clear_microbatch_factors() {
    factors_ = {};
    return *this;
  }
  bool has_microbatch_factors() const noexcept { return !factors_.empty(); }
  const detail::microbatch_table<cost_factors>& microbatch_factors() const noexcept {
    return factors_;
  }

  /// This model read for a schedule of `stages` stages and `chunks` chunks per stage, the only
  /// way to read a chunk's costs (shaped_cost_model): throws invalid_argument, prefixed with
  /// `who`, when a table does not have that shape; the copy splits per-stage values over
  /// `chunks`. The per-micro-batch table's micro-batch count is checked by the overload that
  /// takes m.
  shaped_cost_model for_shape(std::uint32_t stages,
                              std::uint32_t chunks,
                              std::string_view who) const;
  /// for_shape(stages, chunks, who), and a per-micro-batch table must hold `microbatches`
  /// entries.
  shaped_cost_model for_shape(std::uint32_t stages,
                              std::uint32_t chunks,
                              std::uint32_t microbatches,
                              std::string_view who) const;

  /// The per-micro-batch rule, written once (docs/model.md §3.1): each cost times its factor;
  /// T_R times the recompute factor (unset: forward's), set when either is; T_FB times the
  /// forward factor, so an overlapped pair of micro-batch j's F saves T_F(j) + T_B(j) − T_FB(j).
  /// Factors of 1 return `t` unchanged, bit for bit.
  static op_costs scaled(const op_costs& t, const cost_factors& f) noexcept {
    op_costs out{t.forward * f.forward, t.backward_input * f.backward_input,
                 t.backward_weight * f.backward_weight};
    const double fr = f.recompute.value_or(f.forward);
    if (t.recompute) {
      out.recompute = *t.recompute * fr;
    } else if (f.recompute) {
      out.recompute = t.forward * fr;
    }
    if (t.overlapped) {
      out.overlapped = *t.overlapped * f.forward;
    }
    return out;
  }

  /// Duration of an op of kind k with costs `t` (R: T_R, or T_F when unset; BW: T_B + T_W;
  /// comm ops 0).
  static double duration_of(const op_costs& t, op_kind k) noexcept {
    switch (k) {
      case op_kind::forward:
        return t.forward;
      case op_kind::backward_input:
        return t.backward_input;
      case op_kind::backward_weight:
        return t.backward_weight;
      case op_kind::backward_full:
        return t.backward_input + t.backward_weight;
      case op_kind::recompute:
        return t.recompute.value_or(t.forward);
      default:
        return 0.0;
    }
  }
  /// What overlapping an F with costs `t` with a B saves: T_F + T_B − T_FB, 0 when T_FB is unset.
  static double overlap_gain_of(const op_costs& t) noexcept {
    return t.overlapped ? t.forward + t.backward_input - *t.overlapped : 0.0;
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
  /// No per-stage, per-chunk, per-link or per-micro-batch table: one triple for everything.
  bool is_uniform() const noexcept {
    return stage_costs_.empty() && chunk_costs_.empty() && link_comm_.empty() && factors_.empty();
  }
  const std::vector<op_costs>& stage_costs() const noexcept { return stage_costs_; }
  const std::vector<op_costs>& chunk_costs() const noexcept { return chunk_costs_; }
  std::uint32_t chunk_costs_chunks() const noexcept { return chunks_; }
  const std::vector<double>& link_comm() const noexcept { return link_comm_; }

 protected:
  // The readers of a shaped model (shaped_cost_model makes them public): a chunk's costs
  // depend on the v its stage's values are split over, known only once read for a shape.
  /// Costs of local chunk c on stage s: its chunk-table entry, or its stage's per-stage triple
  /// (table or uniform) divided by v.
  op_costs at(stage_index s, chunk_index c = 0) const noexcept {
    if (!chunk_costs_.empty()) {
      std::size_t i = std::size_t{s} * chunks_ + c;
      if (i < chunk_costs_.size()) {
        return chunk_costs_[i];
      }
    }
    const op_costs& t = s < stage_costs_.size() ? stage_costs_[s] : uniform_;
    if (split_ <= 1) {
      return t;
    }
    const double v = split_;
    op_costs out{t.forward / v, t.backward_input / v, t.backward_weight / v};
    if (t.overlapped) {
      out.overlapped = *t.overlapped / v;
    }
    if (t.recompute) {
      out.recompute = *t.recompute / v;
    }
    return out;
  }

  /// Costs of micro-batch mb for local chunk c on stage s: at(s, c) scaled by its factors
  /// (scaled(); at(s, c) itself without factors).
  op_costs at(stage_index s, chunk_index c, microbatch_index mb) const noexcept {
    return factors_.empty() ? at(s, c) : scaled(at(s, c), factors_.at(s, c, mb));
  }

  /// Duration of an op of kind k for local chunk c on stage s (R: T_R, or T_F when unset).
  /// Comm ops take 0.
  double duration(stage_index s, op_kind k, chunk_index c = 0) const noexcept {
    return duration_of(at(s, c), k);
  }
  /// Duration of micro-batch mb's op of kind k for local chunk c on stage s.
  double duration(stage_index s, op_kind k, chunk_index c, microbatch_index mb) const noexcept {
    return duration_of(at(s, c, mb), k);
  }

  /// What overlapping an F of local chunk c on stage s with a B saves: T_F + T_B − T_FB of
  /// that chunk, 0 when T_FB is unset. An overlapped pair lasts the sum of its two ops'
  /// durations minus the gain of its F (docs/model.md §3): T_FB with a B, T_FB + T_W with a BW.
  double overlap_gain(stage_index s, chunk_index c = 0) const noexcept {
    return overlap_gain_of(at(s, c));
  }
  /// The gain of micro-batch mb's F (docs/model.md §3.1).
  double overlap_gain(stage_index s, chunk_index c, microbatch_index mb) const noexcept {
    return overlap_gain_of(at(s, c, mb));
  }

 private:
  friend class shaped_cost_model;
  static void check_value(double v, const char* where, const char* field) {
    if (!std::isfinite(v) || v < 0.0) {
      detail::fail(where, ": ", field, " (", v, ") must be finite and >= 0");
    }
  }
  static void check(const op_costs& c, const char* where) {
    check_value(c.forward, where, "forward cost (T_F)");
    check_value(c.backward_input, where, "backward-input cost (T_B)");
    check_value(c.backward_weight, where, "backward-weight cost (T_W)");
    if (c.overlapped) {
      check_value(*c.overlapped, where, "overlapped cost (T_FB)");
    }
    if (c.recompute) {
      check_value(*c.recompute, where, "recompute cost (T_R)");
    }
  }

  op_costs uniform_{};
  double comm_ = 0.0;
  std::vector<op_costs> stage_costs_;
  std::uint32_t chunks_ = 1;
  std::vector<op_costs> chunk_costs_;
  std::uint32_t link_stages_ = 0;
  std::vector<double> link_comm_;
  std::uint32_t split_ = 1;  // v for per-stage values: set by for_shape
  detail::microbatch_table<cost_factors> factors_;
};

/// A cost model read for one schedule shape (cost_model::for_shape): its tables checked against
/// p and v (and m), and the v that per-stage values are split over fixed, so a chunk's costs can
/// be read. Only this type has the readers (at, duration, overlap_gain): reading a chunk of a
/// model not read for a shape does not compile (it would take a stage's whole slice as each
/// chunk's cost, v times too large). It is a cost_model, so it goes wherever one is taken.
/// Its setters are the model's: one that changes a table's shape voids the check, so read the
/// changed model again (for_shape) rather than set a shaped one.
class shaped_cost_model : public cost_model {
 public:
  /// A default cost_model read for one chunk per stage (any p): a placeholder to assign to.
  shaped_cost_model() = default;
  using cost_model::at;
  using cost_model::duration;
  using cost_model::overlap_gain;

  std::uint32_t stages() const noexcept { return stages_; }
  /// The v per-stage values are split over.
  std::uint32_t chunks() const noexcept { return split_; }

  /// This model with per-micro-batch factors that do not differ between micro-batches folded
  /// away: none when they are all 1, a per-chunk table of the scaled costs when they are equal
  /// otherwise; unchanged when the micro-batches differ. What a search that treats equal
  /// micro-batches alike runs on.
  shaped_cost_model with_equal_factors_folded() const {
    shaped_cost_model out = *this;
    if (factors_.empty() || !factors_.rows_equal()) {
      return out;
    }
    if (!factors_.all_one()) {
      std::vector<op_costs> table(std::size_t{stages_} * split_);
      for (stage_index s = 0; s < stages_; ++s) {
        for (chunk_index c = 0; c < split_; ++c) {
          table[std::size_t{s} * split_ + c] = at(s, c, 0);
        }
      }
      out.set_chunk_costs(split_, std::move(table));
    }
    out.factors_ = {};
    return out;
  }

 private:
  friend class cost_model;
  shaped_cost_model(const cost_model& m, std::uint32_t stages, std::uint32_t chunks)
      : cost_model(m), stages_(stages) {
    split_ = chunks == 0 ? 1 : chunks;
  }
  std::uint32_t stages_ = 0;
};

inline shaped_cost_model cost_model::for_shape(std::uint32_t stages,
                                               std::uint32_t chunks,
                                               std::string_view who) const {
  if (!stage_costs_.empty() && stage_costs_.size() != stages) {
    detail::fail(who, ": cost model stages table (", stage_costs_.size(),
                 " entries) must hold one entry per stage (p=", stages, ")");
  }
  if (!chunk_costs_.empty() &&
      (chunks_ != chunks || chunk_costs_.size() != std::size_t{stages} * chunks)) {
    detail::fail(who, ": cost model chunks table (", chunk_costs_.size() / chunks_, " x ", chunks_,
                 ") must be p x v (", stages, " x ", chunks, ")");
  }
  if (!link_comm_.empty() && link_stages_ != stages) {
    detail::fail(who, ": cost model links matrix (", link_stages_, " x ", link_stages_,
                 ") must be p x p (", stages, " x ", stages, ")");
  }
  factors_.check_shape(stages, chunks, std::nullopt, who, "cost model");
  return shaped_cost_model(*this, stages, chunks);
}

inline shaped_cost_model cost_model::for_shape(std::uint32_t stages,
                                               std::uint32_t chunks,
                                               std::uint32_t microbatches,
                                               std::string_view who) const {
  factors_.check_shape(stages, chunks, microbatches, who, "cost model");
  return for_shape(stages, chunks, who);
}

}  // namespace pipesched
