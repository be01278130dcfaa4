// Memory limits hold in any units: the automatic schedulers compare times
// with a tolerance relative to the costs and memory with one relative to the memory sizes,
// so neither the time unit nor the memory unit changes a schedule or lets it exceed its limit.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_v.hpp>

using namespace pipesched;

namespace {

constexpr double cost_scales[] = {1e-6, 1e-3, 1.0, 1e3, 1e6, 1e9, 1e12};
constexpr double memory_scales[] = {1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e6, 1e9, 1e12};

struct scale_shape {
  std::uint32_t p, m;
};
constexpr scale_shape scale_shapes[] = {{2, 3}, {4, 8}, {3, 7}};

// One generator and its limit, in units of one (chunk) activation M_B; 0: the preset's.
struct setting {
  const char* name;
  double limit_in_mb;
};

// Mixed per-stage (and per-chunk) costs with T_comm, all multiplied by `scale`.
cost_model scaled_costs(std::uint32_t p, std::uint32_t v, double scale) {
  std::vector<op_costs> c;
  for (std::uint32_t s = 0; s < p; ++s) {
    for (std::uint32_t k = 0; k < v; ++k) {
      c.push_back({scale * (1.0 + 0.3 * ((s + k) % 3)), scale * (1.2 + 0.2 * ((s + 1) % 4)),
                   scale * (0.6 + 0.25 * ((s + k) % 2))});
    }
  }
  cost_model out;
  out.set_chunk_costs(v, std::move(c)).set_comm(0.1 * scale);
  return out;
}

zb_auto_result run(const setting& g,
                   const generator_params& gp,
                   zb_objective objective = zb_objective::automatic) {
  const std::string n = g.name;
  zb_auto_options o;
  o.objective = objective;
  if (n == "zb-v") {
    return zb_v_search(gp, o);
  }
  const zb_memory_preset preset = n == "zb-1p"   ? zb_memory_preset::one_p
                                  : n == "zb-2p" ? zb_memory_preset::two_p
                                                 : zb_memory_preset::given;
  return zb_auto_search(gp, o, preset, n);
}

}  // namespace

// Both objectives: these per-stage costs differ, so by default the search minimises the
// makespan (docs/model.md §7). Every schedule stays within its limit and the memory unit never
// changes one. With the span objective the time unit does not either; with the makespan
// objective it can: the ported heuristics of the zero-bubble authors compare times exactly, as
// their code does, and at p = 4, m = 8, limit 1.5·p·M_B one of their orders reaches the
// makespan bound (34.5) with a W placed one slot earlier at cost scale 1 than at the others
// (an exact tie that rounding breaks either way). So there the peaks are compared per cost scale.
TEST_CASE(
    "zb schedulers: every schedule within its limit for cost scales 1e-6..1e12 and memory "
    "scales 1e-9..1e12, peaks proportional to the memory scale",
    "[gen][zb_memory_scale]") {
  const std::vector<setting> settings = {{"zb-auto", 1.0}, {"zb-auto", 1.5}, {"zb-auto", 2.0},
                                         {"zb-1p", 0.0},   {"zb-2p", 0.0},   {"zb-v", 2.0},
                                         {"zb-v", 2.3}};
  for (const zb_objective objective : {zb_objective::span, zb_objective::automatic}) {
    for (const scale_shape& sh : scale_shapes) {
      for (const setting& g : settings) {
        const bool v_shape = std::string(g.name) == "zb-v";
        const std::uint32_t v = v_shape ? 2 : 1;
        std::vector<double> ref;  // per-stage peaks at memory scale 1 (and cost scale 1 for span)
        for (double cs : cost_scales) {
          if (objective != zb_objective::span) {
            ref.clear();
          }
          for (double ms : memory_scales) {
            INFO(g.name << " p=" << sh.p << " m=" << sh.m << " limit=" << g.limit_in_mb
                        << " p*M_B, cost scale " << cs << ", memory scale " << ms << ", objective "
                        << to_string(objective));
            generator_params gp;
            gp.stages = sh.p;
            gp.microbatches = sh.m;
            gp.costs = scaled_costs(sh.p, v, cs);
            gp.memory = memory_model::uniform(ms, 0.375 * ms);
            if (g.limit_in_mb > 0.0) {
              gp.memory_limit = g.limit_in_mb * double(sh.p) * ms;
            }
            const zb_auto_result r = run(g, gp, objective);
            REQUIRE(validate(r.sched).ok());
            const memory_report rep =
                check_memory(r.sched, gp.memory, memory_options::with_limit(r.limits));
            REQUIRE(rep.lifetimes_ok());
            CHECK(rep.within_budget());
            for (const auto& bv : rep.violations) {
              FAIL_CHECK(bv.message);
            }
            if (ref.empty()) {
              // The first run is at memory scale 1e-9: compute scale 1 once (and for the span
              // objective cost scale 1: it must not matter either).
              generator_params one = gp;
              if (objective == zb_objective::span) {
                one.costs = scaled_costs(sh.p, v, 1.0);
              }
              one.memory = memory_model::uniform(1.0, 0.375);
              if (g.limit_in_mb > 0.0) {
                one.memory_limit = g.limit_in_mb * double(sh.p);
              }
              const memory_report r1 = check_memory(run(g, one, objective).sched, one.memory);
              for (stage_index s = 0; s < sh.p; ++s) {
                ref.push_back(r1.peak_memory(s));
              }
            }
            for (stage_index s = 0; s < sh.p; ++s) {
              INFO("stage " << s);
              CHECK(rep.peak_memory(s) <= r.limits[s] * (1.0 + 1e-9));
              CHECK(std::abs(rep.peak_memory(s) - ref[s] * ms) <= 1e-9 * ref[s] * ms);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("zb schedulers: the issue's two settings stay within their limits",
          "[gen][zb_memory_scale]") {
  SECTION("zb-auto, costs in nanoseconds, limit 2.5 M_B") {
    generator_params gp;
    gp.stages = 4;
    gp.microbatches = 8;
    gp.costs = cost_model::uniform(1.2e7, 1.1e7, 0.9e7, 0.0);
    gp.memory = memory_model::uniform(0.01, 0.005);
    gp.memory_limit = 0.025;
    const zb_auto_result r = zb_auto_search(gp);
    const memory_report rep = check_memory(r.sched, gp.memory, memory_options::with_limit(0.025));
    CHECK(rep.ok());
    CHECK(rep.max_peak() <= 0.025 * (1.0 + 1e-9));
    // Two activations and one W input (2·0.01 + 0.005) fit; a third activation does not.
    CHECK(rep.max_peak() == Approx(0.025));
  }
  SECTION("zb-1p, costs of 1e9") {
    generator_params gp;
    gp.stages = 2;
    gp.microbatches = 3;
    gp.costs = cost_model::uniform(1e9, 1e9, 1e9, 0.0);
    const zb_auto_result r = zb_auto_search(gp, {}, zb_memory_preset::one_p, "zb-1p");
    const memory_report rep = check_memory(r.sched, gp.memory, memory_options::with_limit(2.0));
    CHECK(rep.ok());
    CHECK(rep.max_peak() <= 2.0);
  }
}

TEST_CASE("check_memory: the default tolerance is relative to the limit, in any memory unit",
          "[memory][zb_memory_scale]") {
  // One stage, F0 F1 B0 W0 B1 W1: peak 2·M_B.
  schedule s = schedule::sequential("two", 1, 2);
  s.stage_ops(0) = {make_op(op_kind::forward, 0),        make_op(op_kind::forward, 1),
                    make_op(op_kind::backward_input, 0), make_op(op_kind::backward_weight, 0),
                    make_op(op_kind::backward_input, 1), make_op(op_kind::backward_weight, 1)};
  for (double mb : {1e-12, 1e-9, 1e-3, 0.01, 1.0, 1e9, 1e12}) {
    INFO("M_B = " << mb);
    const memory_model mm = memory_model::uniform(mb, 0.5 * mb);
    // A limit of one activation: the peak of two is over it, however small the unit.
    CHECK_FALSE(check_memory(s, mm, memory_options::with_limit(mb)).within_budget());
    // 1.5 activations: still over (an absolute tolerance of 1e-9 admitted this for M_B ≤ 2e-9).
    CHECK_FALSE(check_memory(s, mm, memory_options::with_limit(1.5 * mb)).within_budget());
    // Exactly two, and two less a rounding error: within.
    CHECK(check_memory(s, mm, memory_options::with_limit(2.0 * mb)).within_budget());
    CHECK(
        check_memory(s, mm, memory_options::with_limit(2.0 * mb * (1.0 - 1e-13))).within_budget());
    // Over by a millionth of the limit: reported.
    CHECK_FALSE(
        check_memory(s, mm, memory_options::with_limit(2.0 * mb * (1.0 - 1e-6))).within_budget());
  }
  // Sums that round above the limit (0.1 + 0.2 > 0.3 in binary) are within it.
  const memory_model mixed = memory_model{}.set_stage_memory({{0.1, 0.05, 0.0}});
  schedule t = schedule::sequential("three", 1, 3);
  t.stage_ops(0) = {make_op(op_kind::forward, 0), make_op(op_kind::forward, 1),
                    make_op(op_kind::forward, 2)};
  for (int i = 0; i < 3; ++i) {
    t.stage_ops(0).push_back(make_op(op_kind::backward_input, static_cast<microbatch_index>(i)));
    t.stage_ops(0).push_back(make_op(op_kind::backward_weight, static_cast<microbatch_index>(i)));
  }
  CHECK(check_memory(t, mixed, memory_options::with_limit(0.3)).within_budget());
}
