#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/v_shape.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

// One options style: noise and sample go inside the options struct.
template <class S>
concept old_perturbed_spelling = requires(const S& s, const perturbation& n) {
  simulate_perturbed(s, cost_model{}, n, std::uint64_t{0});
};
static_assert(!old_perturbed_spelling<schedule>, "simulate_perturbed(sched, costs, noise, sample)");
template <class S>
concept new_perturbed_spelling = requires(const S& s, const perturbation& n) {
  simulate_perturbed(s, cost_model{}, perturbed_options{});
};
static_assert(new_perturbed_spelling<schedule>);
static_assert(std::is_base_of_v<simulate_options, perturbed_options>);
static_assert(std::is_base_of_v<monte_carlo_options, robustness_options>);

TEST_CASE("simulate_perturbed: no noise reproduces simulate exactly", "[perturbation]") {
  const cost_model costs = cost_model::uniform(3, 4, 2, 0.5);
  perturbation none;
  none.set_seed(123).set_stage_slowdown({1.0, 1.0, 1.0, 1.0});  // factor 1 changes nothing
  for (const schedule& s :
       {generate(one_f_one_b{}, 4, 8), generate(zb_h1{}, 4, 8), generate(zb_h2{}, 4, 8),
        generate(zb_v{}, 4, 8), generate(v_half{}, 4, 8), generate(gpipe{}, 4, 3)}) {
    const simulation_result clean = simulate(s, costs);
    for (std::uint64_t sample : {0u, 5u}) {
      const simulation_result r = simulate_perturbed(s, costs, perturbed(none, sample));
      CHECK(r.makespan == clean.makespan);
      CHECK(r.ops == clean.ops);
      CHECK(r.critical_path == clean.critical_path);
      CHECK(r.bubble_rate == clean.bubble_rate);
    }
  }
}

TEST_CASE("simulate_perturbed: a 5% straggler adds 5% of its critical work", "[perturbation]") {
  const cost_model unit = cost_model::uniform(1, 1, 1);
  // p = 2, m = 1: F0 on stage 0, F0 + BW0 on stage 1, BW0 on stage 0; all on the critical
  // path, stage 1's 3 units become 3.15.
  perturbation slow1;
  slow1.set_straggler(2, 1, 1.05);
  CHECK(simulate_perturbed(generate(one_f_one_b{}, 2, 1), unit, perturbed(slow1, 0)).makespan ==
        Approx(6.15));
  // 1F1B p = 4, m = 8 (span 33): the last stage runs without a gap from its first F at 3 to
  // its last BW, and the drain after it is the other stages' BW; its 8 * (1 + 2) = 24 units
  // of work stretch by 5%.
  perturbation slow3;
  slow3.set_straggler(4, 3, 1.05);
  CHECK(simulate_perturbed(generate(one_f_one_b{}, 4, 8), unit, perturbed(slow3, 0)).makespan ==
        Approx(33.0 + 0.05 * 24));
}

TEST_CASE("simulate_perturbed: same seed same times, another seed or sample other times",
          "[perturbation]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  const cost_model costs = cost_model::uniform(1, 1, 1, 0.1);
  perturbation n;
  n.set_cv(0.05).set_link_cv(0.2).set_seed(42);
  const simulation_result a = simulate_perturbed(s, costs, perturbed(n, 3));
  const simulation_result b = simulate_perturbed(s, costs, perturbed(n, 3));
  CHECK(a.ops == b.ops);
  CHECK(a.makespan == b.makespan);
  CHECK(simulate_perturbed(s, costs, perturbed(n, 4)).makespan != a.makespan);
  perturbation other = n;
  other.set_seed(43);
  CHECK(simulate_perturbed(s, costs, perturbed(other, 3)).makespan != a.makespan);
  // The result keeps simulate's shape and invariants.
  REQUIRE(a.completed());
  CHECK(a.ops.size() == 4);
  CHECK(a.ops[0].size() == s.ops(0).size());
  CHECK(a.makespan != simulate(s, costs).makespan);
}

TEST_CASE("perturbed_costs: the same op gets the same numbers whatever its position",
          "[perturbation]") {
  const schedule s = generate(zb_h1{}, 3, 6);
  perturbation n;
  n.set_cv(0.1).set_seed(9);
  const perturbed_costs pc(s.layout(), 6, false, cost_model::uniform(2, 3, 1), n, 0);
  const perturbed_costs again(s.layout(), 6, false, cost_model::uniform(2, 3, 1), n, 0);
  const op b2{op_kind::backward_input, 2};
  CHECK(pc.of(1, b2).duration == again.of(1, b2).duration);
  CHECK(pc.of(1, b2).duration != pc.of(1, op{op_kind::backward_input, 3}).duration);
  // The times simulate_perturbed reports are these durations.
  const simulation_result r = simulate_perturbed(s, cost_model::uniform(2, 3, 1), perturbed(n, 0));
  for (const timed_op& t : r.ops[1]) {
    CHECK(t.duration() == Approx(pc.of(1, t.o).duration));
  }
}

TEST_CASE("perturbed_costs: the log-normal has mean 1 and the asked cv", "[perturbation]") {
  // 4 stages x 64 micro-batches x F: 256 draws per sample, 40 samples.
  perturbation n;
  n.set_cv(0.1).set_seed(1);
  const placement pl = placement::sequential(4);
  double sum = 0.0;
  double sq = 0.0;
  int count = 0;
  for (std::uint64_t sample = 0; sample < 40; ++sample) {
    const perturbed_costs pc(pl, 64, false, cost_model::uniform(1, 1, 1), n, sample);
    for (stage_index st = 0; st < 4; ++st) {
      for (microbatch_index mb = 0; mb < 64; ++mb) {
        const double x = pc.of(st, op{op_kind::forward, mb}).duration;
        CHECK(x > 0.0);
        sum += x;
        sq += x * x;
        ++count;
      }
    }
  }
  const double mean = sum / count;
  const double sd = std::sqrt(sq / count - mean * mean);
  CHECK(mean == Approx(1.0).margin(0.01));
  CHECK(sd == Approx(0.1).margin(0.01));
}

TEST_CASE("perturbed_costs: stalls with probability 1 lengthen every compute op",
          "[perturbation]") {
  const schedule s = generate(zb_h1{}, 1, 4);  // one stage: 12 ops back to back
  perturbation n;
  n.set_stalls({1.0, 0.5});
  CHECK(simulate_perturbed(s, cost_model::uniform(1, 1, 1), perturbed(n, 0)).makespan ==
        Approx(12 + 6));
  perturbation rare;
  rare.set_stalls({0.25, 10.0}).set_seed(5);
  const double t = simulate_perturbed(s, cost_model::uniform(1, 1, 1), perturbed(rare, 0)).makespan;
  CHECK(std::fmod(t - 12.0, 10.0) == 0.0);  // a whole number of stalls
}

TEST_CASE("simulate_perturbed: lowered schedules and shape errors", "[perturbation]") {
  const schedule lowered = lower_communication(generate(one_f_one_b{}, 3, 4));
  const cost_model costs = cost_model::uniform(1, 1, 1, 0.25);
  CHECK(simulate_perturbed(lowered, costs, perturbed(perturbation{}, 0)).ops ==
        simulate(lowered, costs).ops);
  perturbation bad;
  bad.set_stage_slowdown({1.0, 1.1});
  CHECK_THROWS_WITH(simulate_perturbed(lowered, costs, perturbed(bad, 0)),
                    Catch::Matchers::Contains("simulate_perturbed: perturbation stage_slowdown"));
}

TEST_CASE("stats_of: nearest-rank percentiles", "[perturbation]") {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) {
    v.push_back(i);
  }
  const sample_stats s = stats_of(v);
  CHECK(s.count == 100);
  CHECK(s.mean == 50.5);
  CHECK(s.p50 == 50);
  CHECK(s.p99 == 99);
  CHECK(s.max == 100);
  CHECK(s.min == 1);
  CHECK(stats_of({3.0}).p99 == 3.0);
  CHECK(stats_of({}).count == 0);
}

TEST_CASE("stats_of: no noise is exact, and the order of the statistics always holds",
          "[perturbation]") {
  // 10,000 equal makespans summed plainly drift: mean 120.40000000000228 against max
  // 120.39999999999988, deviation 2.4e-12.
  const sample_stats same = stats_of(std::vector<double>(10000, 120.39999999999988));
  CHECK(same.mean == 120.39999999999988);
  CHECK(same.min == same.mean);
  CHECK(same.max == same.mean);
  CHECK(same.stddev == 0.0);
  // Property: over random samples of any spread, min <= mean <= max, p50 <= p99 <= max, and
  // every number finite, even for values near the largest double.
  std::uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
  };
  for (int round = 0; round < 2000; ++round) {
    const auto n = static_cast<std::size_t>(1 + next() * 300);
    const double scale = std::pow(10.0, -300 + next() * 607);
    const double base = next() < 0.3 ? scale : 0.0;
    std::vector<double> v;
    for (std::size_t i = 0; i < n; ++i) {
      v.push_back(next() < 0.2 ? base : base + next() * scale);
    }
    const sample_stats st = stats_of(v);
    INFO("round " << round << ", n " << n << ", scale " << scale);
    REQUIRE(std::isfinite(st.mean));
    REQUIRE(std::isfinite(st.stddev));
    CHECK(st.min <= st.mean);
    CHECK(st.mean <= st.max);
    CHECK(st.min <= st.p50);
    CHECK(st.p50 <= st.p99);
    CHECK(st.p99 <= st.max);
    CHECK(st.stddev >= 0.0);
  }
}
