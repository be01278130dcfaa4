// Grid property tests of the V-shape schedules: v-half, v-min and dualpipev,
// from the registry, over p = 1..16 and m = 1..64 (dualpipev: m >= 2p). Every p; the m are the
// edges (1, 2, 3, 2p-1, 2p, 2p+1, 63, 64) and a stride through the rest, so the test stays fast
// under sanitizers. Each schedule is valid and complete, simulates to completion with every
// stage busy exactly its work, and its memory is what docs/model.md §6 states.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

namespace {

/// The m of the grid for p: the edges and every 9th m in between (238 shapes in all).
std::vector<std::uint32_t> grid_m(std::uint32_t p) {
  std::set<std::uint32_t> m = {1, 2, 3, 2 * p - 1, 2 * p, 2 * p + 1, 4 * p, 63, 64};
  for (std::uint32_t x = 4 + p % 9; x <= 64; x += 9) {
    m.insert(x);
  }
  std::vector<std::uint32_t> out;
  for (const std::uint32_t x : m) {
    if (x >= 1 && x <= 64) {
      out.push_back(x);
    }
  }
  return out;
}

/// Every (stage, chunk, micro-batch) has one F and one backward: B and W, or a fused BW.
bool complete(const schedule& s) {
  const std::uint32_t v = s.chunks();
  const std::uint32_t m = s.microbatches();
  for (stage_index st = 0; st < s.stages(); ++st) {
    // Counts of F, B, W, BW per (chunk, micro-batch).
    std::vector<std::array<int, 4>> n(std::size_t{v} * m, {0, 0, 0, 0});
    for (const op& o : s.ops(st)) {
      if (o.chunk >= v || o.mb >= m) {
        return false;
      }
      auto& c = n[std::size_t{o.chunk} * m + o.mb];
      switch (o.kind) {
        case op_kind::forward:
          ++c[0];
          break;
        case op_kind::backward_input:
          ++c[1];
          break;
        case op_kind::backward_weight:
          ++c[2];
          break;
        case op_kind::backward_full:
          ++c[3];
          break;
        default:
          return false;  // no other kind in a compute schedule of these generators
      }
    }
    for (const auto& c : n) {
      const bool split = c[1] == 1 && c[2] == 1 && c[3] == 0;
      const bool fused = c[1] == 0 && c[2] == 0 && c[3] == 1;
      if (c[0] != 1 || !(split || fused)) {
        return false;
      }
    }
  }
  return true;
}

struct grid_figures {
  std::size_t schedules = 0;
  std::size_t pairs = 0;
};

/// One schedule of the grid: the properties every V-shape schedule has, then the published
/// peak of each (in stage activations: one micro-batch's two chunks, M_W = 0).
void check_one(const std::string& name,
               std::uint32_t p,
               std::uint32_t m,
               double one_f_one_b_rate,
               grid_figures& fig) {
  INFO(name << " p=" << p << " m=" << m);
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  const auto generated = test_support::generate_if_served(default_registry().at(name), gp);
  if (!generated) {
    CHECK(name == "dualpipev");  // the only refusal: m < 2p
    CHECK(m < 2 * p);
    return;
  }
  const schedule& s = *generated;
  ++fig.schedules;
  REQUIRE(s.chunks() == 2);
  REQUIRE(s.layout().kind() == placement_kind::v_shape);
  const validation_report rep = validate(s);
  INFO((rep.ok() ? std::string("valid") : rep.violations.front().message));
  REQUIRE(rep.ok());
  CHECK(complete(s));

  // Per-stage costs 1, 1, 1 (a chunk: 1/2 each), T_FB unset: a pair costs its two ops.
  const simulation_result r = simulate(s, cost_model::unit());
  REQUIRE(r.completed());
  double longest = 0.0;
  for (stage_index st = 0; st < p; ++st) {
    CHECK(r.busy(st) == Approx(3.0 * m));
    CHECK(r.span(st) >= r.busy(st) - 1e-9);
    longest = std::max(longest, r.span(st));
    for (const op& o : s.ops(st)) {
      fig.pairs += overlaps_next(o) ? 1U : 0U;
    }
  }
  CHECK(r.makespan >= longest - 1e-9);
  // The bubble below 1F1B's (equal at p = 1, where neither has one).
  if (p == 1) {
    CHECK(r.bubble_rate == Approx(0.0).margin(1e-12));
  } else if (name != "dualpipev" || m > 2 * p) {
    CHECK(r.bubble_rate < one_f_one_b_rate);
  }
  if (name == "dualpipev") {
    // DeepSeek's published DualPipeV bubble at these costs: p - 1 (docs/model.md §6).
    double busiest = 0.0;
    for (const auto& st : r.stages) {
      busiest = std::max(busiest, st.busy);
    }
    CHECK(longest - busiest == Approx(p - 1.0));
  }

  // Memory, timed by the same simulation: lifetimes consistent, nothing leaked, peaks as
  // published.
  const memory_report mem = check_memory(s, memory_model::uniform(1.0, 0.0), {}, r);
  REQUIRE(mem.lifetimes_ok());
  double peak = 0.0;
  for (const auto& st : mem.stages) {
    CHECK(st.final_value == Approx(0.0).margin(1e-12));
    CHECK(st.peak_time <= r.makespan + 1e-9);
    peak = std::max(peak, st.peak_stage_units);
  }
  if (name == "v-half" || name == "v-min") {
    const double bound = name == "v-min" ? (p + 4) / 3 : (p + 2) / 2;
    CHECK(peak <= bound);
    if (m >= 2 * p && !(name == "v-min" && p == 2)) {  // V-Min p = 2: 1.5 (docs/model.md §6)
      CHECK(peak == bound);
    }
  } else {
    // 2p + 1 chunks' worth: DeepSeek's "PP + 1".
    CHECK(peak == Approx(p + 0.5));
  }
}

}  // namespace

TEST_CASE("v-half, v-min, dualpipev over p = 1..16, m = 1..64: valid, complete, timed, memory",
          "[gen][grid][v-shape][dualpipev]") {
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> one_f_one_b_rate;
  for (std::uint32_t p = 1; p <= 16; ++p) {
    for (const std::uint32_t m : grid_m(p)) {
      one_f_one_b_rate[{p, m}] =
          simulate(generate(one_f_one_b{}, p, m), cost_model::unit()).bubble_rate;
    }
  }
  for (const std::string name : {"v-half", "v-min", "dualpipev"}) {
    grid_figures fig;
    std::size_t refused = 0;
    for (std::uint32_t p = 1; p <= 16; ++p) {
      for (const std::uint32_t m : grid_m(p)) {
        const std::size_t before = fig.schedules;
        check_one(name, p, m, one_f_one_b_rate.at({p, m}), fig);
        refused += fig.schedules == before ? 1U : 0U;
      }
    }
    INFO(name << ": " << fig.schedules << " schedules, " << refused << " refused");
    if (name == "dualpipev") {
      CHECK(fig.schedules == 157);  // the shapes of the grid with m >= 2p
      CHECK(refused == 238 - 157);
      CHECK(fig.pairs > 0);
    } else {
      CHECK(fig.schedules == 238);
      CHECK(refused == 0);
    }
  }
  // The grid covers the edges of p and m.
  const auto m16 = grid_m(16);
  for (const std::uint32_t m : {1u, 2u, 31u, 32u, 33u, 63u, 64u}) {
    CHECK(std::find(m16.begin(), m16.end(), m) != m16.end());
  }
}
