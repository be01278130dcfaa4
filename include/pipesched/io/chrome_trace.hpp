#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesched/io/detail/trace_sink.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

// Chrome / Perfetto trace (the Trace Event Format's JSON object form), for chrome://tracing
// and ui.perfetto.dev:
// - process 0 is the pipeline; thread s is stage s (named "stage s", sorted by stage);
// - one complete event ("ph":"X") per op: name "F3" (or "F3.1" with v > 1), category the op
//   kind (F, B, W, BW, R, comm), ts / dur in microseconds, args {mb, chunk, global_chunk,
//   index}, and "recompute": true on an F marked recompute (its R re-runs it);
// - one flow ("ph":"s" on the producer, "ph":"f" with "bp":"e" on the consumer, same id) per
//   cross-stage dependency: F -> next chunk's F, B/BW -> previous chunk's B/BW, and SEND -> RECV
//   in lowered schedules;
// - with memory curves, one counter track ("ph":"C") per stage named "memory stage s";
// - an overlapped pair (shares_slot_with_next): its second op on thread p + s, "stage s
//   overlapped", sorted right under stage s; both ops' args name the other's index ("pair").

namespace pipesched {

struct chrome_trace_options {
  /// Microseconds per time unit of the timeline: 1000 shows one unit as 1 ms. For a measured
  /// run in seconds use 1e6.
  double time_scale = 1000.0;
  bool flows = true;  ///< draw producer -> consumer arrows across stages
  /// Live memory per stage (memory_curves() or the memory checker); no counters when null.
  const std::vector<std::vector<memory_sample>>* memory = nullptr;
};

namespace detail {

inline std::string_view trace_category(op_kind k) noexcept {
  return is_comm(k) ? std::string_view("comm") : to_string(k);
}

/// The arguments chrome_trace_json and write_chrome_trace check before writing anything.
inline void check_chrome_trace(const schedule& sched,
                               const timeline& tl,
                               const chrome_trace_options& opts) {
  if (tl.stages.size() != sched.stages()) {
    detail::fail("chrome_trace: timeline has ", tl.stages.size(), " stages, schedule ",
                 sched.stages());
  }
  for (stage_index s = 0; s < sched.stages(); ++s) {
    if (tl.stages[s].size() > sched.ops(s).size()) {
      detail::fail("chrome_trace: timeline has ", tl.stages[s].size(), " ops on stage ", s,
                   ", the schedule ", sched.ops(s).size());
    }
  }
  if (!(opts.time_scale > 0.0)) {
    detail::fail("chrome_trace: time_scale (", opts.time_scale, ") must be > 0");
  }
}

}  // namespace detail

/// Writes the trace, event by event, to `os`: the JSON object
/// {"displayTimeUnit":"ms", "otherData":{..}, "traceEvents":[...]} (keys in that order, each
/// object's keys sorted, no whitespace: the text nlohmann's dump() makes of it). `tl` must
/// time `sched`: same stages, and on each stage the whole list or (after a deadlock) a prefix
/// of it; throws pipesched::invalid_argument before writing anything otherwise.
/// Deterministic. Memory beyond the timeline: 64 KB of buffer, and with flows one pointer per
/// (global chunk, micro-batch, event) (event_kind_count of them) and in lowered schedules two
/// per (global chunk, micro-batch) for the receives: 64 bytes per (chunk, micro-batch) at most.
inline void write_chrome_trace(std::ostream& os,
                               const schedule& sched,
                               const timeline& tl,
                               const chrome_trace_options& opts = {}) {
  detail::check_chrome_trace(sched, tl, opts);
  const placement& pl = sched.layout();
  const std::uint32_t m = sched.microbatches();
  const bool chunked = sched.chunks() > 1;
  const bool lowered = sched.has_comm();
  const double k = opts.time_scale;
  detail::trace_sink out(os);
  out.raw("{\"displayTimeUnit\":\"ms\",\"otherData\":{");
  out.member("bubble_rate", tl.bubble_rate());
  out.member("m", std::uint64_t{m});
  out.member("makespan", tl.makespan());
  out.member("p", std::uint64_t{sched.stages()});
  out.member("schedule", sched.name());
  out.member("v", std::uint64_t{sched.chunks()}, true);
  out.raw("},\"traceEvents\":[");
  // Overlapped pairs (shares_slot_with_next): the second op of a pair goes to a thread of its
  // own under its stage's, "stage s overlapped" (tid p + s), so the two ops of the slot show
  // one above the other instead of nested or on top of each other.
  const std::uint64_t p = sched.stages();
  // `t` is an element of its stage's row (the flows below point into the rows).
  auto second_of_pair = [&](const timed_op& t) {
    const auto& row = tl.stages[t.stage];
    const auto i = static_cast<std::size_t>(&t - row.data());
    return i > 0 && i < row.size() && shares_slot_with_next(row, i - 1);
  };
  std::vector<char> paired(sched.stages(), 0);
  bool any_pair = false;
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (std::size_t i = 0; i + 1 < tl.stages[s].size() && paired[s] == 0; ++i) {
      paired[s] = shares_slot_with_next(tl.stages[s], i) ? 1 : 0;
    }
    any_pair = any_pair || paired[s] != 0;
  }
  auto tid = [&](const timed_op& t) {
    return second_of_pair(t) ? p + t.stage : std::uint64_t{t.stage};
  };
  // Metadata: the process, then each stage's thread name and sort index (with pairs: stage s
  // sorts at 2s, its overlapped thread at 2s + 1).
  out.raw("{\"args\":{\"name\":");
  out.string("pipeline " + sched.name());
  out.raw("},\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0}");
  auto thread = [&](std::uint64_t id, stage_index s, bool overlapped) {
    out.raw(",{\"args\":{\"name\":\"stage ");
    out.number(std::uint64_t{s});
    out.raw(overlapped ? " overlapped" : "");
    out.raw("\"},\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":");
    out.number(id);
    out.raw("},{\"args\":{\"sort_index\":");
    out.number(any_pair ? 2 * std::uint64_t{s} + (overlapped ? 1 : 0) : std::uint64_t{s});
    out.raw("},\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":");
    out.number(id);
    out.raw("}");
  };
  for (stage_index s = 0; s < sched.stages(); ++s) {
    thread(s, s, false);
    if (paired[s] != 0) {
      thread(p + s, s, true);
    }
  }
  auto in_range = [&](const op& o) { return o.chunk < pl.chunks() && o.mb < m; };
  // One complete event per op; a pair's ops name each other's list index ("pair").
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto& row = tl.stages[s];
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& t = row[i];
      const bool first = shares_slot_with_next(row, i);
      const bool second = i > 0 && shares_slot_with_next(row, i - 1);
      out.raw(",{\"args\":{\"chunk\":");
      out.number(std::uint64_t{t.o.chunk});
      if (in_range(t.o)) {
        out.raw(",\"global_chunk\":");
        out.number(std::uint64_t{pl.global(s, t.o.chunk)});
      }
      out.raw(",\"index\":");
      out.number(std::uint64_t{t.index});
      out.raw(",\"mb\":");
      out.number(std::uint64_t{t.o.mb});
      if (first || second) {
        out.raw(",\"pair\":");
        out.number(std::uint64_t{row[first ? i + 1 : i - 1].index});
      }
      if (is_recomputed(t.o)) {
        out.raw(",\"recompute\":true");
      }
      out.raw("},\"cat\":");
      out.string(detail::trace_category(t.o.kind));
      out.raw(",\"dur\":");
      out.number(t.duration() * k);
      out.raw(",\"name\":");
      out.string(to_string(t.o, chunked));
      out.raw(",\"ph\":\"X\",\"pid\":0,\"tid\":");
      out.number(second ? p + s : std::uint64_t{s});
      out.raw(",\"ts\":");
      out.number(t.start * k);
      out.raw("}");
    }
  }
  if (opts.flows) {
    // Who produced each (global chunk, mb, event): the op to start an arrow from; and in a
    // lowered schedule the first RECV of each (global chunk, mb, direction), the end of a
    // SEND's arrow (looked up, not searched for along the peer's list).
    constexpr std::size_t nev = event_kind_count;
    const std::size_t cells = std::size_t{pl.total_chunks()} * m;
    std::vector<const timed_op*> producer(cells * nev, nullptr);
    std::vector<const timed_op*> recv(lowered ? cells * 2 : 0, nullptr);
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        const std::size_t cell = std::size_t{pl.global(s, t.o.chunk)} * m + t.o.mb;
        for (std::size_t e = 0; e < nev; ++e) {
          if ((events_produced(t.o) & (1u << e)) != 0) {
            producer[cell * nev + e] = &t;
          }
        }
        if (lowered && (t.o.kind == op_kind::recv_forward || t.o.kind == op_kind::recv_backward)) {
          const timed_op*& r = recv[cell * 2 + (t.o.kind == op_kind::recv_backward ? 1 : 0)];
          if (r == nullptr) {
            r = &t;
          }
        }
      }
    }
    std::uint64_t id = 0;
    // A flow event: its start ("s") on `from`, its end ("f", bound to the enclosing slice) on
    // `to`, one id.
    auto flow = [&](const timed_op& from, const timed_op& to) {
      ++id;
      for (const auto& [head, phase, at] :
           {std::tuple{",{", "s", &from}, std::tuple{"},{\"bp\":\"e\",", "f", &to}}) {
        out.raw(head);
        out.raw("\"cat\":\"dependency\",\"id\":");
        out.number(id);
        out.raw(",\"name\":\"flow\",\"ph\":\"");
        out.raw(phase);
        out.raw("\",\"pid\":0,\"tid\":");
        out.number(tid(*at));
        out.raw(",\"ts\":");
        out.number(at->start * k);
      }
      out.raw("}");
    };
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        if (t.o.kind == op_kind::send_forward || t.o.kind == op_kind::send_backward) {
          if (const auto peer = comm_partner(pl, s, t.o)) {
            const std::size_t cell =
                std::size_t{pl.global(peer->stage, peer->o.chunk)} * m + peer->o.mb;
            const timed_op* to = recv[cell * 2 + (peer->o.kind == op_kind::recv_backward ? 1 : 0)];
            if (to != nullptr) {
              flow(t, *to);
            }
          }
          continue;
        }
        for (const requirement& r : requirements_of(pl, s, t.o, lowered)) {
          const timed_op* from =
              producer[(std::size_t{r.chunk} * m + r.mb) * nev + static_cast<std::size_t>(r.what)];
          if (r.remote && from != nullptr) {
            flow(*from, t);
          }
        }
      }
    }
  }
  if (opts.memory != nullptr) {
    for (stage_index s = 0; s < opts.memory->size(); ++s) {
      for (const memory_sample& x : (*opts.memory)[s]) {
        out.raw(",{\"args\":{\"live\":");
        out.number(x.live);
        out.raw("},\"name\":\"memory stage ");
        out.number(std::uint64_t{s});
        out.raw("\",\"ph\":\"C\",\"pid\":0,\"ts\":");
        out.number(x.time * k);
        out.raw("}");
      }
    }
  }
  out.raw("]}");
  out.flush();
}

/// A report_schedule() result as a trace: its simulated timeline with the memory checker's
/// curves as counters (opts.memory is replaced by them). Throws invalid_argument before writing
/// anything when the schedule did not run to the end (picture_of).
inline void write_chrome_trace(std::ostream& os,
                               const schedule& sched,
                               const schedule_report& rep,
                               const chrome_trace_options& opts = {}) {
  const report_picture pic = picture_of(sched, rep, "chrome_trace");
  chrome_trace_options o = opts;
  o.memory = &pic.memory;
  write_chrome_trace(os, sched, pic.tl, o);
}

/// write_chrome_trace() into a string: write it to a .json file and open it in
/// ui.perfetto.dev or chrome://tracing. For a large schedule write_chrome_trace() straight to
/// the file instead (the string holds the whole trace, about 150 to 400 bytes per op).
inline std::string to_chrome_trace(const schedule& sched,
                                   const timeline& tl,
                                   const chrome_trace_options& opts = {}) {
  std::ostringstream os;
  write_chrome_trace(os, sched, tl, opts);
  return std::move(os).str();
}

/// The trace as a JSON object {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{..}}
/// (to_chrome_trace() parsed; a few KB per op: for large schedules stream with
/// write_chrome_trace()). Deterministic.
inline nlohmann::json chrome_trace_json(const schedule& sched,
                                        const timeline& tl,
                                        const chrome_trace_options& opts = {}) {
  return nlohmann::json::parse(to_chrome_trace(sched, tl, opts));
}

}  // namespace pipesched
