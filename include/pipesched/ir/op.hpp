#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace pipesched {

namespace detail {
/// An index of one kind (stage, micro-batch, chunk). It converts from and to its integer
/// implicitly, so loops, arithmetic and subscripts read as with the integer; but never to an
/// index of another kind, because that takes two user-defined conversions (C++ allows one) —
/// so passing a micro-batch where a stage is expected does not compile, and comparing the two
/// is deleted. No comparison of its own: it compares as its integer (one overload, no
/// ambiguity with `s == 0`).
template <class Tag, class Rep>
struct strong_index {
  using rep = Rep;
  Rep value = 0;

  constexpr strong_index() noexcept = default;
  constexpr strong_index(Rep v) noexcept : value(v) {}  // NOLINT: implicit by design (above)
  /// `static_cast<stage_index>(x)` from any other number, as for the integer itself (the
  /// implicit constructor above would warn of the narrowing the cast asks for).
  template <class N>
    requires(std::is_arithmetic_v<N> && !std::is_same_v<N, Rep>)
  constexpr explicit strong_index(N v) noexcept : value(static_cast<Rep>(v)) {}
  constexpr operator Rep() const noexcept { return value; }

  constexpr strong_index& operator++() noexcept {
    ++value;
    return *this;
  }
  constexpr strong_index operator++(int) noexcept {
    strong_index old = *this;
    ++value;
    return old;
  }
  constexpr strong_index& operator--() noexcept {
    --value;
    return *this;
  }
  constexpr strong_index operator--(int) noexcept {
    strong_index old = *this;
    --value;
    return old;
  }
  constexpr strong_index& operator+=(Rep d) noexcept {
    value = static_cast<Rep>(value + d);
    return *this;
  }
  constexpr strong_index& operator-=(Rep d) noexcept {
    value = static_cast<Rep>(value - d);
    return *this;
  }

  /// A stage compared with a micro-batch is a mistake, not a question.
  template <class OtherTag, class OtherRep>
    requires(!std::is_same_v<Tag, OtherTag>)
  friend bool operator==(strong_index, strong_index<OtherTag, OtherRep>) = delete;
  template <class OtherTag, class OtherRep>
    requires(!std::is_same_v<Tag, OtherTag>)
  friend auto operator<=>(strong_index, strong_index<OtherTag, OtherRep>) = delete;

  /// JSON (nlohmann finds these by argument-dependent lookup): the bare integer.
  template <class Json>
  friend void to_json(Json& j, strong_index i) {
    j = i.value;
  }
  template <class Json>
  friend void from_json(const Json& j, strong_index& i) {
    i.value = j.template get<Rep>();
  }
};
struct stage_tag;
struct microbatch_tag;
struct chunk_tag;
struct global_chunk_tag;
}  // namespace detail

/// Index of a pipeline stage (a rank / device), 0-based.
using stage_index = detail::strong_index<detail::stage_tag, std::uint32_t>;
/// Index of a micro-batch, 0-based.
using microbatch_index = detail::strong_index<detail::microbatch_tag, std::uint32_t>;
/// Index of a model chunk *local to its stage* (0 .. chunks-1); see placement.
using chunk_index = detail::strong_index<detail::chunk_tag, std::uint16_t>;
/// Index of a model chunk in model order, 0 .. stages*chunks-1 (the "global stage" of
/// PyTorch pipelining). Forward flows from global chunk g to g+1; the loss is computed by
/// the last global chunk.
using global_chunk = detail::strong_index<detail::global_chunk_tag, std::uint32_t>;

/// What an op computes or moves. The short names (`F`, `B`, `W`, `BW`, `SEND_F`, ...) are
/// those of the text, JSON and CSV formats.
enum class op_kind : std::uint8_t {
  forward,          ///< F: forward pass of one chunk for one micro-batch.
  backward_input,   ///< B: input (activation) gradient only; on the critical path.
  backward_weight,  ///< W: weight gradient only; needs this chunk's B, may run any time later.
  backward_full,    ///< BW: fused B then W, as GPipe and 1F1B run it.
  /// R: re-runs the forward of an F marked recompute (op_flag::recompute), on the F's stage
  /// before its B / BW, to rebuild the activations the backward needs (docs/model.md §1).
  recompute,
  send_forward,   ///< SEND_F: send this chunk's output activation to the next chunk's stage.
  recv_forward,   ///< RECV_F: receive this chunk's input activation from the previous chunk.
  send_backward,  ///< SEND_B: send this chunk's input gradient to the previous chunk's stage.
  recv_backward,  ///< RECV_B: receive this chunk's output gradient from the next chunk.
};

inline constexpr std::size_t op_kind_count = 9;

inline constexpr std::array<op_kind, op_kind_count> all_op_kinds = {
    op_kind::forward,       op_kind::backward_input, op_kind::backward_weight,
    op_kind::backward_full, op_kind::recompute,      op_kind::send_forward,
    op_kind::recv_forward,  op_kind::send_backward,  op_kind::recv_backward};

/// The short name: "F", "B", "W", "BW", "R", "SEND_F", "RECV_F", "SEND_B", "RECV_B".
constexpr std::string_view to_string(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward:
      return "F";
    case op_kind::backward_input:
      return "B";
    case op_kind::backward_weight:
      return "W";
    case op_kind::backward_full:
      return "BW";
    case op_kind::recompute:
      return "R";
    case op_kind::send_forward:
      return "SEND_F";
    case op_kind::recv_forward:
      return "RECV_F";
    case op_kind::send_backward:
      return "SEND_B";
    case op_kind::recv_backward:
      return "RECV_B";
  }
  return "?";
}

/// Parses a short name; nullopt when unknown (callers report the error with context).
constexpr std::optional<op_kind> parse_op_kind(std::string_view s) noexcept {
  for (op_kind k : all_op_kinds) {
    if (to_string(k) == s) {
      return k;
    }
  }
  return std::nullopt;
}

/// True for the compute kinds F, B, W, BW, R.
constexpr bool is_compute(op_kind k) noexcept {
  return k <= op_kind::recompute;
}
/// True for SEND_F, RECV_F, SEND_B, RECV_B.
constexpr bool is_comm(op_kind k) noexcept {
  return !is_compute(k);
}
/// True for B and BW: the ops that produce a chunk's input gradient.
constexpr bool produces_input_grad(op_kind k) noexcept {
  return k == op_kind::backward_input || k == op_kind::backward_full;
}

/// One entry of a stage's op list: kind, micro-batch and *local* chunk (see placement).
/// Eight bytes, so p = 1024, m = 16384 (about 50 million ops) takes about 400 MB.
/// For the communication kinds, `chunk` is the local chunk on the op's own stage that the
/// transfer serves; the peer stage follows from the placement (placement::next_stage / prev).
///
/// Equality compares the flags too: F7 marked to overlap with the next op is a different
/// list entry from a plain F7, so a golden order with overlap marks (DualPipeV) checks the
/// marks. To ask "the same computation?" compare kind, mb and chunk (same_work).
struct op {
  op_kind kind = op_kind::forward;
  /// Bits of op_flag (overlap_next, ...); 0 for a plain op. Not reachable by brace
  /// initialisation: `op{kind, mb, chunk}` runs the constructor below; set bits with
  /// overlapping_next.
  std::uint8_t flags = 0;
  chunk_index chunk = 0;
  microbatch_index mb = 0;

  constexpr op() noexcept = default;
  /// `op{op_kind::forward, 3}` is F3 (local chunk 0), `op{k, mb, chunk}` the same as
  /// make_op(k, mb, chunk): the arguments in that order, whatever the member layout.
  constexpr op(op_kind k, microbatch_index m, chunk_index c = 0) noexcept
      : kind(k), chunk(c), mb(m) {}

  /// Kind, micro-batch, chunk and flags.
  friend constexpr bool operator==(const op& a, const op& b) noexcept {
    return a.kind == b.kind && a.chunk == b.chunk && a.mb == b.mb && a.flags == b.flags;
  }
};
static_assert(sizeof(op) == 8, "op must stay 8 bytes");

/// Bits of op::flags.
namespace op_flag {
inline constexpr std::uint8_t overlap_next = 0x1;  ///< runs together with the next op on its stage
/// On an F: keeps only its input (M_in) instead of the activations its backward needs; an R
/// of the same micro-batch and chunk re-runs it before the B / BW (docs/model.md §1, §5).
inline constexpr std::uint8_t recompute = 0x2;
}  // namespace op_flag
constexpr bool overlaps_next(const op& o) noexcept {
  return (o.flags & op_flag::overlap_next) != 0;
}
/// `o` marked to run overlapped with the next op of its stage (an F with a B/BW/I or the reverse).
constexpr op overlapping_next(op o) noexcept {
  o.flags |= op_flag::overlap_next;
  return o;
}
/// An F marked recompute: its activations are rebuilt by an R before its backward.
constexpr bool is_recomputed(const op& o) noexcept {
  return o.kind == op_kind::forward && (o.flags & op_flag::recompute) != 0;
}
/// `o` (an F) marked recompute.
constexpr op recomputing(op o) noexcept {
  o.flags |= op_flag::recompute;
  return o;
}
/// The same computation (kind, micro-batch, chunk), whatever the flags.
constexpr bool same_work(const op& a, const op& b) noexcept {
  return a.kind == b.kind && a.chunk == b.chunk && a.mb == b.mb;
}

constexpr op make_op(op_kind k, microbatch_index mb, chunk_index chunk = 0) noexcept {
  return op{k, mb, chunk};
}

/// "F3", "B0", "BW12"; with chunks > 1 the local chunk is appended: "F3.1".
inline std::string to_string(const op& o, bool with_chunk = false) {
  std::string s(to_string(o.kind));
  s += std::to_string(o.mb);
  if (with_chunk) {
    s += '.';
    s += std::to_string(o.chunk);
  }
  return s;
}

}  // namespace pipesched

// Limits and hashing as of the integer (the primary numeric_limits would say max() == 0;
// std::hash is declared by <string>).
template <class Tag, class Rep>
struct std::numeric_limits<pipesched::detail::strong_index<Tag, Rep>> : std::numeric_limits<Rep> {};
template <class Tag, class Rep>
struct std::hash<pipesched::detail::strong_index<Tag, Rep>> {
  std::size_t operator()(pipesched::detail::strong_index<Tag, Rep> i) const noexcept {
    return std::hash<Rep>{}(i.value);
  }
};
