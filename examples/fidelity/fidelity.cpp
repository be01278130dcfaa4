// Simulator fidelity: runs each schedule for real with sleep_executor (every op sleeps its
// modeled cost × a time unit) on one thread per stage, and compares the measured makespan and
// op start times with simulate()'s prediction for the same costs.
//   fidelity --schedule all --stages 4 --microbatches 8 --unit-ms 2

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>

int main(int argc, char** argv) {
  std::string name = "all";
  std::uint32_t p = 4;
  std::uint32_t m = 8;
  double unit_ms = 1.0;
  double tf = 1.0;
  double tb = 1.0;
  double tw = 1.0;
  CLI::App app{"Measure a real threaded run of sleeping ops against the simulator"};
  app.add_option("--schedule", name, "registered schedule name, or 'all'");
  app.add_option("--stages,-p", p, "pipeline stages")->check(CLI::Range(1u, 64u));
  app.add_option("--microbatches,-m", m, "micro-batches")->check(CLI::Range(1u, 1024u));
  app.add_option("--unit-ms", unit_ms, "wall-clock length of one cost unit, in ms")
      ->check(CLI::Range(0.01, 1000.0));
  app.add_option("--tf", tf, "T_F in cost units")->check(CLI::Range(0.0, 100.0));
  app.add_option("--tb", tb, "T_B in cost units")->check(CLI::Range(0.0, 100.0));
  app.add_option("--tw", tw, "T_W in cost units")->check(CLI::Range(0.0, 100.0));
  CLI11_PARSE(app, argc, argv);

  const auto& registry = pipesched::default_registry();
  std::vector<const pipesched::generator_entry*> entries;
  try {
    if (name == "all") {
      for (const auto& e : registry.entries()) {
        entries.push_back(&e);
      }
    } else {
      entries.push_back(&registry.at(name));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fidelity: %s\n", e.what());
    return 2;
  }

  const auto costs = pipesched::cost_model::uniform(tf, tb, tw);
  const auto unit = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(unit_ms));
  const double unit_s = unit_ms / 1000.0;
  std::printf("p=%u m=%u costs (T_F,T_B,T_W)=(%g,%g,%g), 1 unit = %g ms, T_comm = 0\n", p, m, tf,
              tb, tw, unit_ms);
  std::printf("%-12s %10s %10s %8s %16s %22s\n", "schedule", "simulated", "measured", "ratio",
              "mean |start err|", "excess per crit. op");
  int ran = 0;
  for (const auto* entry : entries) {
    pipesched::generator_params params;
    params.stages = p;
    params.microbatches = m;
    params.chunks = entry->default_chunks;
    params.costs = costs;
    pipesched::schedule sched;
    try {
      sched = entry->generate(params);
    } catch (const pipesched::invalid_argument& e) {
      std::printf("%-12s skipped: %s\n", entry->name.c_str(), e.what());
      continue;
    }
    const auto sim = pipesched::simulate(sched, costs);
    pipesched::sleep_executor sleeper(sched, costs, unit);
    pipesched::instrumented_executor timed(sleeper, sched.stages());
    timed.restart();
    pipesched::run_threaded(timed, sched);
    // Measure from the first op's start: thread start-up is not part of the model.
    double first = HUGE_VAL;
    double last = 0.0;
    for (pipesched::stage_index s = 0; s < sched.stages(); ++s) {
      for (const auto& t : timed.timings(s)) {
        first = std::min(first, t.start);
        last = std::max(last, t.end);
      }
    }
    double err = 0.0;
    std::size_t n = 0;
    for (pipesched::stage_index s = 0; s < sched.stages(); ++s) {
      const auto& real = timed.timings(s);
      for (std::size_t i = 0; i < real.size() && i < sim.ops[s].size(); ++i) {
        err += std::abs((real[i].start - first) / unit_s - sim.ops[s][i].start);
        ++n;
      }
    }
    const double measured = (last - first) / unit_s;
    // The gap spread over the ops of the simulated critical path: what each op on it cost
    // beyond its modeled time (sleep wake-up latency plus the hand-off between threads).
    const std::size_t crit = sim.critical_path.size();
    const double excess_us =
        crit ? (measured - sim.makespan) * unit_ms * 1000.0 / static_cast<double>(crit) : 0.0;
    std::printf("%-12s %10.2f %10.2f %8.4f %16.3f %17.0f us/op\n", entry->name.c_str(),
                sim.makespan, measured, measured / sim.makespan,
                n ? err / static_cast<double>(n) : 0.0, excess_us);
    ++ran;
  }
  std::printf(
      "(makespans and start errors in cost units; ratio = measured / simulated; the excess is\n"
      " the measured gap divided by the number of ops on the simulated critical path)\n");
  return ran > 0 ? 0 : 1;
}
