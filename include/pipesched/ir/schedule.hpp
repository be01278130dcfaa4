#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"

namespace pipesched {

/// Largest accepted micro-batch count: leaves room for 32-bit micro-batch indices and keeps
/// any accidental request (say m = 4e9) from allocating terabytes.
inline constexpr std::uint32_t max_microbatches = std::uint32_t{1} << 24;
/// Largest accepted stage count.
inline constexpr std::uint32_t max_stages = std::uint32_t{1} << 16;

/// A pipeline schedule: the spec (stages p, micro-batches m, chunks per stage v and the
/// placement of model chunks on stages) plus one ordered op list per stage.
///
/// Each stage executes its list in order; an op waits until its inputs have arrived (see
/// dependencies.hpp). A schedule may be invalid (missing ops, bad order, deadlock): build it
/// freely, then ask validate() for a report.
class schedule {
 public:
  /// An empty schedule of one stage and one micro-batch (a value to assign to).
  schedule() : schedule("", placement{}, 1) {}

  /// An empty schedule (no ops) for `microbatches` micro-batches on placement `pl`. The named
  /// factories are the only way to build one: both take the shape first and m last, so a
  /// stage count and a micro-batch count cannot be swapped by picking the other overload.
  static schedule on(std::string name, placement pl, std::uint32_t microbatches) {
    return schedule(std::move(name), std::move(pl), microbatches);
  }
  /// An empty schedule with one chunk per stage (placement::sequential(stages)).
  static schedule sequential(std::string name, std::uint32_t stages, std::uint32_t microbatches) {
    return on(std::move(name), placement::sequential(stages), microbatches);
  }

  const std::string& name() const noexcept { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  std::uint32_t stages() const noexcept { return placement_.stages(); }
  std::uint32_t microbatches() const noexcept { return microbatches_; }
  std::uint32_t chunks() const noexcept { return placement_.chunks(); }
  const placement& layout() const noexcept { return placement_; }

  /// The route micro-batch mb runs along (placement::route_of_microbatch for this m). One route
  /// unless the placement is `dual`; there mb < m/2 enters at stage 0 and the others at p-1.
  std::uint32_t route_of(microbatch_index mb) const noexcept {
    return placement_.route_of_microbatch(mb, microbatches_);
  }
  /// True when global chunk g lies on micro-batch mb's route, so mb has ops there.
  bool on_route(microbatch_index mb, global_chunk g) const noexcept {
    return placement_.route_of_chunk(g) == route_of(mb);
  }

  /// Stage s's ops in execution order.
  std::span<const op> ops(stage_index s) const noexcept { return ops_[s]; }
  /// Mutable list, for building or editing a schedule by hand.
  std::vector<op>& stage_ops(stage_index s) noexcept { return ops_[s]; }
  const std::vector<op>& stage_ops(stage_index s) const noexcept { return ops_[s]; }

  /// Total number of ops over all stages.
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& v : ops_) {
      n += v.size();
    }
    return n;
  }

  /// True when any stage's list holds a SEND_* or RECV_* op.
  bool has_comm() const noexcept {
    for (const auto& v : ops_) {
      for (const op& o : v) {
        if (is_comm(o.kind)) {
          return true;
        }
      }
    }
    return false;
  }

  /// The same schedule: equal micro-batch count, placement (stages, chunks, layout) and op
  /// lists, in order. The name is a label and is not compared (a renamed copy is equal).
  friend bool operator==(const schedule& a, const schedule& b) noexcept {
    return a.microbatches_ == b.microbatches_ && a.placement_ == b.placement_ && a.ops_ == b.ops_;
  }

 private:
  schedule(std::string name, placement pl, std::uint32_t microbatches)
      : name_(std::move(name)), microbatches_(microbatches), placement_(std::move(pl)) {
    if (microbatches == 0 || microbatches > max_microbatches) {
      detail::fail("schedule: microbatches (m=", microbatches, ") must be between 1 and ",
                   max_microbatches);
    }
    if (microbatches % placement_.routes() != 0) {
      detail::fail("schedule: microbatches (m=", microbatches,
                   ") must be a multiple of the routes (", placement_.routes(), ") of placement ",
                   to_string(placement_.kind()), ": each route takes m/routes micro-batches");
    }
    if (placement_.stages() > max_stages) {
      detail::fail("schedule: stages (p=", placement_.stages(), ") must be at most ", max_stages);
    }
    ops_.resize(placement_.stages());
  }

  std::string name_;
  std::uint32_t microbatches_;
  placement placement_;
  std::vector<std::vector<op>> ops_;
};

}  // namespace pipesched
