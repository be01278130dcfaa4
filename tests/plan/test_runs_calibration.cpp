#include <catch2/catch.hpp>

#include <pipesched/plan/runs_calibration.hpp>

using namespace pipesched;

namespace {

reference_run run_of(const char* id, std::uint32_t tp, std::uint32_t pp, std::uint64_t gpus) {
  reference_run r;
  r.id = id;
  plan_request& q = r.request;
  q.model = model_preset("llama3-8b");
  q.model.layers = 8;
  q.cluster = cluster_preset("h100-sxm-80gb");
  q.gpus = gpus;
  q.sequence = 4096;
  q.global_batch = 32;
  q.options.fixed.tp = tp;
  q.options.fixed.pp = pp;
  q.options.fixed.micro_batch = 1;
  q.options.fixed.schedule = "1f1b";
  q.options.fixed.recompute = recompute_kind::none;
  q.options.threads = 1;
  return r;
}

}  // namespace

TEST_CASE("calibrate: the scales that reproduce runs measured on a slower cluster",
          "[plan][calibrate]") {
  const cluster_spec base = cluster_preset("h100-sxm-80gb");
  cluster_spec slow = base;
  slow.achieved_fraction = 0.8 * base.achieved_fraction;
  slow.intra_node_bandwidth *= 0.5;
  slow.inter_node_bandwidth *= 0.5;
  std::vector<reference_run> runs = {run_of("a", 8, 1, 8), run_of("b", 2, 2, 8),
                                     run_of("c", 1, 4, 16), run_of("d", 4, 2, 16)};
  for (reference_run& r : runs) {
    r.measured = detail::predict(r, slow).first.predicted;  // what that cluster would measure
  }
  const runs_calibration c = calibrate_runs(runs, base);
  CHECK(c.compute_scale == Approx(0.8).epsilon(0.01));
  CHECK(c.network_scale == Approx(0.5).epsilon(0.02));
  CHECK(mean_abs_error(c.before) > 0.05);
  CHECK(mean_abs_error(c.after) < 0.005);
  CHECK(c.cluster.achieved_fraction == Approx(0.8 * base.achieved_fraction).epsilon(0.01));
  // The compute scale alone when asked.
  const runs_calibration only = calibrate_runs(runs, base, {false});
  CHECK(only.network_scale == 1.0);
  CHECK(mean_abs_error(only.after) < mean_abs_error(only.before));
}

TEST_CASE("calibrate: metrics by their sources' FLOP counts", "[plan][calibrate]") {
  training_job job;
  job.model.hidden = 12288;
  job.model.layers = 96;
  job.model.heads = 96;
  job.model.ffn = 4 * 12288;
  job.model.vocab = 51200;
  job.sequence = 2048;
  job.global_batch = 1536;
  // Narayanan et al.'s Eq. 3 for GPT-3 175B at batch 1536.
  CHECK(narayanan_hardware_flops(job) ==
        Approx(96.0 * 1536 * 2048 * 96 * 12288.0 * 12288 *
               (1 + 2048 / (6.0 * 12288) + 51200 / (16.0 * 96 * 12288))));
  // Megatron-LM's count: the forward's 24h² + 4sh per token and layer, times 3, and the logits.
  const double per_token =
      3 * (96 * (24.0 * 12288 * 12288 + 4.0 * 2048 * 12288) + 2.0 * 12288 * 51200);
  CHECK(megatron_model_flops(job) == Approx(per_token * 1536 * 2048));
}

TEST_CASE("calibrate: refuses what it cannot fit", "[plan][calibrate]") {
  const cluster_spec base = cluster_preset("h100-sxm-80gb");
  CHECK_THROWS_WITH(calibrate_runs({}, base), Catch::Contains("no run"));
  reference_run r = run_of("zero", 8, 1, 8);
  r.measured = 0.0;
  CHECK_THROWS_WITH(calibrate_runs({r}, base), Catch::Contains("\"zero\": step_time_s must be"));
}
