#pragma once

#include <cstdint>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipesched/io/text.hpp"
#include "pipesched/tools/whatif.hpp"

// What `pipesched whatif` and Python's whatif() print (docs/formats.md, "whatif"): one writer
// for a static order's or the dynamic policy's distribution (robustness_result) and one for D
// data-parallel replicas (data_parallel_stats), each as JSON and as text.

namespace pipesched {

/// The JSON object of a what-if result. Without data parallelism: schedule, samples, seed,
/// clean, mean, stddev, min, p50, p99, max (and sensitivity when measured; and traffic,
/// stall_behind_bulk and replicas over links); with it: schedule, replicas, samples, mean, p50,
/// p99, max, slowest_replica_share.
inline nlohmann::json whatif_to_json(const whatif_result& r) {
  if (r.data_parallel) {
    const data_parallel_stats& d = *r.data_parallel;
    return nlohmann::json{
        {"schedule", r.name},           {"replicas", r.replicas},
        {"samples", d.iteration.count}, {"mean", d.iteration.mean},
        {"p50", d.iteration.p50},       {"p99", d.iteration.p99},
        {"max", d.iteration.max},       {"slowest_replica_share", d.slowest_replica_share}};
  }
  const robustness_result& x = r.robustness;
  nlohmann::json j{{"schedule", r.name},       {"samples", x.iteration.count},
                   {"seed", r.seed},           {"clean", x.clean},
                   {"mean", x.iteration.mean}, {"stddev", x.iteration.stddev},
                   {"min", x.iteration.min},   {"p50", x.iteration.p50},
                   {"p99", x.iteration.p99},   {"max", x.iteration.max}};
  if (!x.sensitivity.empty()) {
    j["sensitivity"] = x.sensitivity;
  }
  if (r.traffic) {
    j["traffic"] = std::string(to_string(*r.traffic));
    j["stall_behind_bulk"] = r.stall_behind_bulk;
    j["replicas"] = r.replicas;
  }
  return j;
}

/// The readable report of a what-if result: the question on the first line, the distribution
/// on the second (times in the cost model's units), the sensitivity on a third when measured.
inline std::string whatif_text(const whatif_result& r) {
  if (r.data_parallel) {
    const data_parallel_stats& d = *r.data_parallel;
    return fmt::format("{}  p={} m={} v={}  D={} replicas  {} iterations, seed {}\n", r.name,
                       r.stages, r.microbatches, r.chunks, r.replicas, d.iteration.count, r.seed) +
           fmt::format(
               "iteration time (pipeline + ring all-reduce) in {}: mean {:.6g}  p50 {:.6g}  "
               "p99 {:.6g}  max {:.6g}; lost to the slowest replica {:.2f}%\n",
               cost_units, d.iteration.mean, d.iteration.p50, d.iteration.p99, d.iteration.max,
               100 * d.slowest_replica_share);
  }
  const robustness_result& x = r.robustness;
  std::string text =
      fmt::format("{}  p={} m={} v={}  {} samples, seed {}\n", r.name, r.stages, r.microbatches,
                  r.chunks, x.iteration.count, r.seed) +
      fmt::format(
          "iteration time in {}: clean {:.6g}  mean {:.6g}  sd {:.3g}  min {:.6g}  p50 {:.6g}  "
          "p99 {:.6g}  max {:.6g}\n",
          cost_units, x.clean, x.iteration.mean, x.iteration.stddev, x.iteration.min,
          x.iteration.p50, x.iteration.p99, x.iteration.max);
  if (!x.sensitivity.empty()) {
    text += "sensitivity (mean increase per 1% slowdown of stage k):";
    for (double s : x.sensitivity) {
      text += fmt::format(" {:.4g}", s);
    }
    text += "\n";
  }
  if (r.traffic) {
    text += fmt::format(
        "links ({} traffic, D={} replicas): pipeline sends waited {} per iteration behind "
        "all-reduce bytes (mean)\n",
        to_string(*r.traffic), r.replicas, format_time(r.stall_behind_bulk));
  }
  return text;
}

/// `simulate --link-bandwidth --json`: schedule, makespan, iteration (with the all-reduce),
/// traffic, replicas, stall_behind_bulk, pipeline_wait, and per link (stage) pipeline_messages,
/// bulk_messages, pipeline_bytes, bulk_bytes, busy, pipeline_wait, behind_bulk, allreduce_end.
inline nlohmann::json links_to_json(const schedule& sched,
                                    const link_timing_result& r,
                                    link_discipline traffic,
                                    std::uint32_t replicas) {
  nlohmann::json j{{"schedule", sched.name()},
                   {"makespan", r.makespan},
                   {"iteration", r.iteration},
                   {"traffic", std::string(to_string(traffic))},
                   {"replicas", replicas},
                   {"stall_behind_bulk", r.stall_behind_bulk},
                   {"pipeline_wait", r.pipeline_wait},
                   {"links", nlohmann::json::array()}};
  for (const link_stats& l : r.links) {
    j["links"].push_back({{"pipeline_messages", l.pipeline_messages},
                          {"bulk_messages", l.bulk_messages},
                          {"pipeline_bytes", l.pipeline_bytes},
                          {"bulk_bytes", l.bulk_bytes},
                          {"busy", l.busy},
                          {"pipeline_wait", l.pipeline_wait},
                          {"behind_bulk", l.behind_bulk},
                          {"allreduce_end", l.allreduce_end}});
  }
  return j;
}

/// The readable report of links_to_json; times in the cost model's units.
inline std::string links_text(const schedule& sched,
                              const link_timing_result& r,
                              link_discipline traffic,
                              std::uint32_t replicas) {
  std::string t = fmt::format(
      "{}  p={} m={} v={}  links, {} traffic, D={} replicas\n"
      "makespan {}  iteration {} (with the all-reduce)  pipeline sends waited {}, {:.6g} of "
      "them behind all-reduce bytes\n",
      sched.name(), sched.stages(), sched.microbatches(), sched.chunks(), to_string(traffic),
      replicas, format_time(r.makespan), format_time(r.iteration), format_time(r.pipeline_wait),
      r.stall_behind_bulk);
  for (stage_index s = 0; s < r.links.size(); ++s) {
    const link_stats& l = r.links[s];
    t += fmt::format(
        "link {}: busy {}, {} pipeline messages ({:.6g} bytes) waited {}, {} all-reduce "
        "messages ({:.6g} bytes), all-reduce ends at {}\n",
        s, format_time(l.busy), l.pipeline_messages, l.pipeline_bytes, format_time(l.pipeline_wait),
        l.bulk_messages, l.bulk_bytes, format_time(l.allreduce_end));
  }
  return t;
}

}  // namespace pipesched
