#include <algorithm>
#include <cstdint>

#include <catch2/catch.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/plan/job_model.hpp>
#include <pipesched/plan/planner.hpp>

using namespace pipesched;

// The data-parallel reduction of each stage: the chunk's gradients go in dp_bucket_count
// buckets, bucket j of k ready j/k of the way through the chunk's last backward, one bucket
// after another on the ring.
TEST_CASE("job model: the gradient buckets overlap the last backward", "[plan][job_model]") {
  training_job job;
  job.model = model_preset("llama3-8b");
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = 16;
  plan_options o;
  o.fixed.tp = 1;
  o.fixed.pp = 1;
  o.fixed.schedule = "1f1b";
  o.fixed.micro_batch = 1;
  o.fixed.recompute = recompute_kind::full;
  o.threads = 1;
  const plan_result r = plan(job, o);
  REQUIRE(r.plans.size() == 1);
  const plan_entry& e = r.plans.front();
  const simulation_result sim = simulate(e.sched, e.costs, {true, false, false});
  const job_costs jc = make_job_costs(job, e.choice.layout, e.choice.recompute, e.choice.partition,
                                      e.sched.layout());
  const std::vector<double> ends = detail::dp_reduce_ends(e.sched, sim, jc);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0] == e.stages[0].dp_reduce_end_s);
  // The last gradient op of the one chunk.
  double start = -1.0;
  double end = -1.0;
  const auto ops = e.sched.ops(0);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if ((ops[i].kind == op_kind::backward_full || ops[i].kind == op_kind::backward_weight) &&
        sim.ops[0][i].end > end) {
      start = sim.ops[0][i].start;
      end = sim.ops[0][i].end;
    }
  }
  REQUIRE(end > start);
  const std::uint32_t k = dp_bucket_count(jc.chunks[0]);
  REQUIRE(k == job.model.layers + 1);  // a bucket a layer, one for the embedding and head
  const double r1 = jc.dp_reduce_time(jc.gradient_bytes[0] / k);
  REQUIRE(r1 > 0.0);
  // Not hidden at all would end at end + k·r1; hidden but the last bucket at end + r1.
  CHECK(ends[0] >= end + r1 * (1.0 - 1e-12));
  CHECK(ends[0] <= end + k * r1 * (1.0 + 1e-12));
  // Bucket by bucket: each starts when it is ready and the ring is free.
  // The reductions before the last op ends slow it by the cluster's overlap_slowdown.
  double t = 0.0;
  double beside = 0.0;
  for (std::uint32_t j = 1; j <= k; ++j) {
    const double from = std::max(t, start + (end - start) * j / k);
    t = from + r1;
    beside += std::clamp(end - from, 0.0, r1);
  }
  REQUIRE(beside > 0.0);
  REQUIRE(jc.overlap_slowdown == job.cluster.overlap_slowdown);
  CHECK(ends[0] == Approx(std::max(t, end + jc.overlap_slowdown * beside)).epsilon(1e-12));
  CHECK(e.dp_exposed_s == Approx(std::max(e.makespan_s, ends[0]) - e.makespan_s));
  // A slowdown so large the slowed compute outlasts the ring sets the end; none, the ring alone.
  job_costs slow = jc;
  slow.overlap_slowdown = 1.0;
  CHECK(detail::dp_reduce_ends(e.sched, sim, slow)[0] == Approx(std::max(t, end + beside)));
  job_costs free = jc;
  free.overlap_slowdown = 0.0;
  CHECK(detail::dp_reduce_ends(e.sched, sim, free)[0] == Approx(t).epsilon(1e-12));
}
