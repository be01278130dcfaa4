// What each part of the automatic zero-bubble search gains, over a grid of problems:
//
//   zb_search_gains              p = 4, 8, 16; m = p, 2p, 4p; 7 cost sets; memory limits
//                                p·M_B, 1.5p·M_B, 2p·M_B (189 cases; the docs' table)
//   zb_search_gains --stages 4   the same grid for one p (63 cases)
//
// Steps, each adding to the one before:
//   paper     the paper's greedy: its 8 choice combinations, nothing else
//   +choices  16 combinations (the bubble rule off as an extra choice)
//   +seeds    the hand-crafted ZB-H1 / ZB-H2 orders, when they fit the limit
//   +improve  the W-moving pass (this is zb_auto_search with default options)
// For each step: the cases where it is shorter (longest stage span) than the step before,
// the largest such gain, the mean gap of the span to zb_auto_search's lower bound, and the
// cases proven optimal (span equal to the bound). Then zb-v at unit costs with and without
// its hand-crafted seed: the cases with zero bubble (span = the stage work), for p = 1..8 and
// m = 2p, 2p+1, 3p, 4p (or the given p).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_v.hpp>

namespace {

using namespace pipesched;

struct cost_set {
  double f, b, w, comm;
};
// Equal costs, the paper's usual B ≈ 2F shape, uneven ones, with and without T_comm.
constexpr cost_set cost_sets[] = {{1.0, 1.0, 1.0, 0.0}, {1.0, 1.2, 0.8, 0.1}, {1.0, 2.0, 1.0, 0.0},
                                  {1.0, 2.0, 1.0, 0.5}, {3.0, 4.0, 2.0, 0.5}, {1.0, 1.5, 0.5, 0.05},
                                  {2.0, 2.5, 1.5, 0.3}};

struct step_stats {
  int shorter = 0;
  double largest_gain = 0.0;  // relative to the previous step's span
  double gap_sum = 0.0;       // Σ (span − bound) / bound
  int optimal = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint32_t> stages = {4, 8, 16};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stages") == 0 && i + 1 < argc) {
      const char* v = argv[++i];
      char* end = nullptr;
      const long p = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || p < 1 || p > 64) {
        std::fprintf(stderr, "zb_search_gains: --stages needs an integer in 1..64, got \"%s\"\n",
                     v);
        return 2;
      }
      stages = {static_cast<std::uint32_t>(p)};
    } else {
      std::fprintf(stderr, "usage: zb_search_gains [--stages P]\n");
      return 2;
    }
  }
  const char* names[] = {"paper", "+choices", "+seeds", "+improve"};
  step_stats stats[4];
  int cases = 0;
  for (const std::uint32_t p : stages) {
    for (const std::uint32_t m : {p, 2 * p, 4 * p}) {
      for (const cost_set& c : cost_sets) {
        for (const double limit : {1.0, 1.5, 2.0}) {
          generator_params gp;
          gp.stages = p;
          gp.microbatches = m;
          gp.costs = cost_model::uniform(c.f, c.b, c.w, c.comm);
          gp.memory_limit = limit * p;
          double prev = 0.0;
          for (int k = 0; k < 4; ++k) {
            zb_auto_options o;
            o.paper_choices_only = k == 0;
            o.seed_handcrafted = k >= 2;
            o.improve = k >= 3;
            o.threads = 1;
            const zb_auto_result r = zb_auto_search(gp, o);
            step_stats& st = stats[k];
            if (k > 0 && r.span < prev - 1e-9) {
              ++st.shorter;
              st.largest_gain = std::max(st.largest_gain, (prev - r.span) / prev);
            }
            st.gap_sum += (r.span - r.lower_bound) / r.lower_bound;
            st.optimal += r.span <= r.lower_bound + 1e-9 ? 1 : 0;
            prev = r.span;
          }
          ++cases;
        }
      }
    }
  }
  std::printf("### zb-auto: what each step of the search gains (%d cases)\n\n", cases);
  std::printf(
      "| step | shorter than previous | largest gain | mean gap to bound | proven optimal |\n"
      "|---|---:|---:|---:|---:|\n");
  for (int k = 0; k < 4; ++k) {
    const step_stats& st = stats[k];
    if (k == 0) {
      std::printf("| %s | - | - | %.2f%% | %d |\n", names[k], 100.0 * st.gap_sum / cases,
                  st.optimal);
    } else {
      std::printf("| %s | %d | %.2f%% | %.2f%% | %d |\n", names[k], st.shorter,
                  100.0 * st.largest_gain, 100.0 * st.gap_sum / cases, st.optimal);
    }
  }

  // zb-v at unit costs, default limit (1F1B's peak): zero bubble means span = the busiest
  // stage's work (6m ops of half a unit: unit costs are per stage, split over 2 chunks).
  int v_cases = 0;
  int zero[2] = {0, 0};
  std::vector<std::uint32_t> v_stages = stages;
  if (stages.size() > 1) {
    v_stages = {1, 2, 3, 4, 5, 6, 7, 8};
  }
  for (const std::uint32_t p : v_stages) {
    for (const std::uint32_t m : {2 * p, 2 * p + 1, 3 * p, 4 * p}) {
      generator_params gp;
      gp.stages = p;
      gp.microbatches = m;
      for (int k = 0; k < 2; ++k) {
        zb_auto_options o;
        o.seed_handcrafted = k == 1;
        o.threads = 1;
        const zb_auto_result r = zb_v_search(gp, o);
        zero[k] += r.span <= r.ideal + 1e-9 ? 1 : 0;
      }
      ++v_cases;
    }
  }
  std::printf("\n### zb-v, unit costs, m >= 2p: cases with zero bubble\n\n");
  std::printf("| search | zero bubble |\n|---|---:|\n");
  std::printf("| greedy choices only | %d / %d |\n", zero[0], v_cases);
  std::printf("| with the hand-crafted seed | %d / %d |\n", zero[1], v_cases);
  return 0;
}
