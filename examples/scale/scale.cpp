// Scale run: generate + validate + simulate one large schedule, printing each phase's wall
// time, CPU time and the process's peak resident memory (getrusage ru_maxrss).
//
//   scale [--stages P] [--microbatches M] [schedule ...]      defaults: 1024 16384 zb-h1 1f1b
//
// Simulation keeps statistics and the critical path but no per-op timings (record_ops =
// false): a 32-byte timed_op per op would be 1.6 GB at 50 million ops. The peak RSS is the
// process's high-water mark so far, so run one schedule per process for per-schedule figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <vector>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>

#include "program_support.hpp"

namespace {

using namespace pipesched;

using program_support::peak_rss_mb;
using program_support::timer;

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t p = 1024;
  std::uint32_t m = 16384;
  std::vector<std::string> names;
  program_support::parse_args("scale", argc, argv,
                              {{"--stages", "-p", &p}, {"--microbatches", "-m", &m}},
                              "scale [--stages P] [--microbatches M] [schedule ...]", {&names});
  if (names.empty()) {
    names = {"zb-h1", "1f1b"};
  }

  int status = 0;
  for (const std::string& name : names) {
    try {
      generator_params gp;
      gp.stages = p;
      gp.microbatches = m;
      timer t0;
      const schedule s = default_registry().generate(name, gp);
      const double gen_wall = t0.wall_s();
      const double gen_cpu = t0.cpu_s();
      const double ops = static_cast<double>(s.size());

      timer t1;
      const validation_report rep = validate(s);
      const double val_wall = t1.wall_s();
      const double val_cpu = t1.cpu_s();

      simulate_options so;
      so.record_ops = false;
      so.validate = false;  // validated just above, on its own line
      timer t2;
      const simulation_result sim = simulate(s, cost_model::uniform(1.0, 1.0, 1.0), so);
      const double sim_wall = t2.wall_s();
      const double sim_cpu = t2.cpu_s();

      const double total_wall = gen_wall + val_wall + sim_wall;
      const double total_cpu = gen_cpu + val_cpu + sim_cpu;
      std::printf("%s p=%u m=%u ops=%.0f valid=%s makespan=%.0f bubble=%.4f\n", name.c_str(), p, m,
                  ops, rep.ok() ? "yes" : "no", sim.makespan, sim.bubble_rate);
      auto line = [&](const char* phase, double wall, double cpu) {
        std::printf("  %-9s wall %8.3f s  cpu %8.3f s  %6.2f ns/op (cpu)\n", phase, wall, cpu,
                    cpu / ops * 1e9);
      };
      line("generate", gen_wall, gen_cpu);
      line("validate", val_wall, val_cpu);
      line("simulate", sim_wall, sim_cpu);
      line("total", total_wall, total_cpu);
      std::printf("  peak RSS %.0f MB\n", peak_rss_mb());
      if (!rep.ok() || !sim.completed()) {
        status = 1;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scale: %s\n", e.what());
      status = 1;
    }
  }
  return status;
}
