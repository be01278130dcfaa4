#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
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
/// Throws field_error (schedule_export, prefix) for a prefix that names no file: empty, ending
/// in a path separator, or an existing directory (each would write hidden ".csv"-like files).
inline void check_export_prefix(const std::string& prefix) {
  constexpr const char* who = "schedule_export";
  if (prefix.empty()) {
    detail::fail_field(who, "prefix",
                       "must not be empty (the files are PREFIX.csv, ...: give a "
                       "name such as plan or out/plan)");
  }
  std::error_code ec;
  if (prefix.back() == '/' || std::filesystem::is_directory(prefix, ec)) {
    detail::fail_field(who, "prefix", "\"", prefix, "\" is a directory: give a file name in it, ",
                       "such as ", prefix, prefix.back() == '/' ? "" : "/", "plan");
  }
}

inline std::vector<export_file> schedule_export(const std::string& prefix,
                                                const schedule& sched,
                                                const cost_model& costs,
                                                const memory_model& memory) {
  check_export_prefix(prefix);
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

/// A file an export must not overwrite: its path and what it is, in the caller's words (an
/// input such as "--lengths", or "--output").
struct kept_file {
  std::string path;
  std::string what;
};

namespace detail {

/// Whether two paths name the same file (the same inode when both exist, else the same
/// normalised path).
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    return fs::equivalent(a, b, ec);
  }
  const fs::path ca = fs::weakly_canonical(a, ec);
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace detail

/// Writes each file; returns their paths in order. First, before anything is written, throws
/// field_error (write_export, prefix) when a file would overwrite one of `keep` (an input or
/// another output of the same command). Throws invalid_argument naming the path of the first
/// file that cannot be opened ("cannot open for writing") or written ("write failed").
inline std::vector<std::string> write_export(const std::vector<export_file>& files,
                                             const std::vector<kept_file>& keep = {}) {
  for (const export_file& f : files) {
    for (const kept_file& k : keep) {
      if (!k.path.empty() && detail::same_file(f.path, k.path)) {
        detail::fail_field("write_export", "prefix", f.path, " would overwrite ", k.what, " ",
                           k.path, ": choose another prefix");
      }
    }
  }
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
