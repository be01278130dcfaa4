#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "pipesched/io/cost_model_json.hpp"
#include "pipesched/io/json.hpp"
#include "pipesched/io/memory_model_json.hpp"
#include "pipesched/io/torch_csv.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/transform/comm_lowering.hpp"
#include "pipesched/transform/recompute.hpp"

// A schedule handed to a training framework, as `pipesched plan --export`, `pipesched pack
// --export` and Python's export_schedule() write it (docs/formats.md, "Exported plan").

namespace pipesched {

/// One file of an export: where it goes and what it holds.
struct export_file {
  std::string path;
  std::string text;
};

/// The five files of a schedule export, for `prefix`: PREFIX.csv (PyTorch compute_comms CSV:
/// the runtime's SEND / RECV in list order, lowered with `costs`) and PREFIX.compute.csv
/// (compute actions only; PyTorch's loader adds the transfers), both without R ops (PyTorch
/// recomputes inside the stage module); PREFIX.schedule.json (pipesched's JSON, R ops
/// included), PREFIX.costs.json and PREFIX.memory.json (the costs and sizes it was timed and
/// checked with, so the files read back through validate / simulate reproduce its numbers).
inline std::vector<export_file> schedule_export(const std::string& prefix,
                                                const schedule& sched,
                                                const cost_model& costs,
                                                const memory_model& memory) {
  const schedule torch_order = without_recompute(sched);
  lowering_options lo;
  lo.costs = costs;
  torch_csv_options list;
  list.alignment = torch_alignment::list_order;
  return {{prefix + ".csv", to_torch_csv(lower_communication(torch_order, lo), list)},
          {prefix + ".compute.csv", to_torch_csv(torch_order)},
          {prefix + ".schedule.json", write_schedule_json(sched) + "\n"},
          {prefix + ".costs.json", write_cost_model(costs) + "\n"},
          {prefix + ".memory.json", write_memory_model(memory) + "\n"}};
}

/// Writes each file; returns their paths in order. Throws invalid_argument naming the path of
/// the first file that cannot be opened ("cannot open for writing") or written ("write
/// failed").
inline std::vector<std::string> write_export(const std::vector<export_file>& files) {
  std::vector<std::string> paths;
  paths.reserve(files.size());
  for (const export_file& f : files) {
    std::ofstream out(f.path, std::ios::binary);
    if (!out) {
      detail::fail(f.path, ": cannot open for writing");
    }
    out << f.text;
    out.close();
    if (!out) {
      detail::fail(f.path, ": write failed");
    }
    paths.push_back(f.path);
  }
  return paths;
}

}  // namespace pipesched
