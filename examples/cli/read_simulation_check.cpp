// Reads a simulation result JSON file with pipesched::read_simulation and prints what it
// holds, one `key=value` per field: the round-trip check of `pipesched simulate --json`
// (examples/cli/units_tests.cmake). Exit 2 with `error: ...` when the file does not read.
#include <cstdio>
#include <exception>

#include <fmt/core.h>
#include <fmt/format.h>

#include <pipesched/io/json.hpp>
#include <pipesched/io/simulation_json.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read_simulation_check FILE.json\n");
    return 2;
  }
  try {
    const auto r = pipesched::read_simulation(pipesched::read_text_file(argv[1]));
    fmt::print("read ok: name={} p={} m={} v={} makespan={:g} bubble_rate={:.4f}", r.name, r.stages,
               r.microbatches, r.chunks, r.makespan, r.bubble_rate);
    if (r.utilization) {
      fmt::print(" utilization={:.4f}", *r.utilization);
    }
    if (r.lower_bound) {
      fmt::print(" lower_bound={:g}", *r.lower_bound);
    }
    if (r.memory_limit) {
      fmt::print(" memory_limit={:g}", fmt::join(r.memory_limit.values(), ","));
    }
    double peak = 0.0;
    for (const auto& p : r.peak_memory) {
      peak = p && *p > peak ? *p : peak;
    }
    fmt::print(" peak={:g} stages={} deadlock={} violations={}\n", peak, r.summaries.size(),
               r.deadlock ? "yes" : "no", r.violations.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
