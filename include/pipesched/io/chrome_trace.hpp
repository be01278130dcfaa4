#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

// Chrome / Perfetto trace (the Trace Event Format's JSON object form), for chrome://tracing
// and ui.perfetto.dev:
// - process 0 is the pipeline; thread s is stage s (named "stage s", sorted by stage);
// - one complete event ("ph":"X") per op: name "F3" (or "F3.1" with v > 1), category the op
//   kind (F, B, W, BW, comm), ts / dur in microseconds, args {mb, chunk, global_chunk, index};
// - one flow ("ph":"s" on the producer, "ph":"f" with "bp":"e" on the consumer, same id) per
//   cross-stage dependency: F -> next chunk's F, B/BW -> previous chunk's B/BW, and SEND -> RECV
//   in lowered schedules;
// - with memory curves, one counter track ("ph":"C") per stage named "memory stage s".

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

}  // namespace detail

/// The trace as a JSON object {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{..}}.
/// `tl` must time `sched`: same stages, and on each stage the whole list or (after a deadlock)
/// a prefix of it. Deterministic.
inline nlohmann::json chrome_trace_json(const schedule& sched,
                                        const timeline& tl,
                                        const chrome_trace_options& opts = {}) {
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
  const placement& pl = sched.layout();
  const std::uint32_t m = sched.microbatches();
  const bool chunked = sched.chunks() > 1;
  const bool lowered = sched.has_comm();
  const double k = opts.time_scale;
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"name", "process_name"},
                {"ph", "M"},
                {"pid", 0},
                {"args", {{"name", "pipeline " + sched.name()}}}});
  for (stage_index s = 0; s < sched.stages(); ++s) {
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", 0},
                  {"tid", s},
                  {"args", {{"name", "stage " + std::to_string(s)}}}});
    ev.push_back({{"name", "thread_sort_index"},
                  {"ph", "M"},
                  {"pid", 0},
                  {"tid", s},
                  {"args", {{"sort_index", s}}}});
  }
  auto in_range = [&](const op& o) { return o.chunk < pl.chunks() && o.mb < m; };
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (const timed_op& t : tl.stages[s]) {
      nlohmann::json args = {{"mb", t.o.mb}, {"chunk", t.o.chunk}, {"index", t.index}};
      if (in_range(t.o)) {
        args["global_chunk"] = pl.global(s, t.o.chunk);
      }
      ev.push_back({{"name", to_string(t.o, chunked)},
                    {"cat", std::string(detail::trace_category(t.o.kind))},
                    {"ph", "X"},
                    {"ts", t.start * k},
                    {"dur", t.duration() * k},
                    {"pid", 0},
                    {"tid", s},
                    {"args", std::move(args)}});
    }
  }
  if (opts.flows) {
    // Who produced each (global chunk, mb, event): the op to start an arrow from.
    constexpr std::size_t nev = 5;
    std::vector<const timed_op*> producer(std::size_t{pl.total_chunks()} * m * nev, nullptr);
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        const std::size_t base = (std::size_t{pl.global(s, t.o.chunk)} * m + t.o.mb) * nev;
        for (std::size_t e = 0; e < nev; ++e) {
          if ((events_produced(t.o.kind) & (1u << e)) != 0) {
            producer[base + e] = &t;
          }
        }
      }
    }
    std::uint64_t id = 0;
    auto flow = [&](const timed_op& from, const timed_op& to) {
      ++id;
      const std::string name = "flow";
      ev.push_back({{"name", name},
                    {"cat", "dependency"},
                    {"ph", "s"},
                    {"id", id},
                    {"ts", from.start * k},
                    {"pid", 0},
                    {"tid", from.stage}});
      ev.push_back({{"name", name},
                    {"cat", "dependency"},
                    {"ph", "f"},
                    {"bp", "e"},
                    {"id", id},
                    {"ts", to.start * k},
                    {"pid", 0},
                    {"tid", to.stage}});
    };
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const timed_op& t : tl.stages[s]) {
        if (!in_range(t.o)) {
          continue;
        }
        if (t.o.kind == op_kind::send_forward || t.o.kind == op_kind::send_backward) {
          if (const auto peer = comm_partner(pl, s, t.o)) {
            for (const timed_op& u : tl.stages[peer->stage]) {
              if (u.o == peer->o) {
                flow(t, u);
                break;
              }
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
        ev.push_back({{"name", "memory stage " + std::to_string(s)},
                      {"ph", "C"},
                      {"ts", x.time * k},
                      {"pid", 0},
                      {"args", {{"live", x.live}}}});
      }
    }
  }
  return {{"traceEvents", std::move(ev)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"schedule", sched.name()},
            {"p", sched.stages()},
            {"m", sched.microbatches()},
            {"v", sched.chunks()},
            {"makespan", tl.makespan()},
            {"bubble_rate", tl.bubble_rate()}}}};
}

/// chrome_trace_json() as compact text: write it to a .json file and open it in
/// ui.perfetto.dev or chrome://tracing.
inline std::string to_chrome_trace(const schedule& sched,
                                   const timeline& tl,
                                   const chrome_trace_options& opts = {}) {
  return chrome_trace_json(sched, tl, opts).dump();
}

}  // namespace pipesched
