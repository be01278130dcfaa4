// Variable-length batches: `pack`'s packing and order against the naive
// baseline (sequences in file order, equal counts per micro-batch) and against the best of N
// random orders (the sequences shuffled, then cut the baseline's way: a random packing and a
// random order), over the length distributions users meet:
//
//   pack_lengths [--grid full|reduced|small] [--random N] [--random-searching N]
//                [--median TOKENS] [--per-microbatch K] [--seed S] [--mix TEXT] [--verbose]
//                [schedule ...]
//   defaults: --grid full --random 1000 --random-searching 1000 --median 1024
//             --per-microbatch 4 --seed 1, schedules 1f1b zb-h1 zb-auto
//
// Grids: full p = 4, 8, 16 and m = 2p, 3p, ..., 8p; reduced m = 2p, 4p, 8p; small p = 4,
// m = 2p (the ctest). Each configuration draws K·m sequences of each mix (median --median
// tokens, tests/support/length_mixes.hpp) and packs them into m micro-batches for Llama 3 8B on
// p H100s (TP 1, selective recompute, the GPU's usable memory as the limit). --random-searching
// is the random orders' count for the searching schedules (each is a zb-auto generation);
// --mix keeps the mixes whose name contains TEXT.
//
// Prints one summary row per mix and schedule (docs/benchmarks.md §10): the configurations,
// chosen / baseline step time (mean and worst over the configurations), chosen / best random
// (likewise), how many chosen schedules fit the limit and how many baselines did; then the
// wall and CPU time.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <pipesched/plan/pack.hpp>

#include "program_support.hpp"
#include "support/length_mixes.hpp"
#include "support/pack_random.hpp"

namespace {

using namespace pipesched;

struct summary {
  std::size_t configs = 0;
  double sum_vs_baseline = 0.0;
  double worst_vs_baseline = 0.0;
  double sum_vs_random = 0.0;
  double worst_vs_random = 0.0;
  std::size_t compared_random = 0;
  std::size_t chosen_fit = 0;
  std::size_t baseline_fit = 0;
};

std::uint32_t count_arg(const char* flag, const char* v, unsigned long lo = 1) {
  return program_support::parse_count("pack_lengths", flag, v, lo);
}

}  // namespace

int main(int argc, char** argv) {
  std::string grid = "full";
  std::uint32_t random = 1000;
  std::uint32_t random_searching = 1000;
  std::uint32_t median = 1024;
  std::uint32_t per_mb = 4;
  std::uint32_t seed = 1;
  bool verbose = false;
  std::string only_mix;
  std::vector<std::string> schedules;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--grid" && has_value) {
      grid = argv[++i];
    } else if (a == "--random" && has_value) {
      random = count_arg("--random", argv[++i], 0);
    } else if (a == "--random-searching" && has_value) {
      random_searching = count_arg("--random-searching", argv[++i], 0);
    } else if (a == "--median" && has_value) {
      median = count_arg("--median", argv[++i]);
    } else if (a == "--per-microbatch" && has_value) {
      per_mb = count_arg("--per-microbatch", argv[++i]);
    } else if (a == "--seed" && has_value) {
      seed = count_arg("--seed", argv[++i], 0);
    } else if (a == "--mix" && has_value) {
      only_mix = argv[++i];
    } else if (a == "--verbose") {
      verbose = true;
    } else if (!a.empty() && a[0] != '-') {
      schedules.push_back(a);
    } else {
      std::fprintf(stderr, "pack_lengths: unknown option \"%s\" (see the file's first lines)\n",
                   a.c_str());
      return 2;
    }
  }
  if (schedules.empty()) {
    schedules = {"1f1b", "zb-h1", "zb-auto"};
  }
  std::vector<std::uint32_t> stages = {4, 8, 16};
  std::vector<std::uint32_t> multiples = {2, 3, 4, 5, 6, 7, 8};
  if (grid == "reduced") {
    multiples = {2, 4, 8};
  } else if (grid == "small") {
    stages = {4};
    multiples = {2};
  } else if (grid != "full") {
    std::fprintf(stderr, "pack_lengths: --grid must be full, reduced or small, not \"%s\"\n",
                 grid.c_str());
    return 2;
  }
  const program_support::timer t;
  std::printf(
      "grid %s, %u random orders (%u for searching schedules), median %u tokens, %u "
      "sequences per micro-batch on average, Llama 3 8B on H100 (TP 1, selective)\n\n",
      grid.c_str(), random, random_searching, median, per_mb);
  std::printf(
      "| mix | schedule | configs | chosen / baseline: mean | worst | chosen / best random: "
      "mean | worst | chosen fit | baseline fit |\n|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (const test_support::length_mix& mix : test_support::length_mixes()) {
    if (mix.name.find(only_mix) == std::string::npos) {
      continue;
    }
    for (const std::string& name : schedules) {
      summary s;
      for (std::uint32_t p : stages) {
        for (std::uint32_t k : multiples) {
          const std::uint32_t m = k * p;
          pack_request req;
          req.model = model_preset("llama3-8b");
          req.cluster = cluster_preset("h100-sxm-80gb");
          req.lengths = test_support::sample_lengths(mix, std::size_t{per_mb} * m, median,
                                                     seed * 1000003ull + p * 1009ull + m);
          req.microbatches = m;
          req.stages = p;
          req.schedule = name;
          const pack_problem problem(req);
          const pack_result r = problem.solve();
          const bool searching = default_registry().at(name).searches;
          const std::uint32_t n_random = searching ? random_searching : random;
          const test_support::random_orders_result rnd =
              test_support::best_random_orders(problem, m, n_random, seed + m);
          ++s.configs;
          s.chosen_fit += r.chosen.fits ? 1 : 0;
          s.baseline_fit += r.baseline.fits ? 1 : 0;
          const double vb = r.chosen.step_time_s / r.baseline.step_time_s;
          s.sum_vs_baseline += vb;
          s.worst_vs_baseline = std::max(s.worst_vs_baseline, vb);
          double vr = 0.0;
          if (n_random > 0) {
            vr = r.chosen.step_time_s / rnd.best.step_time_s;
            s.sum_vs_random += vr;
            s.worst_vs_random = std::max(s.worst_vs_random, vr);
            ++s.compared_random;
          }
          if (verbose) {
            std::fprintf(stderr,
                         "%s %s p=%u m=%u: chosen %.4f s (%s), baseline %.4f s (%s), best of "
                         "%u random %.4f s (%zu fit), %zu evaluations, %.1f s so far\n",
                         mix.name.c_str(), name.c_str(), p, m, r.chosen.step_time_s,
                         r.chosen.fits ? "fits" : "over", r.baseline.step_time_s,
                         r.baseline.fits ? "fits" : "over", n_random, rnd.best.step_time_s,
                         rnd.fitting, r.evaluations, t.wall_s());
          }
        }
      }
      const auto n = static_cast<double>(s.configs);
      const auto nr = static_cast<double>(std::max<std::size_t>(s.compared_random, 1));
      std::printf("| %s | %s | %zu | %.3f | %.3f | %.3f | %.3f | %zu | %zu |\n", mix.name.c_str(),
                  name.c_str(), s.configs, s.sum_vs_baseline / n, s.worst_vs_baseline,
                  s.sum_vs_random / nr, s.worst_vs_random, s.chosen_fit, s.baseline_fit);
      std::fflush(stdout);
    }
  }
  std::printf("\nwall %.1f s, CPU %.1f s, peak memory %.0f MB\n", t.wall_s(), t.cpu_s(),
              program_support::peak_rss_mb());
  return 0;
}
