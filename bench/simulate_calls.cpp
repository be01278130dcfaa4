// simulate() called N times on one schedule, in a plain program: for measurements that need a
// fixed amount of work rather than Google Benchmark's timed loop, such as instruction and cache
// counts under `valgrind --tool=callgrind --cache-sim=yes`, or page faults under
// /usr/bin/time. It uses only generate and simulate, so it also builds against an older
// checkout's headers (docs/benchmarks.md §6).
//
//   simulate_calls SCHEDULE P M N [--stats]
//
// --stats switches record_ops off. Prints the least and the median wall time of one call
// (microseconds) and the makespan, so the calls cannot be optimised away.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/pipesched.hpp>
#if __has_include(<pipesched/gen/builtin_registry.hpp>)  // older checkouts: in the umbrella
#include <pipesched/gen/builtin_registry.hpp>
#endif

#include "program_support.hpp"

int main(int argc, char** argv) {
  using namespace pipesched;
  const char* program = "simulate_calls";
  if (argc < 5 || argc > 6 || (argc == 6 && std::strcmp(argv[5], "--stats") != 0)) {
    std::fprintf(stderr, "usage: %s SCHEDULE P M N [--stats]\n", program);
    return 2;
  }
  generator_params params;
  params.stages = program_support::parse_count(program, "P", argv[2]);
  params.microbatches = program_support::parse_count(program, "M", argv[3]);
  const std::uint32_t calls = program_support::parse_count(program, "N", argv[4]);
  simulate_options options;
  options.record_ops = argc != 6;
  try {
    const schedule sched = default_registry().generate(argv[1], params);
    const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);
    std::vector<double> micros;
    micros.reserve(calls);
    double makespan = 0.0;
    for (std::uint32_t i = 0; i < calls; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const simulation_result r = simulate(sched, costs, options);
      const auto t1 = std::chrono::steady_clock::now();
      makespan = r.makespan;
      micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(micros.begin(), micros.end());
    std::printf("%s p=%u m=%u calls=%u least=%.1f us median=%.1f us makespan=%g\n", argv[1],
                params.stages, params.microbatches, calls, micros.front(),
                micros[micros.size() / 2], makespan);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 0;
}
