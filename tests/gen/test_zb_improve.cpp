// The local search of zb_search (gen/detail/zb_improve.hpp): never worse, valid, within
// memory, deterministic, and able to beat the authors' heuristic where the bound leaves room.

#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/detail/zb_improve.hpp>
#include <pipesched/gen/detail/zb_published.hpp>
#include <pipesched/gen/zb_auto.hpp>

using namespace pipesched;

namespace {

struct problem {
  generator_params gp;
  detail::greedy_problem pr;
  problem(std::uint32_t p, std::uint32_t m, op_costs c, double comm, double mw, double limit)
      : gp(make(p, m, c, comm, mw, limit)),
        pr(placement::sequential(p),
           m,
           gp.costs.for_shape(p, 1, "test"),
           gp.memory.for_shape(p, 1, "test"),
           std::vector<double>(p, limit)) {}
  static generator_params make(
      std::uint32_t p, std::uint32_t m, op_costs c, double comm, double mw, double limit) {
    generator_params g;
    g.stages = p;
    g.microbatches = m;
    g.costs = cost_model::uniform(c.forward, c.backward_input, c.backward_weight, comm);
    g.memory = memory_model::uniform(1.0, mw);
    g.memory_limit = limit;
    return g;
  }
  /// The authors' best order (our port).
  std::vector<std::vector<op>> published() const {
    std::vector<std::vector<op>> best;
    double span = -1.0;
    for (unsigned i = 0; i < 8; ++i) {
      auto o = detail::published_zb_order(pr, detail::published_zb_combination(i));
      if (o.ok && (span < 0.0 || o.span < span)) {
        span = o.span;
        best = o.ops;
      }
    }
    return best;
  }
  double span(const std::vector<std::vector<op>>& ops) const {
    std::vector<std::vector<double>> start;
    const auto t = detail::time_order(pr, ops, start);
    REQUIRE(t.complete);
    return t.max_span;
  }
  schedule sched(const std::vector<std::vector<op>>& ops) const {
    schedule s = schedule::on("improved", pr.pl, pr.m);
    for (stage_index i = 0; i < pr.pl.stages(); ++i) {
      s.stage_ops(i) = ops[i];
    }
    return s;
  }
};

}  // namespace

TEST_CASE("local search: beats the authors' order where the bound leaves room", "[zb_improve]") {
  // p = 8, m = 40 at 2p·M_B with the paper's measured costs: the authors' heuristic leaves
  // 0.30% of bubble; a few moves at the warm-up remove part of it.
  const problem pb(8, 40, op_costs{1850, 1810, 930}, 60, 0.375, 16.0);
  auto ops = pb.published();
  const double before = pb.span(ops);
  CHECK(before == 184160.0);  // the authors' published span for this setting
  detail::order_improver imp(pb.pr);
  const auto st = imp.run(ops, {2000, 0.0});
  const double after = pb.span(ops);
  CHECK(after < before);
  CHECK(st.accepted > 0);
  CHECK(st.evaluations <= 2000);
  const schedule s = pb.sched(ops);
  CHECK(validate(s).ok());
  CHECK(check_memory(s, pb.gp.memory, memory_options::with_limit(16.0)).ok());
}

TEST_CASE("local search: never worse, valid, within memory, deterministic", "[zb_improve]") {
  int cases = 0;
  for (std::uint32_t p : {2u, 3u, 5u}) {
    for (std::uint32_t m : {p, 2 * p + 1, 4 * p}) {
      for (double lim : {1.0, 1.5, 2.0}) {
        const problem pb(p, m, op_costs{1.0, 1.3, 0.7}, 0.1, 0.4, lim * p);
        auto ops = pb.published();
        REQUIRE_FALSE(ops.empty());
        const double before = pb.span(ops);
        auto again = ops;
        detail::order_improver a(pb.pr);
        detail::order_improver b(pb.pr);
        a.run(ops, {300, 0.0});
        b.run(again, {300, 0.0});
        INFO("p=" << p << " m=" << m << " limit " << lim << "p");
        CHECK(ops == again);  // same input, same budget: same order
        const double after = pb.span(ops);
        CHECK(after <= before + 1e-9);
        const schedule s = pb.sched(ops);
        CHECK(validate(s).ok());
        CHECK(check_memory(s, pb.gp.memory, memory_options::with_limit(lim * p)).ok());
        ++cases;
      }
    }
  }
  CHECK(cases == 27);
}

TEST_CASE("local search: a zero budget leaves the order alone", "[zb_improve]") {
  const problem pb(4, 8, op_costs{1.0, 1.2, 0.8}, 0.1, 0.5, 8.0);
  auto ops = pb.published();
  const auto copy = ops;
  detail::order_improver imp(pb.pr);
  const auto st = imp.run(ops, {0, 0.0});
  CHECK(ops == copy);
  CHECK(st.evaluations == 0);
  CHECK(st.accepted == 0);
}
