#pragma once

#include <cstddef>
#include <string_view>

#include <fmt/format.h>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/io/text.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

// fmt::formatter specialisations for the core types and reports, so that
//   fmt::print("{}\n", sched);        // name, shape, one line per stage
//   fmt::print("{:c}", o);            // "F3.1": op with its local chunk
//   fmt::print("{}\n", report);       // "ok" or the violations, one per line
// work without the core depending on fmt.

namespace pipesched::detail {

/// Formatter base for types printed without a format spec: accepts only "{}".
struct plain_formatter {
  constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it != '}') {
      throw fmt::format_error("pipesched: this type takes no format spec");
    }
    return it;
  }
};

}  // namespace pipesched::detail

/// "F", "B", "W", "BW", "SEND_F", ...; string specs apply ("{:>3}").
template <>
struct fmt::formatter<pipesched::op_kind> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(pipesched::op_kind k, Ctx& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(pipesched::to_string(k), ctx);
  }
};

/// "sequential", "loop", "v", "custom".
template <>
struct fmt::formatter<pipesched::placement_kind> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(pipesched::placement_kind k, Ctx& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(pipesched::to_string(k), ctx);
  }
};

/// "F3"; with the spec "c", the local chunk too: "F3.1".
template <>
struct fmt::formatter<pipesched::op> {
  bool chunk = false;

  constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == 'c') {
      chunk = true;
      ++it;
    }
    if (it != ctx.end() && *it != '}') {
      throw fmt::format_error("pipesched::op: the only format spec is 'c' (with chunk)");
    }
    return it;
  }
  template <class Ctx>
  auto format(const pipesched::op& o, Ctx& ctx) const -> decltype(ctx.out()) {
    if (chunk) {
      return fmt::format_to(ctx.out(), "{}{}.{}", pipesched::to_string(o.kind), o.mb, o.chunk);
    }
    return fmt::format_to(ctx.out(), "{}{}", pipesched::to_string(o.kind), o.mb);
  }
};

/// First line `<name>: p=4 m=8 v=1 (sequential)`, then `stage 0: F0 F1 ...` per stage
/// (ops with their chunk when v > 1, overlapped pairs `(F7.0;BW3.1)`: format_stage_ops); no
/// trailing newline.
template <>
struct fmt::formatter<pipesched::schedule> : pipesched::detail::plain_formatter {
  template <class Ctx>
  auto format(const pipesched::schedule& s, Ctx& ctx) const -> decltype(ctx.out()) {
    auto out = fmt::format_to(ctx.out(), "{}: p={} m={} v={} ({})", s.name(), s.stages(),
                              s.microbatches(), s.chunks(), s.layout().kind());
    const bool chunked = s.chunks() > 1;
    for (pipesched::stage_index st = 0; st < s.stages(); ++st) {
      out = fmt::format_to(out, "\nstage {}:", st);
      if (!s.ops(st).empty()) {
        out = fmt::format_to(out, " {}", pipesched::format_stage_ops(s.ops(st), chunked));
      }
    }
    return out;
  }
};

/// "ok", or `<n> violation(s)` then one indented line per stored violation
/// (`  [local_order] stage 1, op 3 (W0): ...`), a note for the ones not stored, and the
/// deadlock witness when there is one; no trailing newline.
template <>
struct fmt::formatter<pipesched::validation_report> : pipesched::detail::plain_formatter {
  template <class Ctx>
  auto format(const pipesched::validation_report& r, Ctx& ctx) const -> decltype(ctx.out()) {
    if (r.ok()) {
      return fmt::format_to(ctx.out(), "ok");
    }
    auto out = fmt::format_to(ctx.out(), "{} violation{}", r.total, r.total == 1 ? "" : "s");
    for (const auto& v : r.violations) {
      out = fmt::format_to(out, "\n  [{}] {}", pipesched::to_string(v.kind), v.message);
    }
    if (r.truncated() > 0) {
      out = fmt::format_to(out, "\n  ... and {} more", r.truncated());
    }
    if (r.deadlock) {
      out = fmt::format_to(out, "\n  {}", r.deadlock->describe());
    }
    return out;
  }
};

/// `makespan 33 cost units, bubble rate 27.3%`, then `stage 0: span 30 cost units, busy 24 cost
/// units, idle 6 cost units` per stage; times as format_time (the costs' units), no trailing
/// newline.
template <>
struct fmt::formatter<pipesched::timeline> : pipesched::detail::plain_formatter {
  template <class Ctx>
  auto format(const pipesched::timeline& t, Ctx& ctx) const -> decltype(ctx.out()) {
    using pipesched::format_time;
    auto out = fmt::format_to(ctx.out(), "makespan {}, bubble rate {:.1f}%",
                              format_time(t.makespan()), 100.0 * t.bubble_rate());
    for (pipesched::stage_index s = 0; s < t.stages.size(); ++s) {
      const auto r = t.summary(s);
      out = fmt::format_to(out, "\nstage {}: span {}, busy {}, idle {}", s, format_time(r.span),
                           format_time(r.busy), format_time(r.idle));
    }
    return out;
  }
};

/// `makespan 27 cost units, bubble rate 11.1%`, then `stage 0: span 27 cost units, busy 24 cost
/// units, idle 3 cost units` per stage (and `, comm ..` when it has transfers), and the
/// deadlock witness when the simulation stopped early; no trailing newline.
template <>
struct fmt::formatter<pipesched::simulation_result> : pipesched::detail::plain_formatter {
  template <class Ctx>
  auto format(const pipesched::simulation_result& r, Ctx& ctx) const -> decltype(ctx.out()) {
    using pipesched::format_time;
    auto out = fmt::format_to(ctx.out(), "makespan {}, bubble rate {:.1f}%",
                              format_time(r.makespan), 100.0 * r.bubble_rate);
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
      const auto& st = r.stages[s];
      out = fmt::format_to(out, "\nstage {}: span {}, busy {}, idle {}", s, format_time(st.span),
                           format_time(st.busy), format_time(st.idle));
      if (st.comm > 0.0) {
        out = fmt::format_to(out, " (comm {})", format_time(st.comm));
      }
    }
    if (r.deadlock) {
      out = fmt::format_to(out, "\n{}", r.deadlock->describe());
    }
    return out;
  }
};

/// `max peak 4`, then `stage 0: peak 4 at op 5 (static 0)` per stage, then the lifetime errors
/// and budget violations, one per line, as the checker words them; no trailing newline.
template <>
struct fmt::formatter<pipesched::memory_report> : pipesched::detail::plain_formatter {
  template <class Ctx>
  auto format(const pipesched::memory_report& r, Ctx& ctx) const -> decltype(ctx.out()) {
    auto out = fmt::format_to(ctx.out(), "max peak {}", r.max_peak());
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
      const auto& st = r.stages[s];
      out = fmt::format_to(out, "\nstage {}: peak {}", s, st.peak);
      if (st.peak_op_index != pipesched::stage_memory::no_index) {
        out = fmt::format_to(out, " at op {}", st.peak_op_index);
      }
      out = fmt::format_to(out, " (static {})", st.static_memory);
    }
    for (const auto& e : r.errors) {
      out = fmt::format_to(out, "\n  [{}] {}", pipesched::to_string(e.kind), e.message);
    }
    if (r.total_errors > r.errors.size()) {
      out = fmt::format_to(out, "\n  ... and {} more", r.total_errors - r.errors.size());
    }
    for (const auto& v : r.violations) {
      out = fmt::format_to(out, "\n  [over budget] {}", v.message);
    }
    return out;
  }
};
