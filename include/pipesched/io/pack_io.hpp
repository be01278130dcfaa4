#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipesched/io/plan_text.hpp"
#include "pipesched/plan/pack.hpp"

// What `pipesched pack` prints (docs/formats.md, "Packing JSON"): the packing, the order, the
// step time against the naive baseline and the peak memory, as JSON or as a report. The CLI and
// pipesched.pack() print these, so both give the same bytes.

namespace pipesched {

/// Version of the packing JSON written by pack_to_json.
inline constexpr int pack_json_version = 1;

namespace detail {

inline nlohmann::json packed_json(const std::vector<packed_microbatch>& mbs) {
  nlohmann::json out = nlohmann::json::array();
  for (const packed_microbatch& mb : mbs) {
    out.push_back({{"sequences", mb.sequences}, {"tokens", mb.tokens}, {"squares", mb.squares}});
  }
  return out;
}

}  // namespace detail

/// The packing JSON (version 1): times in seconds, memory in bytes per GPU of a stage; schedule
/// micro-batch j runs microbatches[order[j]]; sequence indices count the lengths read, from 0.
inline nlohmann::json pack_to_json(const pack_request& req, const pack_result& r) {
  std::uint64_t tokens = 0;
  for (std::uint64_t l : req.lengths) {
    tokens += l;
  }
  nlohmann::json j = {{"version", pack_json_version},
                      {"model", req.model.name},
                      {"gpu", req.cluster.name},
                      {"schedule", req.schedule},
                      {"stages", r.layout.pp},
                      {"chunks", r.layout.chunks},
                      {"tp", r.layout.tp},
                      {"sequence_parallel", r.layout.sequence_parallel},
                      {"recompute", std::string(to_string(req.recompute))},
                      {"sequences", req.lengths.size()},
                      {"tokens", tokens}};
  if (req.tokens_per_microbatch) {  // left out when a count was given: no value is null
    j["tokens_per_microbatch"] = *req.tokens_per_microbatch;
  }
  j["partition"] = r.partition;
  j["microbatches"] = detail::packed_json(r.microbatches);
  j["order"] = r.order;
  j["step_time"] = r.chosen.step_time_s;
  j["baseline_step_time"] = r.baseline.step_time_s;
  j["peak_memory"] = r.chosen.peak_memory_bytes;
  j["memory_limit"] = r.memory_limit_bytes;
  j["fits"] = r.chosen.fits;
  j["baseline"] = {{"microbatches", detail::packed_json(r.baseline_microbatches)},
                   {"peak_memory", r.baseline.peak_memory_bytes},
                   {"fits", r.baseline.fits}};
  j["heuristic"] = r.heuristic;
  j["evaluations"] = r.evaluations;
  j["search_moves"] = r.search_moves;
  return j;
}

/// The report: the job, the step time against the naive baseline, the peak memory per stage
/// against the limit, how the search found it, and the schedule's micro-batches in order (slot,
/// packed micro-batch, its tokens, Σ L² and sequences).
inline std::string pack_text(const pack_request& req, const pack_result& r) {
  std::uint64_t tokens = 0;
  for (std::uint64_t l : req.lengths) {
    tokens += l;
  }
  const plan_layout& l = r.layout;
  std::string out = fmt::format(
      "{} on {} x {} (TP {}, PP {}{}), {}: {} sequences ({} tokens) in {} micro-batches{}\n",
      req.model.name, std::uint64_t{l.tp} * l.pp, req.cluster.name, l.tp, l.pp,
      l.chunks > 1 ? fmt::format(", v {}", l.chunks) : std::string(), req.schedule,
      req.lengths.size(), detail::si_count(static_cast<double>(tokens)), r.microbatches.size(),
      req.tokens_per_microbatch ? fmt::format(" of at most {} tokens", *req.tokens_per_microbatch)
                                : std::string());
  out += fmt::format(
      "step time {}, naive baseline (file order, equal counts, {} micro-batches) {}: "
      "{:.3f}x its speed{}\n",
      detail::seconds(r.chosen.step_time_s, 4), r.baseline_microbatches.size(),
      detail::seconds(r.baseline.step_time_s, 4), r.baseline.step_time_s / r.chosen.step_time_s,
      r.baseline.fits ? "" : " (the baseline does not fit)");
  std::string peaks;
  for (double b : r.chosen.peak_memory_bytes) {
    peaks += (peaks.empty() ? "" : ", ") + detail::gib(b);
  }
  out += fmt::format("peak memory per stage {} (limit {}){}\n", peaks,
                     detail::gib(r.memory_limit_bytes), r.chosen.fits ? "" : ": does not fit");
  out += fmt::format("found: {}, then {} local-search moves ({} packings and orders simulated)\n\n",
                     r.heuristic, r.search_moves, r.evaluations);
  out += fmt::format("{:>5} {:>11} {:>9} {:>17}  {}\n", "slot", "micro-batch", "tokens",
                     "sum L^2 (tok^2)", "sequences");
  for (std::size_t j = 0; j < r.order.size(); ++j) {
    const packed_microbatch& mb = r.microbatches[r.order[j]];
    std::string seq;
    for (std::size_t s : mb.sequences) {
      seq += (seq.empty() ? "" : " ") + std::to_string(s);
    }
    out += fmt::format("{:>5} {:>11} {:>9} {:>17}  {}\n", j, r.order[j], mb.tokens,
                       detail::si_count(mb.squares), seq);
  }
  return out;
}

}  // namespace pipesched
