#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/transformer_costs.hpp"

// Links with bandwidth and traffic classes (docs/robustness.md §8): the
// description only; analysis/link_timing.hpp times schedules over it.

namespace pipesched {

/// How a stage's link (its NIC's send side) orders the messages waiting for it.
enum class link_discipline : std::uint8_t {
  /// One queue: each message is sent whole, in the order it was handed to the link. A pipeline
  /// send queued behind a gradient bucket waits for the bucket.
  fifo,
  /// Two traffic classes: pipeline sends (activations and input gradients) before bulk
  /// all-reduce traffic, strictly, FIFO within a class. Preemptive at packet granularity, as
  /// the traffic classes of modern NICs arbitrate per packet: a pipeline send never waits for
  /// bulk bytes (modelled fluid, packets of size 0).
  priority,
};

constexpr std::string_view to_string(link_discipline d) noexcept {
  return d == link_discipline::fifo ? "fifo" : "priority";
}

/// "fifo" or "priority" (the CLI's --discipline); throws invalid_argument naming `who`.
inline link_discipline parse_link_discipline(std::string_view text,
                                             std::string_view who = "parse_link_discipline") {
  if (text == "fifo") {
    return link_discipline::fifo;
  }
  if (text == "priority") {
    return link_discipline::priority;
  }
  detail::fail(who, ": discipline (\"", text, "\") must be fifo or priority");
}

/// Bulk traffic on the links: the data-parallel gradient all-reduce of D replicas, bucketed
/// per chunk. A stage's gradients of local chunk c (gradient_bytes(s) / v) are complete once
/// the chunk's last W (or BW) on the stage has run: with K = `buckets_per_chunk` buckets (of
/// layers), bucket j = 1..K is ready when j / K of that op has run (its layers' weight
/// gradients come one after the other; K = 1: at its end, as DDP's hooks would fire). Each
/// bucket is a ring all-reduce of 2(D−1) steps, each step one message of bucket / D bytes
/// on the stage's link followed by `step_latency` (the next step needs the peer's message:
/// replicas are assumed to run in lockstep, so the peer's arrives when ours does). A stage
/// reduces one bucket at a time, in the order they become ready (one communication stream,
/// as NCCL runs it). Uncontended, a bucket takes ring_allreduce_time(D, bytes, bandwidth,
/// step_latency) (model/data_parallel.hpp).
struct bulk_traffic {
  std::uint32_t replicas = 1;  ///< D >= 1; 1: no bulk traffic
  /// Gradient bytes of each stage's slice (size p), or one value for every stage (size 1).
  std::vector<double> gradient_bytes{0.0};
  double step_latency = 0.0;            ///< per ring step, >= 0 (data_parallel_model::latency)
  std::uint32_t buckets_per_chunk = 1;  ///< >= 1

  /// The bulk traffic of a data-parallel model: its replicas, gradient bytes and per-step
  /// latency. Its bandwidth is not taken: the ring shares the stage's link (link_model).
  static bulk_traffic from(const data_parallel_model& dp, std::uint32_t buckets_per_chunk = 1) {
    return bulk_traffic{dp.replicas, dp.gradient_bytes, dp.latency, buckets_per_chunk};
  }

  bool any() const noexcept { return replicas > 1; }
  /// Gradient bytes of stage s (its whole slice, all chunks).
  double bytes(stage_index s) const noexcept {
    return gradient_bytes.size() == 1 ? gradient_bytes[0]
                                      : (s < gradient_bytes.size() ? gradient_bytes[s] : 0.0);
  }
  /// Ring steps per bucket: 2(D−1).
  std::uint32_t steps() const noexcept { return replicas <= 1 ? 0 : 2 * (replicas - 1); }
};

/// The links of a pipeline: each stage sends through one link (its NIC's send side) of
/// `bandwidth(s)` bytes per cost-model time unit, shared by its pipeline sends and its bulk
/// all-reduce traffic, ordered by `discipline`.
///
/// A message handed to the link at time t (when its producer ends) is sent once the link
/// reaches it, lasts bytes / bandwidth on the link, and arrives T_comm(from, to) after its
/// last byte left (the cost model's latency: the one latency of docs/model.md §3). Uncontended
/// and at infinite bandwidth it arrives at t + T_comm, simulate()'s rule.
///
/// Pipeline messages: an F's activation to the next chunk's stage (`activation_bytes`), a B's
/// or BW's input gradient to the previous chunk's stage (`gradient_bytes`); none between
/// chunks on the same stage. Sizes are per message: a chunk boundary carries the same tensor
/// for any v (transformer_link_model: e·s·b·h bytes). Receiving is not modelled (full-duplex
/// links, no contention at the receiver).
struct link_model {
  /// Bytes per time unit of each stage's link (size p), or one value (size 1); > 0, infinity
  /// allowed (no serialization).
  std::vector<double> bandwidth{std::numeric_limits<double>::infinity()};
  double activation_bytes = 0.0;  ///< per F -> F message, >= 0
  double gradient_bytes = 0.0;    ///< per B / BW -> B message, >= 0
  link_discipline discipline = link_discipline::fifo;
  bulk_traffic bulk{};

  double bandwidth_of(stage_index s) const noexcept {
    return bandwidth.size() == 1 ? bandwidth[0]
                                 : (s < bandwidth.size() ? bandwidth[s] : bandwidth.back());
  }

  /// Throws invalid_argument, prefixed with `who`, naming the field and the rule: a table of
  /// the wrong size (one value or p), a bandwidth not > 0, a size or latency not finite and
  /// >= 0, D or buckets_per_chunk 0.
  void check(std::uint32_t stages, std::string_view who) const {
    auto sized = [&](const std::vector<double>& t, const char* field) {
      if (t.size() != 1 && t.size() != stages) {
        detail::fail(who, ": ", field, " (", t.size(), " entries) must hold one value or one per ",
                     "stage (p=", stages, ")");
      }
    };
    auto non_negative = [&](double x, const char* field) {
      if (!std::isfinite(x) || x < 0.0) {
        detail::fail(who, ": ", field, " (", x, ") must be finite and >= 0");
      }
    };
    sized(bandwidth, "link bandwidth");
    for (double b : bandwidth) {
      if (std::isnan(b) || b <= 0.0) {
        detail::fail(who, ": link bandwidth (", b,
                     ") must be > 0 (bytes per time unit; infinity: no serialization)");
      }
    }
    non_negative(activation_bytes, "link activation_bytes");
    non_negative(gradient_bytes, "link gradient_bytes");
    if (bulk.replicas == 0) {
      detail::fail(who, ": bulk replicas (D=0) must be at least 1");
    }
    sized(bulk.gradient_bytes, "bulk gradient_bytes");
    for (double b : bulk.gradient_bytes) {
      non_negative(b, "bulk gradient_bytes");
    }
    non_negative(bulk.step_latency, "bulk step_latency");
    if (bulk.buckets_per_chunk == 0) {
      detail::fail(who, ": bulk buckets_per_chunk (0) must be at least 1");
    }
  }
};

/// A link model for a transformer slice per stage (`dims.layers` layers per stage): pipeline
/// messages of e·s·b·h bytes (the chunk-boundary tensor, transformer_costs' `received`) both
/// ways, and bulk traffic of `replicas` replicas reducing transformer_gradient_bytes(dims,
/// bytes_per_param) per stage. `bandwidth` in bytes per cost-model time unit.
inline link_model transformer_link_model(const transformer_dims& dims,
                                         double bandwidth,
                                         std::uint32_t replicas = 1,
                                         double bytes_per_param = 2.0) {
  const transformer_profile prof = transformer_costs(dims);
  link_model l;
  l.bandwidth = {bandwidth};
  l.activation_bytes = prof.memory.received;
  l.gradient_bytes = prof.memory.received;
  l.bulk.replicas = replicas;
  l.bulk.gradient_bytes = {transformer_gradient_bytes(dims, bytes_per_param)};
  return l;
}

}  // namespace pipesched
