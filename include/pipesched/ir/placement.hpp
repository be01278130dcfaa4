#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Largest accepted stages*chunks. The placement keeps three tables of that size (10 bytes per
/// chunk), so the cap bounds what a tiny file declaring `"stages": 16384, "chunks": 65535` can
/// make a reader allocate (160 MB, not 10 GB); real models have a few thousand chunks at most.
inline constexpr std::uint32_t max_total_chunks = std::uint32_t{1} << 24;

/// How model chunks are laid out over stages.
enum class placement_kind : std::uint8_t {
  sequential,  ///< one chunk per stage: global chunk g lives on stage g.
  loop,        ///< Megatron interleaving: global chunk c*p + s is local chunk c on stage s.
  v_shape,     ///< two chunks per stage: stage s holds global chunks s and 2p-1-s (a V).
  custom,      ///< any bijection given as a table.
  /// Two routes (DualPipe): stage s holds stage s of route 0 (global chunk s, entering at stage
  /// 0) and stage p-1-s of route 1 (global chunk p + p-1-s, entering at stage p-1).
  dual,
};

constexpr std::string_view to_string(placement_kind k) noexcept {
  switch (k) {
    case placement_kind::sequential:
      return "sequential";
    case placement_kind::loop:
      return "loop";
    case placement_kind::v_shape:
      return "v";
    case placement_kind::custom:
      return "custom";
    case placement_kind::dual:
      return "dual";
  }
  return "?";
}

/// Maps (stage, local chunk) <-> global model chunk.
///
/// Ops store the *local* chunk index (0 .. chunks-1 on their stage). The placement says which
/// piece of the model that is. With `sequential` (chunks = 1) local chunk 0 of stage s is
/// global chunk s. With `loop`, local chunk c of stage s is global chunk c*p + s. With
/// `v_shape` (chunks = 2), local chunk 0 of stage s is global chunk s and local chunk 1 is
/// global chunk 2p-1-s, so stage 0 holds the first and the last chunk.
///
/// Routes: the global chunks split into routes() equal runs of route_length() chunks, each a
/// whole copy of the model with its own parameters; a micro-batch runs along one of them
/// (schedule::route_of), forward from the run's first chunk to its last (which computes the
/// loss). Every placement but `dual` has one route, all its chunks. With `dual` (chunks = 2)
/// local chunk 0 of stage s is global chunk s (route 0, entering at stage 0) and local chunk 1
/// is global chunk p + (p-1-s) (route 1: its k-th stage on stage p-1-k, entering at stage p-1).
class placement {
 public:
  /// One chunk per stage.
  placement() : placement(1, 1, placement_kind::sequential) {}

  static placement sequential(std::uint32_t stages) {
    return placement(stages, 1, placement_kind::sequential);
  }
  static placement loop(std::uint32_t stages, std::uint32_t chunks) {
    return placement(stages, chunks,
                     chunks == 1 ? placement_kind::sequential : placement_kind::loop);
  }
  static placement v_shape(std::uint32_t stages) {
    return placement(stages, 2, placement_kind::v_shape);
  }
  /// DualPipe's: two routes in opposite directions, stage s holding stage s of one and stage
  /// p-1-s of the other (see the class comment).
  static placement dual(std::uint32_t stages) { return placement(stages, 2, placement_kind::dual); }
  /// `table[s * chunks + c]` is the global chunk of local chunk c on stage s; it must be a
  /// permutation of 0 .. stages*chunks-1.
  static placement custom(std::uint32_t stages,
                          std::uint32_t chunks,
                          std::vector<global_chunk> table) {
    placement pl(stages, chunks, placement_kind::custom);
    if (table.size() != pl.to_global_.size()) {
      detail::fail("placement: table size (", table.size(), ") must equal stages*chunks (",
                   pl.to_global_.size(), ")");
    }
    pl.to_global_ = std::move(table);
    pl.build_inverse();
    return pl;
  }

  std::uint32_t stages() const noexcept { return stages_; }
  std::uint32_t chunks() const noexcept { return chunks_; }
  placement_kind kind() const noexcept { return kind_; }
  /// stages * chunks.
  std::uint32_t total_chunks() const noexcept {
    return static_cast<std::uint32_t>(to_global_.size());
  }

  global_chunk global(stage_index s, chunk_index c) const noexcept {
    return to_global_[std::size_t{s} * chunks_ + c];
  }
  stage_index stage_of(global_chunk g) const noexcept { return stage_of_[g]; }
  chunk_index local_of(global_chunk g) const noexcept { return local_of_[g]; }

  /// How many routes (1 unless `dual`) and the global chunks of each.
  std::uint32_t routes() const noexcept { return total_chunks() / route_length_; }
  std::uint32_t route_length() const noexcept { return route_length_; }
  /// The route global chunk g belongs to.
  std::uint32_t route_of_chunk(global_chunk g) const noexcept { return g / route_length_; }
  /// The route micro-batch mb of `microbatches` (a multiple of routes()) runs along: the
  /// micro-batches split into routes() equal consecutive groups, the first group on route 0
  /// (schedule::route_of, for a schedule's m).
  std::uint32_t route_of_microbatch(microbatch_index mb,
                                    std::uint32_t microbatches) const noexcept {
    return mb / (microbatches / routes());
  }

  /// The first chunk of its route: a forward there has no input to wait for.
  bool is_first(global_chunk g) const noexcept { return g % route_length_ == 0; }
  /// The last chunk of its route: it computes the loss.
  bool is_last(global_chunk g) const noexcept { return (g + 1) % route_length_ == 0; }

  /// The stage that receives the output activation of (s, c); nullopt for the last chunk.
  std::optional<stage_index> next_stage(stage_index s, chunk_index c) const noexcept {
    global_chunk g = global(s, c);
    if (is_last(g)) {
      return std::nullopt;
    }
    return stage_of(g + 1);  // the next chunk of g's route
  }
  /// The stage that receives the input gradient of (s, c); nullopt for the first chunk.
  std::optional<stage_index> prev_stage(stage_index s, chunk_index c) const noexcept {
    global_chunk g = global(s, c);
    if (is_first(g)) {
      return std::nullopt;
    }
    return stage_of(g - 1);
  }

  friend bool operator==(const placement& a, const placement& b) noexcept {
    return a.stages_ == b.stages_ && a.chunks_ == b.chunks_ && a.route_length_ == b.route_length_ &&
           a.to_global_ == b.to_global_;
  }

 private:
  placement(std::uint32_t stages, std::uint32_t chunks, placement_kind kind)
      : stages_(stages), chunks_(chunks), kind_(kind) {
    if (stages == 0) {
      detail::fail("placement: stages (p=0) must be at least 1");
    }
    if (chunks == 0 || chunks > std::numeric_limits<chunk_index>::max()) {
      detail::fail("placement: chunks (v=", chunks, ") must be between 1 and ",
                   std::numeric_limits<chunk_index>::max());
    }
    if (std::uint64_t{stages} * chunks > max_total_chunks) {
      detail::fail("placement: stages*chunks (", std::uint64_t{stages} * chunks,
                   ") must be at most ", max_total_chunks);
    }
    if (kind == placement_kind::sequential && chunks != 1) {
      detail::fail("placement: sequential placement needs chunks (v=", chunks, ") = 1");
    }
    if (kind == placement_kind::v_shape && chunks != 2) {
      detail::fail("placement: V placement needs chunks (v=", chunks, ") = 2");
    }
    if (kind == placement_kind::dual && chunks != 2) {
      detail::fail("placement: dual placement needs chunks (v=", chunks, ") = 2");
    }
    route_length_ = kind == placement_kind::dual ? stages : stages * chunks;
    to_global_.resize(std::size_t{stages} * chunks);
    for (std::uint32_t s = 0; s < stages; ++s) {
      for (std::uint32_t c = 0; c < chunks; ++c) {
        global_chunk g = 0;
        if (kind == placement_kind::v_shape) {
          g = c == 0 ? s : 2 * stages - 1 - s;
        } else if (kind == placement_kind::dual) {
          g = c == 0 ? s : stages + (stages - 1 - s);
        } else {
          g = c * stages + s;  // sequential and loop
        }
        to_global_[std::size_t{s} * chunks + c] = g;
      }
    }
    build_inverse();
  }

  void build_inverse() {
    const std::size_t n = to_global_.size();
    stage_of_.assign(n, std::numeric_limits<stage_index>::max());
    local_of_.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      global_chunk g = to_global_[i];
      if (g >= n || stage_of_[g] != std::numeric_limits<stage_index>::max()) {
        detail::fail("placement: table entry ", i, " (global chunk ", g,
                     ") must be a permutation of 0..", n - 1);
      }
      stage_of_[g] = static_cast<stage_index>(i / chunks_);
      local_of_[g] = static_cast<chunk_index>(i % chunks_);
    }
  }

  std::uint32_t stages_;
  std::uint32_t chunks_;
  placement_kind kind_;
  std::uint32_t route_length_ = 1;  ///< global chunks per route (all of them but for `dual`)
  std::vector<global_chunk> to_global_;
  std::vector<stage_index> stage_of_;
  std::vector<chunk_index> local_of_;
};

}  // namespace pipesched
