#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/model/memory_model.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_CHECK_MEMORY)
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#endif

namespace pipesched {

/// Identity of a buffer: kind, the stage it lives on, local chunk and micro-batch.
struct buffer_id {
  buffer_kind kind = buffer_kind::activation;
  stage_index stage = 0;
  chunk_index chunk = 0;
  microbatch_index mb = 0;

  friend bool operator==(const buffer_id&, const buffer_id&) = default;
};

/// "activation(stage 1, chunk 0, mb 3)".
inline std::string to_string(const buffer_id& b) {
  return detail::concat(to_string(b.kind), "(stage ", b.stage, ", chunk ", b.chunk, ", mb ", b.mb,
                        ")");
}

/// A buffer alive at some point, with its size in the memory model's units.
struct live_buffer {
  buffer_id id{};
  double size = 0.0;

  friend bool operator==(const live_buffer&, const live_buffer&) = default;
};

enum class lifetime_error_kind : std::uint8_t {
  use_before_create,  ///< an op frees / consumes a buffer that was never created
  double_create,      ///< an op creates a buffer that already exists or existed
  double_free,        ///< an op frees a buffer that was already freed
  leak,               ///< a buffer is still alive after the stage's last op
};

constexpr std::string_view to_string(lifetime_error_kind k) noexcept {
  switch (k) {
    case lifetime_error_kind::use_before_create:
      return "use_before_create";
    case lifetime_error_kind::double_create:
      return "double_create";
    case lifetime_error_kind::double_free:
      return "double_free";
    case lifetime_error_kind::leak:
      return "leak";
  }
  return "?";
}

/// A buffer-lifetime error, located at the offending op (for a leak: the op that created the
/// buffer). `message` starts with the location: "stage 1, op 3 (B0): ...".
struct lifetime_error {
  lifetime_error_kind kind = lifetime_error_kind::leak;
  stage_index stage = 0;
  std::size_t op_index = 0;
  buffer_id buffer{};
  std::string message;
};

/// Memory of one stage over its op list. All values include the stage's static memory.
struct stage_memory {
  /// op_index value when a stage has no ops.
  static constexpr std::size_t no_index = std::numeric_limits<std::size_t>::max();

  double static_memory = 0.0;
  double peak = 0.0;                     ///< largest value (static + live buffers)
  std::size_t peak_op_index = no_index;  ///< first op after which `peak` is reached
  double peak_time = 0.0;                ///< end time of that op (when a simulation was given)
  /// (peak − static) in units of the stage's activation memory for one micro-batch, Σ_chunks M_B
  /// (1F1B stage 1: p; ZB-V in these units: p); 0 when that sum is 0.
  double peak_stage_units = 0.0;
  double final_value = 0.0;   ///< after the last op (static + leaked buffers)
  std::vector<double> curve;  ///< value after each op (when record_curve)
  /// End time of each op, aligned with `curve`, when check_memory() was given a simulation
  /// (shorter than `curve` if that simulation deadlocked); empty otherwise.
  std::vector<double> curve_time;
};

/// A stage above its memory limit.
struct budget_violation {
  stage_index stage = 0;
  double limit = 0.0;
  std::size_t op_index = 0;  ///< first op after which the stage's memory exceeds `limit`
  double value = 0.0;        ///< memory right after that op
  double peak = 0.0;         ///< the stage's peak
  std::size_t peak_op_index = 0;
  std::vector<live_buffer> live;  ///< buffers alive right after `op_index`, in creation order
  std::string message;            ///< "stage 2 exceeds its memory limit 3 at op 5 (F4): ..."
};

struct memory_options {
  /// Memory limit per stage, in the memory model's units, static memory included: none for no
  /// budget, one value for every stage, or one value per stage.
  memory_limits memory_limit;
  bool record_curve = true;       ///< keep the value after every op (8 bytes per op)
  std::size_t max_errors = 1000;  ///< lifetime errors stored (all are counted)
  /// A value exceeds a limit when value > limit·(1 + tolerance): relative to the limit, so it
  /// absorbs rounding in any memory unit (a limit of 2e-9 does not admit 3e-9).
  double tolerance = 1e-9;

  /// Checked against `limit`: one value for every stage or one per stage.
  static memory_options with_limit(memory_limits limit) {
    memory_options o;
    o.memory_limit = std::move(limit);
    return o;
  }
};

/// Result of check_memory().
struct memory_report {
  std::vector<stage_memory> stages;          ///< one per stage
  std::vector<lifetime_error> errors;        ///< the first max_errors, by stage then op
  std::size_t total_errors = 0;              ///< all lifetime errors found
  std::vector<budget_violation> violations;  ///< one per stage over its limit, by stage

  bool lifetimes_ok() const noexcept { return total_errors == 0; }
  bool within_budget() const noexcept { return violations.empty(); }
  bool ok() const noexcept { return lifetimes_ok() && within_budget(); }
  double peak_memory(stage_index s) const { return stages.at(s).peak; }
  /// Largest peak over all stages.
  double max_peak() const noexcept {
    return detail::largest_over_stages(stages, &stage_memory::peak);
  }
  std::size_t count(lifetime_error_kind k) const noexcept {
    std::size_t n = 0;
    for (const auto& e : errors) {
      n += e.kind == k ? 1 : 0;
    }
    return n;
  }
};

namespace detail {

/// Each stage's timed ops as a span, from per-stage lists of timed_op of any kind
/// (simulation_result::ops, timeline::stages).
template <class Lists>
std::vector<std::span<const timed_op>> stage_spans(const Lists& lists) {
  std::vector<std::span<const timed_op>> out;
  out.reserve(lists.size());
  for (const auto& l : lists) {
    out.emplace_back(l.data(), l.size());
  }
  return out;
}

/// Throws invalid_argument for options check_memory can't use: limits of the wrong size, a
/// tolerance that is negative or not finite, op timings of another number of stages.
inline void check_memory_inputs(const memory_options& options,
                                std::uint32_t p,
                                const std::vector<std::span<const timed_op>>* times) {
  options.memory_limit.check("check_memory", "memory_limit", p);
  if (!std::isfinite(options.tolerance) || options.tolerance < 0.0) {
    fail("check_memory: tolerance (", options.tolerance, ") must be finite and >= 0");
  }
  if (times != nullptr && times->size() != p) {
    fail("check_memory: the simulation has op timings for ", times->size(),
         " stages, the schedule has ", p, " (simulate with record_ops = true)");
  }
}

/// The memory check of check_memory(): the one overload the others call (compiled once in the
/// library unless PIPESCHED_HEADER_ONLY). `times`: each stage's op timings, or null.
PIPESCHED_INLINE memory_report
check_memory_impl(const schedule& sched,
                  const memory_model& model_in,
                  const memory_options& options,
                  const std::vector<std::span<const timed_op>>* times);

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_CHECK_MEMORY)

// Per (global chunk, micro-batch) lifetime bits: "live" and "was freed" for each buffer kind.
using buffer_bits = std::uint16_t;  // 2 bits per buffer_kind
static_assert(2 * buffer_kind_count <= 16);
constexpr buffer_bits buffer_live(buffer_kind k) noexcept {
  return static_cast<buffer_bits>(1u << (2u * static_cast<unsigned>(k)));
}
constexpr buffer_bits buffer_freed(buffer_kind k) noexcept {
  return static_cast<buffer_bits>(2u << (2u * static_cast<unsigned>(k)));
}

/// The lifetime bits of every buffer, per (global chunk, micro-batch). Sparse when p*v*m dwarfs
/// the op count (see key_table); when dense, the hot loop indexes its storage directly.
struct buffer_states {
  key_table<buffer_bits> table;
  buffer_bits* dense;

  buffer_states(std::uint64_t keys, std::uint64_t ops)
      : table(keys, ops), dense(table.dense() && keys > 0 ? &table.slot(0) : nullptr) {}
  buffer_states(const buffer_states&) = delete;  // `dense` points into `table`
  buffer_states& operator=(const buffer_states&) = delete;

  buffer_bits& at(std::uint64_t key) { return dense != nullptr ? dense[key] : table.slot(key); }
};

/// check_memory's passes over one stage: the running value and the lifetime rules op by op,
/// then the peak's time, the budget violation's message and the leaks. PerMb as in
/// check_memory_impl; `lowered`: the schedule has SEND / RECV ops.
template <bool PerMb>
class stage_memory_check {
 public:
  stage_memory_check(const schedule& sched,
                     const shaped_memory_model& model,
                     const memory_options& options,
                     buffer_states& states,
                     memory_report& report,
                     stage_index s,
                     bool lowered)
      : pl_(sched.layout()),
        m_(sched.microbatches()),
        lowered_(lowered),
        model_(model),
        options_(options),
        states_(states),
        report_(report),
        s_(s),
        ops_(sched.ops(s)),
        st_(report.stages[s]),
        limited_(options.memory_limit.has_value()),
        limit_(!limited_ ? 0.0 : options.memory_limit.at(s)),
        threshold_(limit_threshold(limit_, options.tolerance)),
        per_mb_(std::size_t{pl_.chunks()} * buffer_kind_count) {
    st_.static_memory = model.static_memory(s);
    st_.peak = st_.static_memory;
    if (options.record_curve) {
      st_.curve.resize(ops_.size());
    }
    read_sizes();
  }

  /// All the passes, in order; `times`: the simulation's op timings of every stage, or null.
  void run(const std::vector<std::span<const timed_op>>* times) {
    walk_ops();
    if (times != nullptr) {
      stamp_times((*times)[s_]);
    }
    finish_peak();
    if (over_) {
      describe_budget_violation();
    }
    report_leaks();
  }

 private:
  /// Sizes of each buffer kind per local chunk (and micro-batch), read once per stage.
  void read_sizes() {
    const std::uint32_t mbs = PerMb ? m_ : 1;
    sizes_.resize(per_mb_ * mbs);
    for (microbatch_index j = 0; j < mbs; ++j) {
      for (chunk_index c = 0; c < pl_.chunks(); ++c) {
        const chunk_memory cm = PerMb ? model_.at(s_, c, j) : model_.at(s_, c);
        for (std::size_t b = 0; b < buffer_kind_count; ++b) {
          sizes_[j * per_mb_ + c * buffer_kind_count + b] =
              buffer_size(static_cast<buffer_kind>(b), cm);
        }
      }
    }
  }
  double size_of(buffer_kind k, const op& o) const {
    const std::size_t at = std::size_t{o.chunk} * buffer_kind_count + static_cast<std::size_t>(k);
    if constexpr (PerMb) {
      return sizes_[o.mb * per_mb_ + at];
    } else {
      return sizes_[at];
    }
  }
  buffer_bits& bits(const op& o) {
    return states_.at(std::uint64_t{pl_.global(s_, o.chunk)} * m_ + o.mb);
  }
  void error(
      lifetime_error_kind k, std::size_t i, const op& o, buffer_kind b, std::string_view what) {
    ++report_.total_errors;
    if (report_.errors.size() < options_.max_errors) {
      const buffer_id id{b, s_, o.chunk, o.mb};
      report_.errors.push_back(
          lifetime_error{k, s_, i, id,
                         concat("stage ", s_, ", op ", i, " (", to_string(o, pl_.chunks() > 1),
                                "): ", what, " ", to_string(id))});
    }
  }

  // The lifetime rules on one buffer's bits, moving `value` (the hot loop's running value); the
  // error paths are out of the hot loop.
  void create(buffer_bits& bits, std::size_t i, const op& o, buffer_kind b, double& value) {
    if ((bits & (buffer_live(b) | buffer_freed(b))) != 0) {
      error(lifetime_error_kind::double_create, i, o, b, "creates again");
      return;
    }
    bits = static_cast<buffer_bits>(bits | buffer_live(b));
    value += size_of(b, o);
  }
  void release(buffer_bits& bits, std::size_t i, const op& o, buffer_kind b, double& value) {
    if ((bits & buffer_live(b)) == 0) {
      if ((bits & buffer_freed(b)) != 0) {
        error(lifetime_error_kind::double_free, i, o, b, "frees again");
      } else {
        error(lifetime_error_kind::use_before_create, i, o, b, "uses before it is created");
      }
      return;
    }
    bits = static_cast<buffer_bits>((bits & ~buffer_live(b)) | buffer_freed(b));
    value -= size_of(b, o);
  }
  /// Lowered schedules: an F / B / BW whose input came from another stage consumes the RECV.
  void consume_received(std::size_t i, const op& o, double& value) {
    for (const requirement& r : requirements_of(pl_, s_, o, true)) {
      if (r.what == event_kind::received_forward) {
        release(bits(o), i, o, buffer_kind::received_forward, value);
      } else if (r.what == event_kind::received_backward) {
        release(bits(o), i, o, buffer_kind::received_backward, value);
      }
    }
  }
  /// What op i (indices in range) does to its buffers, in buffer_effect's order.
  void apply_effects(const buffer_effect& e, std::size_t i, const op& o, double& value) {
    if (lowered_ && e.consumes_received) {
      consume_received(i, o, value);
    }
    if (e.frees || e.creates) {
      buffer_bits& b = bits(o);
      if (e.frees) {
        release(b, i, o, *e.frees, value);
      }
      if (e.creates) {
        create(b, i, o, *e.creates, value);
      }
    }
  }

  /// The hot loop: the value after each op, its curve and peak, and the first op over the limit.
  void walk_ops() {
    constexpr buffer_effect_table effects{};
    double* const curve = options_.record_curve ? st_.curve.data() : nullptr;
    const bool limited = limited_;
    const double threshold = threshold_;
    const std::uint32_t chunks = pl_.chunks();
    double value = st_.static_memory;
    double peak = st_.peak;
    std::size_t peak_at = stage_memory::no_index;
    bool over = false;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const op& o = ops_[i];
      if (o.chunk < chunks && o.mb < m_) {  // out-of-range ops: the validator's business
        apply_effects(effects(o), i, o, value);
      }
      if (curve != nullptr) {
        curve[i] = value;
      }
      if (peak_at == stage_memory::no_index || value > peak) {
        peak = value;  // never below static: values are static + live sizes
        peak_at = i;
      }
      if (limited && !over && value > threshold) {
        over = true;
        budget_violation bv;
        bv.stage = s_;
        bv.limit = limit_;
        bv.op_index = i;
        bv.value = value;
        bv.live = live_now(i);
        report_.violations.push_back(std::move(bv));
      }
    }
    st_.peak = peak;
    st_.peak_op_index = peak_at;
    st_.final_value = value;
    over_ = over;
  }

  /// The end time of each op on the curve (when recorded) and of the peak's op; `stamps` may be
  /// shorter than the list (a simulation that deadlocked).
  void stamp_times(std::span<const timed_op> stamps) {
    const std::size_t n = std::min(stamps.size(), ops_.size());
    if (options_.record_curve) {
      st_.curve_time.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        st_.curve_time[i] = stamps[i].end;
      }
    }
    if (st_.peak_op_index != stage_memory::no_index && st_.peak_op_index < n) {
      st_.peak_time = stamps[st_.peak_op_index].end;
    }
  }

  /// The peak in stage units; throws when it overflowed to infinity.
  void finish_peak() {
    const double units = stage_activation(model_, s_, pl_.chunks());
    st_.peak_stage_units = units > 0.0 ? (st_.peak - st_.static_memory) / units : 0.0;
    if (!std::isfinite(st_.peak)) {
      fail("check_memory: the peak memory of stage ", s_, " (", st_.peak,
           ") is not a finite number: the memory sizes are too large to add up");
    }
  }

  /// The stage's budget violation (pushed by walk_ops) gets the peak, known only at the end.
  void describe_budget_violation() {
    budget_violation& v = report_.violations.back();
    v.peak = st_.peak;
    v.peak_op_index = st_.peak_op_index;
    v.message = concat("stage ", s_, " exceeds its memory limit ", limit_, " at op ", v.op_index,
                       " (", to_string(ops_[v.op_index], pl_.chunks() > 1), "): ", v.value,
                       " (peak ", v.peak, " at op ", v.peak_op_index, ")");
  }

  /// Calls f(j, o, b) for each op among [0, n) that created buffer b still alive when it is
  /// reached, in list order (the budget report's live set and the leak scan).
  template <class F>
  void for_each_live_creator(std::size_t n, F&& f) {
    constexpr buffer_effect_table effects{};
    for (std::size_t j = 0; j < n; ++j) {
      const op& o = ops_[j];
      if (o.chunk >= pl_.chunks() || o.mb >= m_) {
        continue;
      }
      const auto& created = effects(o).creates;
      if (created && (bits(o) & buffer_live(*created)) != 0) {
        f(j, o, *created);
      }
    }
  }
  /// Buffers alive after op i, in creation order (a buffer created twice listed once).
  std::vector<live_buffer> live_now(std::size_t i) {
    std::vector<live_buffer> live;
    std::unordered_set<std::uint64_t> seen;
    for_each_live_creator(i + 1, [&](std::size_t, const op& o, buffer_kind b) {
      const std::uint64_t key =
          (std::uint64_t{o.chunk} * m_ + o.mb) * buffer_kind_count + static_cast<std::uint64_t>(b);
      if (seen.insert(key).second) {
        live.push_back(live_buffer{buffer_id{b, s_, o.chunk, o.mb}, size_of(b, o)});
      }
    });
    return live;
  }
  /// Leaks: every buffer still alive, reported at the op that created it.
  void report_leaks() {
    for_each_live_creator(ops_.size(), [&](std::size_t i, const op& o, buffer_kind b) {
      buffer_bits& bb = bits(o);
      bb = static_cast<buffer_bits>(bb & ~buffer_live(b));  // report it once
      error(lifetime_error_kind::leak, i, o, b, "never frees");
    });
  }

  const placement& pl_;
  std::uint32_t m_;
  bool lowered_;
  const shaped_memory_model& model_;
  const memory_options& options_;
  buffer_states& states_;
  memory_report& report_;
  stage_index s_;
  std::span<const op> ops_;
  stage_memory& st_;
  bool limited_;
  double limit_;
  double threshold_;
  bool over_ = false;   ///< the stage went over its limit (its violation is the report's last)
  std::size_t per_mb_;  ///< sizes of one micro-batch: local chunks × buffer kinds
  std::vector<double> sizes_;
};

/// PerMb: the model has per-micro-batch factors (sizes looked up per micro-batch); false: one
/// size per (chunk, buffer kind), the loop as it was without them.
template <bool PerMb>
memory_report check_memory_impl(const schedule& sched,
                                const shaped_memory_model& model,
                                const memory_options& options,
                                const std::vector<std::span<const timed_op>>* times) {
  const std::uint32_t p = sched.stages();
  const bool lowered = sched.has_comm();
  check_memory_inputs(options, p, times);
  memory_report report;
  report.stages.resize(p);
  buffer_states states(std::uint64_t{sched.layout().total_chunks()} * sched.microbatches(),
                       sched.size());
  for (stage_index s = 0; s < p; ++s) {
    stage_memory_check<PerMb>(sched, model, options, states, report, s, lowered).run(times);
  }
  return report;
}

PIPESCHED_INLINE memory_report
check_memory_impl(const schedule& sched,
                  const memory_model& model_in,
                  const memory_options& options,
                  const std::vector<std::span<const timed_op>>* times) {
  const shaped_memory_model model = model_in.for_shape(sched.stages(), sched.layout().chunks(),
                                                       sched.microbatches(), "check_memory");
  return model.has_microbatch_factors() ? check_memory_impl<true>(sched, model, options, times)
                                        : check_memory_impl<false>(sched, model, options, times);
}

#endif

}  // namespace detail

/// Tracks every buffer of `sched` under `model` (docs/model.md §5), stage by stage in list order:
/// F creates activation (M_B); B frees it and creates weight_grad_input (M_W, so the stage
/// holds M_W until W); W frees that; BW frees the activation. In a lowered schedule RECV_F /
/// RECV_B create a receive buffer (`received`) that the consuming F / B / BW frees. Reports
/// lifetime errors (use before create, double create, double free, leak), the per-stage peak
/// and memory curve (static memory included), and every stage above its limit in `options`.
/// Linear in the number of ops; one byte per (global chunk, micro-batch).
/// Sizes are read for the schedule's shape (memory_model::for_shape: per-stage sizes split over
/// its v chunks). Throws invalid_argument for malformed options (limits of the wrong size,
/// negative values), tables of another shape, and peaks that overflow to infinity.
inline memory_report check_memory(const schedule& sched,
                                  const memory_model& model = {},
                                  const memory_options& options = {}) {
  return detail::check_memory_impl(sched, model, options, nullptr);
}

/// As above, and stamps the curve and the peaks with the end time of each op: `sim` is a
/// simulation_result of simulate(sched, ...) with record_ops on (a template so that the memory
/// checker does not need the simulator; anything with per-stage `ops` of timed_op works).
template <class Simulation>
  requires requires(const Simulation& r) {
    detail::stage_spans(r.ops);
  }
memory_report check_memory(const schedule& sched,
                           const memory_model& model,
                           const memory_options& options,
                           const Simulation& sim) {
  const std::vector<std::span<const timed_op>> times = detail::stage_spans(sim.ops);
  return detail::check_memory_impl(sched, model, options, &times);
}

}  // namespace pipesched
