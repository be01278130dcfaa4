#pragma once

// Independent measurements for generator tests: peaks from the memory checker and spans from
// the timing simulator (not the generators' own bookkeeping).
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>

namespace test_measure {

/// Peak per stage from the memory checker; requires clean buffer lifetimes.
inline std::vector<double> peaks(const pipesched::schedule& s, const pipesched::memory_model& mm) {
  const pipesched::memory_report rep = pipesched::check_memory(s, mm);
  REQUIRE(rep.lifetimes_ok());
  std::vector<double> out;
  for (pipesched::stage_index st = 0; st < s.stages(); ++st) {
    out.push_back(rep.peak_memory(st));
  }
  return out;
}

/// Longest stage span from the timing simulator; requires the run to complete.
inline double span_of(const pipesched::schedule& s,
                      const pipesched::cost_model& c = pipesched::cost_model::unit()) {
  const pipesched::simulation_result r = pipesched::simulate(s, c);
  REQUIRE(r.completed());
  return r.span(r.max_span_stage);
}

}  // namespace test_measure
