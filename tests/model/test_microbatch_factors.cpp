#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_exact.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/model/cost_model.hpp>
#include <pipesched/model/memory_model.hpp>
#include <pipesched/model/microbatch_factors.hpp>
#include <pipesched/tools/whatif.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

namespace {

std::vector<cost_factors> ones(std::uint32_t m) {
  return std::vector<cost_factors>(m);
}
std::vector<memory_factors> memory_ones(std::uint32_t m) {
  return std::vector<memory_factors>(m);
}

// Every op of two simulations: the same times, bit for bit.
void same_simulation(const simulation_result& a, const simulation_result& b) {
  REQUIRE(a.completed() == b.completed());
  CHECK(a.makespan == b.makespan);
  CHECK(a.bubble_rate == b.bubble_rate);
  CHECK(a.utilization == b.utilization);
  REQUIRE(a.ops.size() == b.ops.size());
  for (std::size_t s = 0; s < a.ops.size(); ++s) {
    REQUIRE(a.ops[s].size() == b.ops[s].size());
    for (std::size_t i = 0; i < a.ops[s].size(); ++i) {
      CHECK(a.ops[s][i].start == b.ops[s][i].start);
      CHECK(a.ops[s][i].end == b.ops[s][i].end);
    }
  }
}

void same_memory(const memory_report& a, const memory_report& b) {
  REQUIRE(a.stages.size() == b.stages.size());
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    CHECK(a.stages[s].peak == b.stages[s].peak);
    CHECK(a.stages[s].curve == b.stages[s].curve);
    CHECK(a.stages[s].peak_stage_units == b.stages[s].peak_stage_units);
  }
  CHECK(a.violations.size() == b.violations.size());
}

}  // namespace

TEST_CASE("microbatch_table: forms, lookups and the shape rule", "[model][microbatch]") {
  using detail::microbatch_table;
  const microbatch_table<cost_factors> every(1, 1, {cost_factors::all(2), cost_factors::all(3)},
                                             "t");
  CHECK(every.microbatches() == 2);
  CHECK(every.at(5, 1, 1).forward == 3);       // every stage and chunk
  CHECK(every.at(0, 0, 7) == cost_factors{});  // out of range: neutral
  CHECK_NOTHROW(every.check_shape(4, 2, 2, "w", "cost model"));
  CHECK_THROWS_WITH(every.check_shape(4, 2, 3, "simulate", "cost model"),
                    "simulate: cost model microbatches table (2 entries) must hold one entry per "
                    "micro-batch (m=3)");
  // Per stage: 2 micro-batches x 3 stages; every chunk of a stage alike.
  std::vector<memory_factors> v;
  for (int i = 0; i < 6; ++i) {
    v.push_back(memory_factors::all(i));
  }
  const microbatch_table<memory_factors> per_stage(3, 1, v, "t");
  CHECK(per_stage.at(2, 1, 1).activation == 5);
  CHECK(per_stage.at(1, 0, 0).activation == 1);
  CHECK_THROWS_WITH(per_stage.check_shape(4, 1, 2, "check_memory", "memory model"),
                    "check_memory: memory model microbatches table has 3 stages per micro-batch; "
                    "it must have 1 (every stage) or p (p=4)");
  CHECK_THROWS_WITH(microbatch_table<cost_factors>(2, 2, ones(6), "cost_model::set"),
                    "cost_model::set: per-micro-batch table (6 entries) must hold stages x chunks "
                    "(2 x 2) entries per micro-batch");
  CHECK(every.rows_equal() == false);
  CHECK(microbatch_table<cost_factors>(1, 1, ones(4), "t").all_one());
  CHECK(
      microbatch_table<cost_factors>(1, 1, std::vector<cost_factors>(3, cost_factors::all(2)), "t")
          .rows_equal());
}

TEST_CASE("cost_model: per-micro-batch factors scale each micro-batch's ops",
          "[model][microbatch]") {
  cost_model c = cost_model::uniform(2, 3, 1, 0.5);
  c.set_microbatch_factors({cost_factors{}, cost_factors{2, 4, 0.5}, cost_factors::all(0)});
  const shaped_cost_model s = c.for_shape(1, 1, 3, "t");
  CHECK(s.duration(0, op_kind::forward, 0, 1) == 4);
  CHECK(s.duration(0, op_kind::backward_input, 0, 1) == 12);
  CHECK(s.duration(0, op_kind::backward_weight, 0, 1) == 0.5);
  CHECK(s.duration(0, op_kind::backward_full, 0, 1) == 12.5);
  CHECK(s.duration(0, op_kind::recompute, 0, 1) == 4);  // T_R unset: T_F, forward's factor
  CHECK(s.duration(0, op_kind::forward, 0, 2) == 0);
  CHECK(s.duration(0, op_kind::forward) == 2);  // without a micro-batch: the base
  CHECK(s.comm(0, 1) == 0.5);                   // not scaled
  // T_R and T_FB: the recompute factor (unset: forward's) and the forward factor.
  cost_model r = cost_model::uniform(2, 3, 1).set_recompute(1).set_overlapped(4);
  r.set_microbatch_factors({cost_factors{3, 1, 1, 0.5}, cost_factors{3, 1, 1}});
  const shaped_cost_model rs = r.for_shape(1, 1, 2, "t");
  CHECK(rs.duration(0, op_kind::recompute, 0, 0) == 0.5);
  CHECK(rs.duration(0, op_kind::recompute, 0, 1) == 3);
  CHECK(rs.overlap_gain(0, 0, 1) == 6 + 3 - 12);
  CHECK_THROWS_WITH(cost_model{}.set_microbatch_factors({cost_factors{1, -1, 1}}),
                    "cost_model::set_microbatch_factors: microbatches entry 0: backward_input "
                    "factor (-1) must be finite and >= 0");
  CHECK_FALSE(c.is_uniform());
  CHECK(c.clear_microbatch_factors().is_uniform());
}

TEST_CASE("memory_model: per-micro-batch factors, the envelope and M_W <= M_B",
          "[model][microbatch]") {
  memory_model m = memory_model::uniform(2, 1);
  m.set_microbatch_factors({memory_factors::all(1), memory_factors{3, 0.5, 1, 1}});
  const shaped_memory_model s = m.for_shape(2, 2, 2, "t");
  CHECK(s.at(0, 1, 1).activation == 3);  // 2 / v = 1 per chunk, x 3
  CHECK(s.at(0, 1, 1).weight_grad_input == 0.25);
  CHECK(s.envelope(1, 0).activation == 3);
  CHECK(s.envelope(1, 0).weight_grad_input == 0.5);
  CHECK(stage_activation(s, 0, 2) == 6);  // the largest micro-batch's, chunk by chunk
  memory_model bad = memory_model::uniform(2, 1);
  bad.set_microbatch_factors({memory_factors{1, 3, 1, 1}});
  CHECK_THROWS_WITH(bad.for_shape(1, 1, 1, "check_memory"),
                    "check_memory: memory model microbatches entry 0 on stage 0, chunk 0: "
                    "weight-gradient memory (M_W=3) must be <= activation memory (M_B=2)");
}

TEST_CASE("equal factors fold away for the search", "[model][microbatch]") {
  cost_model c = cost_model::uniform(1, 2, 3);
  c.set_microbatch_factors(std::vector<cost_factors>(4, cost_factors::all(2)));
  const shaped_cost_model f = c.for_shape(2, 2, 4, "t").with_equal_factors_folded();
  CHECK_FALSE(f.has_microbatch_factors());
  CHECK(f.at(1, 1).backward_weight == 3);  // 3 / v x 2
  cost_model one = cost_model::uniform(1, 2, 3);
  one.set_microbatch_factors(ones(4));
  const shaped_cost_model g = one.for_shape(2, 1, 4, "t").with_equal_factors_folded();
  CHECK(g.is_uniform());  // all 1: nothing to fold in
  cost_model differ = cost_model::uniform(1, 2, 3);
  differ.set_microbatch_factors({cost_factors::all(1), cost_factors::all(2)});
  CHECK(differ.for_shape(1, 1, 2, "t").with_equal_factors_folded().has_microbatch_factors());
}

TEST_CASE("a micro-batch's factors time its own ops", "[model][microbatch][sim]") {
  // One stage, 1F1B: the ops run back to back, so the makespan is every op's duration added.
  const schedule s = default_registry().generate("1f1b", generator_params{1, 3, 0, {}, {}, {}, 0});
  cost_model c = cost_model::uniform(1, 2, 3);
  c.set_microbatch_factors({cost_factors::all(1), cost_factors::all(2), cost_factors{0, 1, 0}});
  CHECK(simulate(s, c).makespan == 6 + 12 + 2);
  memory_model m = memory_model::uniform(4, 2);
  m.set_microbatch_factors({memory_factors::all(1), memory_factors::all(0.5), memory_factors{}});
  const memory_report r = check_memory(s, m);
  CHECK(r.stages[0].peak == 4);
  cost_model wrong = c;
  wrong.set_microbatch_factors(ones(2));
  CHECK_THROWS_WITH(simulate(s, wrong),
                    "simulate: cost model microbatches table (2 entries) "
                    "must hold one entry per micro-batch (m=3)");
}

TEST_CASE(
    "factors of 1 reproduce every generator, simulate, check_memory, lowering, "
    "recompute and what-if bit for bit",
    "[model][microbatch][property]") {
  const generator_registry& reg = default_registry();
  for (std::uint32_t p : {2u, 4u}) {
    for (std::uint32_t m : {4u, 8u}) {
      generator_params base;
      base.stages = p;
      base.microbatches = m;
      base.costs = cost_model::uniform(1, 1.2, 0.8, 0.1);
      base.memory = memory_model::uniform(1, 0.5);
      generator_params with = base;
      with.costs.set_microbatch_factors(ones(m));
      with.memory.set_microbatch_factors(memory_ones(m));
      // And equal factors other than 1: the model they scale (powers of two: exact).
      generator_params twice = base;
      twice.costs.set_microbatch_factors(std::vector<cost_factors>(m, cost_factors::all(2)));
      generator_params doubled = base;
      doubled.costs = cost_model::uniform(2, 2.4, 1.6, 0.1);
      for (const generator_entry& e : reg.entries()) {
        INFO(e.name << " p=" << p << " m=" << m);
        const auto a = test_support::generate_if_served(e, base);
        if (!a) {
          continue;
        }
        const schedule b = e.generate(with);
        for (stage_index s = 0; s < p; ++s) {
          REQUIRE(std::vector<op>(a->ops(s).begin(), a->ops(s).end()) ==
                  std::vector<op>(b.ops(s).begin(), b.ops(s).end()));
        }
        same_simulation(simulate(*a, base.costs), simulate(b, with.costs));
        same_memory(check_memory(*a, base.memory, memory_options::with_limit(double(p))),
                    check_memory(b, with.memory, memory_options::with_limit(double(p))));
        const schedule t = e.generate(twice);
        const schedule d = e.generate(doubled);
        for (stage_index s = 0; s < p; ++s) {
          REQUIRE(std::vector<op>(t.ops(s).begin(), t.ops(s).end()) ==
                  std::vector<op>(d.ops(s).begin(), d.ops(s).end()));
        }
        same_simulation(simulate(t, twice.costs), simulate(d, doubled.costs));
        if (m == 8 && p == 4) {
          lowering_options la;
          la.costs = base.costs;
          lowering_options lb;
          lb.costs = with.costs;
          const schedule x = lower_communication(*a, la);
          const schedule y = lower_communication(b, lb);
          for (stage_index s = 0; s < p; ++s) {
            REQUIRE(std::vector<op>(x.ops(s).begin(), x.ops(s).end()) ==
                    std::vector<op>(y.ops(s).begin(), y.ops(s).end()));
          }
          if (e.name != "dualpipev") {
            recompute_options ra;
            ra.placement = recompute_placement::idle_slot;
            ra.costs = base.costs;
            ra.memory = base.memory;
            recompute_options rb = ra;
            rb.costs = with.costs;
            rb.memory = with.memory;
            const schedule u = with_recompute(*a, all_chunks(*a), ra);
            const schedule w = with_recompute(b, all_chunks(b), rb);
            for (stage_index s = 0; s < p; ++s) {
              REQUIRE(std::vector<op>(u.ops(s).begin(), u.ops(s).end()) ==
                      std::vector<op>(w.ops(s).begin(), w.ops(s).end()));
            }
          }
          whatif_request qa;
          qa.costs = base.costs;
          qa.cv = 0.1;
          qa.samples = 8;
          qa.keep_samples = true;
          whatif_request qb = qa;
          qb.costs = with.costs;
          CHECK(run_whatif(*a, qa).samples() == run_whatif(b, qb).samples());
          if (e.name == "zb-h1" || e.name == "zb-v") {  // the dynamic policy, split backward
            qa.dynamic = qb.dynamic = true;
            qa.memory = base.memory;
            qb.memory = with.memory;
            qa.memory_limit = qb.memory_limit = double(p);
            CHECK(run_whatif(*a, qa).samples() == run_whatif(b, qb).samples());
          }
        }
      }
    }
  }
}

TEST_CASE(
    "the zero-bubble search with micro-batches that differ stays valid and within the "
    "limit, and its bounds hold",
    "[model][microbatch][gen]") {
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> u(0.3, 2.5);
  for (std::uint32_t p : {2u, 3u, 4u}) {
    for (std::uint32_t m : {p, 2 * p, 4 * p}) {
      for (int trial = 0; trial < 2; ++trial) {
        generator_params g;
        g.stages = p;
        g.microbatches = m;
        g.costs = cost_model::uniform(1, 1.2, 0.8, 0.05);
        g.memory = memory_model::uniform(1, 0.4);
        std::vector<cost_factors> cf;
        std::vector<memory_factors> mf;
        double largest = 0.0;
        for (std::uint32_t j = 0; j < m; ++j) {
          const double x = u(rng);
          cf.push_back(cost_factors{x, x * 1.3, x * 0.7});
          mf.push_back(memory_factors::all(x));
          largest = std::max(largest, x);
        }
        g.costs.set_microbatch_factors(cf);
        g.memory.set_microbatch_factors(mf);
        for (double limit : {largest * 1.0, largest * 2.0, double(p) * largest}) {
          g.memory_limit = limit;
          for (const bool v : {false, true}) {
            INFO("p=" << p << " m=" << m << " limit=" << limit << " zb-v=" << v);
            const zb_auto_result r = v ? zb_v_search(g) : zb_auto_search(g);
            CHECK(r.objective == zb_objective::makespan);
            const simulation_result sim = simulate(r.sched, g.costs);
            CHECK(sim.makespan == Approx(r.makespan).epsilon(1e-12));
            CHECK(r.makespan_lower_bound <= r.makespan * (1 + 1e-12));
            CHECK(r.lower_bound <= r.span * (1 + 1e-12));
            const memory_report mem =
                check_memory(r.sched, g.memory, memory_options::with_limit(limit));
            CHECK(mem.ok());
          }
        }
      }
    }
  }
  generator_params g;
  g.stages = 2;
  g.microbatches = 2;
  g.costs.set_microbatch_factors({cost_factors::all(1), cost_factors::all(2)});
  CHECK_THROWS_WITH(zb_exact_search(g), Catch::Contains("per-micro-batch factors"));
  zb_auto_options o;
  o.recompute = true;
  CHECK_THROWS_WITH(zb_auto_search(g, o), Catch::Contains("per-micro-batch factors"));
}
