// Scale run of the robustness simulator: the 24,000-GPU shape, tensor
// parallel 8 × pipeline 16 × data parallel 187 (23,936 GPUs), m = 64, N sampled iterations
// of D independently perturbed replicas each (monte_carlo_data_parallel), per schedule:
//
//   scale_cluster [--stages P] [--microbatches M] [--replicas D] [--samples N]
//                 [--threads T] [--seed S] [--check-serial] [schedule ...]
//   defaults: 16 64 187 100, T = 2, zb-h1 1f1b
//
// Prints wall and CPU time, the ops simulated (N · D · ops of the schedule), ns per simulated
// op and the process's peak resident memory (getrusage ru_maxrss), and the iteration-time
// distribution. --check-serial runs the same iterations again on one thread and says whether
// every number is the same (it must be: iterations are pure functions of their index).
//
// The model (docs/benchmarks.md §7): a GPT-3-sized stage slice, 96 layers / 16 stages = 6
// layers per stage, costs in units of one layer's forward (transformer_costs, per_layer units:
// T_F = 6, T_B + T_W = 12; about 2.4 ms per unit at h = 12288, s = 2048, b = 1 over 8-way
// tensor parallelism at 400 TFLOP/s), T_comm 0.1; noise cv 5 % on every compute op, stage 7 a
// 5 % straggler, stalls of 20 units with probability 1e-3 per op, link cv 10 %; per stage a
// ring all-reduce of its bf16 gradients (6 layers of h = 12288 over 8 tensor-parallel ranks,
// 2.7 GB) at 25 GB/s per link (6e7 bytes per unit), 0.004 units per ring step.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <vector>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/model/data_parallel.hpp>
#include <pipesched/model/perturbation.hpp>
#include <pipesched/model/transformer_costs.hpp>

#include "program_support.hpp"

namespace {

using namespace pipesched;

using program_support::peak_rss_mb;
using program_support::timer;

std::uint32_t parse_count(const char* flag, const char* v, bool zero_ok = false) {
  return program_support::parse_count("scale_cluster", flag, v, zero_ok ? 0 : 1);
}

bool same(const data_parallel_stats& a, const data_parallel_stats& b) {
  const sample_stats& x = a.iteration;
  const sample_stats& y = b.iteration;
  return x.count == y.count && x.mean == y.mean && x.stddev == y.stddev && x.min == y.min &&
         x.p50 == y.p50 && x.p99 == y.p99 && x.max == y.max &&
         a.slowest_replica_share == b.slowest_replica_share;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t p = 16;
  std::uint32_t m = 64;
  std::uint32_t d = 187;
  std::uint32_t n = 100;
  std::uint32_t threads = 2;
  std::uint64_t seed = 1;
  bool check_serial = false;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if ((a == "--stages" || a == "-p") && i + 1 < argc) {
      p = parse_count("--stages", argv[++i]);
    } else if ((a == "--microbatches" || a == "-m") && i + 1 < argc) {
      m = parse_count("--microbatches", argv[++i]);
    } else if (a == "--replicas" && i + 1 < argc) {
      d = parse_count("--replicas", argv[++i]);
    } else if (a == "--samples" && i + 1 < argc) {
      n = parse_count("--samples", argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = parse_count("--threads", argv[++i], true);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = parse_count("--seed", argv[++i], true);
    } else if (a == "--check-serial") {
      check_serial = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr,
                   "usage: scale_cluster [--stages P] [--microbatches M] [--replicas D] "
                   "[--samples N] [--threads T] [--seed S] [--check-serial] [schedule ...]\n");
      return 2;
    } else {
      names.emplace_back(a);
    }
  }
  if (names.empty()) {
    names = {"zb-h1", "1f1b"};
  }

  // The model of the header comment.
  transformer_dims dims;
  dims.hidden = 12288;
  dims.heads = 96;
  dims.sequence = 2048;
  dims.microbatch = 1;
  dims.layers = 96 / 16;
  const transformer_profile prof = transformer_costs(dims, transformer_units::per_layer);
  const cost_model costs = make_cost_model(prof, 0.1);
  const stage_index straggler = p > 1 ? p / 2 - 1 : 0;  // stage 7 of 16
  perturbation noise;
  noise.set_cv(0.05)
      .set_straggler(p, straggler, 1.05)
      .set_stalls(stall_model{1e-3, 20.0})
      .set_link_cv(0.1)
      .set_seed(seed);
  data_parallel_model dp;
  dp.replicas = d;
  dp.gradient_bytes = {transformer_gradient_bytes(dims, 2.0) / 8.0};
  dp.bandwidth = 6e7;
  dp.latency = 0.004;

  int status = 0;
  for (const std::string& name : names) {
    try {
      generator_params gp;
      gp.stages = p;
      gp.microbatches = m;
      gp.costs = costs;
      const schedule s = default_registry().generate(name, gp);
      const double ops = static_cast<double>(s.size()) * d * n;
      timer t;
      data_parallel_monte_carlo_options o;
      o.noise = noise;
      o.samples = n;
      o.data_parallel = dp;
      o.threads = threads;
      const data_parallel_stats r = monte_carlo_data_parallel(s, costs, o);
      const double wall = t.wall_s();
      const double cpu = t.cpu_s();
      std::printf("%s p=%u m=%u D=%u N=%u threads=%u ops/replica=%zu simulated ops=%.0f\n",
                  name.c_str(), p, m, d, n, threads, s.size(), ops);
      std::printf(
          "  wall %.3f s  cpu %.3f s  %.2f ns/op (cpu)  %.2f ns/op (wall)  peak RSS %.0f MB\n",
          wall, cpu, cpu / ops * 1e9, wall / ops * 1e9, peak_rss_mb());
      std::printf(
          "  iteration mean %.2f p50 %.2f p99 %.2f max %.2f (units); lost to the slowest "
          "replica %.2f %%\n",
          r.iteration.mean, r.iteration.p50, r.iteration.p99, r.iteration.max,
          100.0 * r.slowest_replica_share);
      if (check_serial) {
        timer t1;
        o.threads = 1;
        const data_parallel_stats one = monte_carlo_data_parallel(s, costs, o);
        std::printf("  one thread: wall %.3f s cpu %.3f s; same result: %s\n", t1.wall_s(),
                    t1.cpu_s(), same(one, r) ? "yes" : "NO");
        if (!same(one, r)) {
          status = 1;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scale_cluster: %s\n", e.what());
      status = 1;
    }
  }
  return status;
}
