#pragma once

// The zero-bubble authors' published results (tests/data/zb_reference.json, copied from the
// project's shared reference data): one row per setting, with the span and bubble rate their
// own heuristics reach. See the file's "about" key for the exact definitions.

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <pipesched/gen/generator.hpp>

namespace pipesched::test {

struct reference_row {
  std::size_t index = 0;
  std::string schedule;  ///< "zb-auto" or "zb-v"
  std::uint32_t p = 0, m = 0;
  double tf = 0, tb = 0, tw = 0, comm = 0;  ///< per stage (zb-auto) or per chunk (zb-v)
  double mb = 0, mw = 0;                    ///< likewise
  double limit = 0;                         ///< per stage, in the units of mb
  double span = -1;                         ///< the authors' span (zb-auto rows)
  double bubble_rate = 0;                   ///< the authors' bubble rate (4 decimals for zb-v)

  /// The row as generator parameters. The API takes costs and memory per stage (a stage's
  /// whole slice, split over its v chunks), so a zb-v row's per-chunk values are doubled:
  /// exact in floating point, and split back to the authors' numbers.
  generator_params params() const {
    const double v = schedule == "zb-v" ? 2.0 : 1.0;
    generator_params g;
    g.stages = p;
    g.microbatches = m;
    g.costs = cost_model::uniform(v * tf, v * tb, v * tw, comm);
    g.memory = memory_model::uniform(v * mb, v * mw);
    g.memory_limit = limit;
    return g;
  }
  std::string label() const {
    return "row " + std::to_string(index) + ": " + schedule + " p=" + std::to_string(p) +
           " m=" + std::to_string(m) + " costs " + std::to_string(int(tf)) + "," +
           std::to_string(int(tb)) + "," + std::to_string(int(tw)) + "," +
           std::to_string(int(comm)) + " M_W " + std::to_string(mw) + " limit " +
           std::to_string(limit);
  }
};

inline std::vector<reference_row> zb_reference_rows() {
  std::ifstream in(PIPESCHED_TEST_DATA_DIR "/zb_reference.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<reference_row> out;
  for (const auto& r : doc.at("rows")) {
    reference_row row;
    row.index = out.size();
    row.schedule = r.at("schedule").get<std::string>();
    row.p = r.at("p").get<std::uint32_t>();
    row.m = r.at("m").get<std::uint32_t>();
    const bool v = row.schedule == "zb-v";
    const auto& c = r.at(v ? "chunk_costs" : "costs");
    row.tf = c.at("F").get<double>();
    row.tb = c.at("B").get<double>();
    row.tw = c.at("W").get<double>();
    row.comm = c.at("comm").get<double>();
    const auto& mem = r.at(v ? "chunk_memory" : "memory");
    row.mb = mem.at("activation").get<double>();
    row.mw = mem.at("weight_grad_input").get<double>();
    row.limit = r.at("memory_limit").get<double>();
    const auto& a = r.at("authors");
    if (a.contains("span")) {
      row.span = a.at("span").get<double>();
    }
    row.bubble_rate = a.at("bubble_rate").get<double>();
    out.push_back(row);
  }
  return out;
}

}  // namespace pipesched::test
