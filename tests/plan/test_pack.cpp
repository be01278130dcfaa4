#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/plan/pack.hpp>

#include "support/length_mixes.hpp"
#include "support/pack_random.hpp"

using namespace pipesched;

namespace {

pack_request llama_request(std::vector<std::uint64_t> lengths,
                           std::uint32_t p,
                           std::uint32_t m,
                           const std::string& schedule) {
  pack_request r;
  r.model = model_preset("llama3-8b");
  r.cluster = cluster_preset("h100-sxm-80gb");
  r.lengths = std::move(lengths);
  r.microbatches = m;
  r.stages = p;
  r.schedule = schedule;
  return r;
}

// What every schedule `pack` returns must be: valid, timed to the step time it reports, its
// peaks the memory checker's own, and within the memory limit when it says it fits.
void check_produced(const pack_result& r, std::uint32_t p, std::size_t n) {
  REQUIRE(validate(r.sched).ok());
  CHECK(simulate(r.sched, r.costs).makespan == Approx(r.chosen.step_time_s).epsilon(1e-12));
  const memory_report mem =
      check_memory(r.sched, r.memory, memory_options::with_limit(r.memory_limit_bytes));
  CHECK(mem.lifetimes_ok());
  CHECK(mem.within_budget() == r.chosen.fits);
  REQUIRE(r.chosen.peak_memory_bytes.size() == p);
  for (stage_index s = 0; s < p; ++s) {
    CHECK(mem.stages[s].peak == r.chosen.peak_memory_bytes[s]);
    if (r.chosen.fits) {
      CHECK(mem.stages[s].peak <= r.memory_limit_bytes * (1 + 1e-9));
    }
  }
  // Every sequence in exactly one micro-batch, each micro-batch once in the order.
  std::vector<int> seen(n);
  for (const packed_microbatch& mb : r.microbatches) {
    REQUIRE(!mb.sequences.empty());
    for (std::size_t i : mb.sequences) {
      REQUIRE(i < n);
      ++seen[i];
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  std::vector<std::uint32_t> order = r.order;
  std::sort(order.begin(), order.end());
  for (std::uint32_t j = 0; j < order.size(); ++j) {
    CHECK(order[j] == j);
  }
}

// The planner's job and layout of 16 sequences of 4096 tokens on 4 GPUs in 8 micro-batches of
// 2 sequences, which `pack` gives as its baseline when the lengths are equal.
std::pair<training_job, plan_layout> uniform_job(const pack_request& req,
                                                 const pack_problem& problem) {
  training_job job;
  job.model = req.model;
  job.cluster = req.cluster;
  job.gpus = 4;
  job.sequence = 4096;
  job.global_batch = 16;
  plan_layout lay = problem.layout();
  lay.micro_batch = 2;
  lay.microbatches = 8;
  return {job, lay};
}

}  // namespace

TEST_CASE("pack: bad input names the field and the value", "[plan][pack]") {
  pack_request r = llama_request({1024, 2048, 512}, 2, 2, "1f1b");
  r.lengths.clear();
  CHECK_THROWS_WITH(pack(r), "pack: lengths: must hold at least one sequence");
  r.lengths = {1024, 0, 512};
  CHECK_THROWS_WITH(pack(r),
                    "pack: lengths: sequence 1 has 0 tokens: every length must be at least 1");
  r.lengths = {1024, 9000, 512};
  r.lines = {1, 3, 4};
  r.microbatches.reset();
  r.tokens_per_microbatch = 8192;
  CHECK_THROWS_WITH(pack(r),
                    "pack: tokens_per_microbatch: sequence 1 (line 3) has 9000 tokens, more than "
                    "the budget of 8192 tokens per micro-batch");
  r.lengths = {1024, 2048, 512};
  r.microbatches = 2;
  CHECK_THROWS_WITH(pack(r),
                    Catch::StartsWith("pack: microbatches: give either tokens_per_microbatch"));
  r.tokens_per_microbatch.reset();
  r.microbatches = 4;
  CHECK_THROWS_WITH(pack(r),
                    "pack: microbatches: m=4 is more than the 3 sequences (each micro-batch holds "
                    "at least one)");
  r.microbatches = 2;
  r.stages = 0;
  CHECK_THROWS_WITH(pack(r), "pack: stages: must be at least 1");
  r.stages = 2;
  r.memory_limit = -1.0;
  CHECK_THROWS_WITH(pack(r), "pack: memory_limit: must be finite and > 0, got -1");
  r.memory_limit = {64e9, 72e9};
  CHECK_THROWS_WITH(pack(r),
                    "pack: memory_limit: must be one number of bytes for every stage (the "
                    "GPUs are alike), got 2 values");
  r.memory_limit.reset();
  r.schedule = "nope";
  CHECK_THROWS_WITH(pack(r), Catch::StartsWith("unknown schedule \"nope\""));
  r.schedule = "interleaved-1f1b";
  r.chunks = 3;
  r.stages = 16;
  CHECK_THROWS_AS(pack(r), invalid_argument);
  // v = 0 is no chunk count (unset is the schedule's default), and sequence parallelism needs a
  // tensor-parallel group to split over.
  r.schedule = "1f1b";
  r.stages = 2;
  r.chunks = 0u;
  CHECK_THROWS_WITH(pack(r),
                    "pack: chunks: must be at least 1 (leave it unset for the "
                    "schedule's default)");
  r.chunks.reset();
  r.sequence_parallel = true;
  CHECK_THROWS_WITH(pack(r),
                    "pack: sequence_parallel: needs tp > 1 (it splits the activations "
                    "over the tensor-parallel group), not tp=1");
}

TEST_CASE("parse_bytes: a number of bytes with an optional unit", "[plan][pack]") {
  CHECK(parse_bytes("72GiB") == 72.0 * 1024 * 1024 * 1024);
  CHECK(parse_bytes("80 GB") == 80e9);
  CHECK(parse_bytes("7.5e10") == 7.5e10);
  CHECK(parse_bytes("512 KiB") == 512.0 * 1024);
  CHECK(parse_bytes("1B") == 1.0);
  CHECK_FALSE(parse_bytes("").has_value());
  CHECK_FALSE(parse_bytes("GiB").has_value());
  CHECK_FALSE(parse_bytes("-1GiB").has_value());
  CHECK_FALSE(parse_bytes("0").has_value());
  CHECK_FALSE(parse_bytes("inf").has_value());
  CHECK_FALSE(parse_bytes("72 GiBs").has_value());
  CHECK_FALSE(parse_bytes("1e400").has_value());
}

TEST_CASE("pack: the naive baseline and the packers", "[plan][pack]") {
  pack_request r = llama_request({100, 200, 300, 400, 500, 600, 700}, 4, 3, "1f1b");
  const pack_problem pr(r);
  const std::vector<packed_microbatch> naive = pr.naive();
  REQUIRE(naive.size() == 3);
  CHECK(naive[0].sequences == std::vector<std::size_t>{0, 1, 2});
  CHECK(naive[1].sequences == std::vector<std::size_t>{3, 4});
  CHECK(naive[2].sequences == std::vector<std::size_t>{5, 6});
  CHECK(naive[0].tokens == 600);
  CHECK(naive[0].squares == 100.0 * 100 + 200.0 * 200 + 300.0 * 300);
  // Balanced by weight: the heaviest sequences spread over the micro-batches.
  const auto bal = pr.balanced(3);
  REQUIRE(bal.has_value());
  std::uint64_t most = 0;
  std::uint64_t least = ~std::uint64_t{0};
  for (const packed_microbatch& mb : *bal) {
    most = std::max(most, mb.tokens);
    least = std::min(least, mb.tokens);
  }
  CHECK(most - least <= 200);
  // With a token budget: the fewest micro-batches first-fit decreasing reaches, and a naive
  // baseline of equal counts within the budget.
  r.microbatches.reset();
  r.tokens_per_microbatch = 1000;
  const pack_problem pb(r);
  CHECK(pb.fewest_microbatches() == 3);  // 700+300, 600+400, 500+200+100
  for (const packed_microbatch& mb : pb.naive()) {
    CHECK(mb.tokens <= 1000);
  }
  const pack_result res = pack(r);
  for (const packed_microbatch& mb : res.microbatches) {
    CHECK(mb.tokens <= 1000);
  }
  check_produced(res, 4, 7);
  CHECK(res.chosen.step_time_s <= res.baseline.step_time_s);
}

TEST_CASE("pack: equal lengths reproduce the uniform numbers exactly", "[plan][pack]") {
  // 16 sequences of 4096 tokens in 8 micro-batches: the job of b = 2 sequences of s = 4096, as
  // the planner's make_job_costs gives it, generated, timed and checked without any factor.
  for (const std::string name : {"1f1b", "zb-h1", "interleaved-1f1b", "zb-auto"}) {
    INFO(name);
    pack_request req = llama_request(std::vector<std::uint64_t>(16, 4096), 4, 8, name);
    req.search_evaluations = 0;
    const pack_problem problem(req);
    const pack_result r = problem.solve();
    const auto [job, lay] = uniform_job(req, problem);
    const placement& pl = problem.layout_placement();
    const std::uint32_t p = pl.stages();
    const std::uint32_t v = pl.chunks();
    const job_costs jc = make_job_costs(job, lay, token_counts::uniform(4096, 2),
                                        recompute_kind::selective, problem.partition(), pl);
    const auto [costs, plain] = inline_recompute(jc.costs, jc.memory, p, v);
    detail::job_schedule_spec spec;
    spec.stages = p;
    spec.microbatches = 8;
    spec.chunks = v;
    spec.recompute = recompute_kind::selective;
    spec.costs = costs;
    spec.memory = plain;
    spec.memory_limit = problem.memory_limit();
    const schedule s =
        detail::generate_job_schedule(spec, default_registry(), default_registry().at(name));
    const double makespan = simulate(s, costs).makespan;
    const memory_report mem = check_memory(s, jc.memory);
    CHECK(r.baseline.step_time_s == makespan);
    for (stage_index k = 0; k < p; ++k) {
      CHECK(r.baseline.peak_memory_bytes[k] == mem.stages[k].peak);
    }
    for (const packed_microbatch& mb : r.baseline_microbatches) {
      CHECK(mb.tokens == 8192);
    }
    // The chosen packing may be another one (a light micro-batch at the ends shortens the
    // warm-up and the drain), never a slower one.
    CHECK_FALSE(r.baseline.better_than(r.chosen));
    check_produced(r, p, 16);
  }
}

TEST_CASE(
    "pack: over the length mixes never slower than the naive baseline nor the best random "
    "order, within the memory limit",
    "[plan][pack][property]") {
  const std::uint32_t p = 4;
  const std::uint32_t m = 8;
  for (const test_support::length_mix& mix : test_support::length_mixes()) {
    const std::vector<std::uint64_t> lengths = test_support::sample_lengths(mix, 32, 1024, 29);
    for (const std::string name : {"1f1b", "zb-h1", "zb-auto"}) {
      INFO(mix.name << ", " << name);
      pack_request req = llama_request(lengths, p, m, name);
      req.search_evaluations = name == "zb-auto" ? 150 : 400;
      const pack_problem problem(req);
      const pack_result r = problem.solve();
      check_produced(r, p, lengths.size());
      const test_support::random_orders_result rnd =
          test_support::best_random_orders(problem, m, name == "zb-auto" ? 16 : 48, 7);
      // Better: fits where the other does not, then a shorter step (where nothing fits, a
      // lower peak).
      CHECK_FALSE(r.baseline.better_than(r.chosen));
      CHECK_FALSE(rnd.best.better_than(r.chosen));
      if (mix.kind != "long-tail") {
        continue;
      }
      REQUIRE(r.chosen.fits);
      CHECK(r.chosen.step_time_s <= r.baseline.step_time_s);
      CHECK(r.chosen.step_time_s <= rnd.best.step_time_s);
      // A limit below the baseline's peak: the schedule returned fits it.
      pack_request lim = req;
      lim.memory_limit = 0.97 * r.baseline.max_peak();
      const pack_result t = pack(lim);
      REQUIRE(t.chosen.fits);
      check_produced(t, p, lengths.size());
      CHECK(t.chosen.max_peak() <= lim.memory_limit.at(0) * (1 + 1e-9));
      if (!default_registry().at(name).searches) {  // zb-auto fits its order to the limit
        CHECK_FALSE(t.baseline.fits);
      }
    }
  }
}

TEST_CASE("pack: a limit nothing meets is reported, not hidden", "[plan][pack]") {
  pack_request req = llama_request({4096, 4096, 65536, 4096}, 4, 2, "1f1b");
  req.memory_limit = 20e9;  // below a quarter of Llama 3 8B's weights and optimizer state
  req.search_evaluations = 8;
  const pack_result r = pack(req);
  CHECK_FALSE(r.chosen.fits);
  CHECK_FALSE(r.baseline.fits);
  CHECK(r.chosen.max_peak() <= r.baseline.max_peak());
}

TEST_CASE("pack: deterministic", "[plan][pack]") {
  const test_support::length_mix mix = test_support::length_mixes()[1];
  pack_request req = llama_request(test_support::sample_lengths(mix, 24, 1024, 3), 4, 8, "zb-h1");
  req.search_evaluations = 100;
  const pack_result a = pack(req);
  const pack_result b = pack(req);
  CHECK(a.microbatches == b.microbatches);
  CHECK(a.order == b.order);
  CHECK(a.chosen.step_time_s == b.chosen.step_time_s);
  CHECK(a.evaluations == b.evaluations);
}

// More memory or faster links never give a slower result: the search runs within memory rungs
// only (the rungs searched under a limit are searched under any larger one) and decides with
// the links free (which packings and orders it tries never depends on them), each result timed
// with them. Limits on a rung and between rungs; the intra-node link 2.2 and 10 times faster.
TEST_CASE("pack: more memory or faster links never give a slower result",
          "[plan][pack][property]") {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  for (const test_support::length_mix& mix : test_support::length_mixes()) {
    if (mix.kind != "long-tail") {
      continue;
    }
    const std::vector<std::uint64_t> lengths = test_support::sample_lengths(mix, 32, 1024, 31);
    for (const std::string name : {"1f1b", "zb-v"}) {
      INFO(mix.name << ", " << name);
      pack_request req = llama_request(lengths, 4, 8, name);
      req.search_evaluations = 60;
      req.threads = 2;
      double previous = std::numeric_limits<double>::infinity();
      for (const double limit : {60.0, 68.0, 70.5, 72.0, 73.0, 76.0, 80.0}) {
        INFO("limit " << limit << " GiB");
        req.memory_limit = limit * gib;
        const pack_result r = pack(req);
        if (!r.chosen.fits) {
          continue;
        }
        CHECK(r.chosen.step_time_s <= previous);
        previous = r.chosen.step_time_s;
      }
      req.memory_limit.reset();
      // At TP 2 the link also times each layer's collectives (and must not move layers).
      for (const std::uint32_t tp : {1u, 2u}) {
        INFO("TP " << tp);
        req.tp = tp;
        double slower = pack(req).chosen.step_time_s;
        for (const double faster : {2.2, 10.0}) {
          INFO("intra-node bandwidth x" << faster);
          pack_request f = req;
          f.cluster.intra_node_bandwidth *= faster;
          f.cluster.intra_node_latency /= faster;
          const double t = pack(f).chosen.step_time_s;
          CHECK(t <= slower);
          slower = t;
        }
      }
    }
  }
}

TEST_CASE("pack: full recompute checks a BW order with the fused sizes, a W order with the split",
          "[plan][pack]") {
  // As the planner (detail::memory_for): 1F1B rebuilds and frees each layer's weight-gradient
  // operands inside its backward; zb-h1's W needs them all kept until it runs.
  for (const std::string name : {"1f1b", "zb-h1"}) {
    INFO(name);
    pack_request req = llama_request(std::vector<std::uint64_t>(16, 4096), 4, 8, name);
    req.recompute = recompute_kind::full;
    req.search_evaluations = 0;
    const pack_problem problem(req);
    const pack_result r = problem.solve();
    const auto [job, lay] = uniform_job(req, problem);
    const placement& pl = problem.layout_placement();
    const job_costs jc = make_job_costs(job, lay, token_counts::uniform(4096, 2),
                                        recompute_kind::full, problem.partition(), pl);
    const bool fused = name == "1f1b";
    CHECK(detail::runs_separate_w(r.sched) == !fused);
    // Equal lengths: the baseline's micro-batches are the planner's, so are its sizes.
    const memory_report mem = check_memory(r.sched, detail::memory_for(jc, r.sched));
    const memory_report split = check_memory(r.sched, jc.memory);
    for (stage_index k = 0; k < 4; ++k) {
      CHECK(r.chosen.peak_memory_bytes[k] == Approx(mem.stages[k].peak).epsilon(1e-12));
      if (fused) {
        CHECK(mem.stages[k].peak < split.stages[k].peak);
      }
    }
    check_produced(r, 4, 16);
  }
}
