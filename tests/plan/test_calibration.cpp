#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/profiler_trace.hpp>
#include <pipesched/plan/calibration.hpp>

using namespace pipesched;

namespace {

// Two GEMMs on an A100: bf16 [1024, 1024] x [1024, 2048] in 22 us, fp32 [4096]^3 on TF32 tensor
// ops in 1.1 ms; an add moving 192 MiB in 100 us.
kernel_measurements a100_measurements() {
  kernel_measurements m;
  m.format = "kineto";
  m.device_kernels = true;
  m.gemms.push_back({"aten::addmm", {1, 1024, 2048, 1024}, gemm_precision::bf16, 22e-6, 2, 2});
  m.gemms.push_back({"aten::mm", {1, 4096, 4096, 4096}, gemm_precision::tf32, 1100e-6, 1, 6});
  m.memory_ops.push_back({"aten::add", 3.0 * 64 * 1024 * 1024, 100e-6, 1, 8});
  return m;
}

}  // namespace

TEST_CASE("calibrate_cluster: the GPU with the fitted curve, each GEMM against its peak",
          "[plan][calibration]") {
  cluster_spec a100 = cluster_preset("a100-sxm-80gb");
  a100.hbm_bandwidth = 2039e9;
  const cluster_calibration c = calibrate_cluster(a100, a100_measurements());
  CHECK(c.peaks.bf16 == 312e12);
  CHECK(c.peaks.tf32 == 156e12);
  const double e_bf16 = 2.0 * 1024 * 2048 * 1024 / (22e-6 * 312e12);
  const double e_tf32 = 2.0 * 4096 * 4096 * 4096 / (1100e-6 * 156e12);
  CHECK(e_bf16 == Approx(0.6257).epsilon(1e-3));
  CHECK(e_tf32 == Approx(0.8009).epsilon(1e-3));
  REQUIRE(c.fit.shapes.size() == 2);
  CHECK(c.fit.shapes[0].efficiency() == Approx(e_bf16));
  CHECK(c.fit.shapes[1].efficiency() == Approx(e_tf32));
  // Two sizes 1.5 decades apart: two bins, already rising, so the curve is the measurements.
  REQUIRE(c.cluster.gemm_efficiency.points.size() == 2);
  CHECK(c.cluster.gemm_efficiency.points[0].first == Approx(2.0 * 1024 * 2048 * 1024));
  CHECK(c.cluster.gemm_efficiency.points[0].second == Approx(e_bf16));
  CHECK(c.cluster.gemm_efficiency.points[1].second == Approx(e_tf32));
  CHECK(c.cluster.gemm_efficiency.at(1e13) == Approx(e_tf32));
  CHECK(c.cluster.memory_efficiency == Approx(3.0 * 64 * 1024 * 1024 / 100e-6 / 2039e9));
  CHECK(c.cluster.achieved_fraction == 1.0);
  CHECK(c.cluster.name == "a100-sxm-80gb-calibrated");
  // Everything else is the GPU's.
  CHECK(c.cluster.peak_flops_bf16 == a100.peak_flops_bf16);
  CHECK(c.cluster.memory_bytes == a100.memory_bytes);
  CHECK(c.cluster.attention_efficiency == a100.attention_efficiency);
  CHECK_NOTHROW(c.cluster.check());
  CHECK(std::find(c.notes.begin(), c.notes.end(),
                  "attention_efficiency is not fitted from a trace (kept from the GPU)") !=
        c.notes.end());
}

TEST_CASE("calibrate_cluster: without an HBM bandwidth, memory_efficiency is kept",
          "[plan][calibration]") {
  cluster_spec a100 = cluster_preset("a100-sxm-80gb");
  a100.hbm_bandwidth = 0.0;
  const cluster_calibration c = calibrate_cluster(a100, a100_measurements());
  CHECK_FALSE(c.fit.memory_efficiency.has_value());
  CHECK(c.cluster.memory_efficiency == a100.memory_efficiency);
  CHECK(std::find(c.notes.begin(), c.notes.end(),
                  "memory_efficiency not fitted: the GPU's hbm_bandwidth is not known (kept)") !=
        c.notes.end());
}

TEST_CASE("calibrate_cluster: a CPU-only trace still fits a valid curve", "[plan][calibration]") {
  const kernel_measurements m = load_profiler_trace(PIPESCHED_TEST_DATA_DIR "/gpt_cpu.trace.json",
                                                    PIPESCHED_TEST_DATA_DIR "/gpt_cpu.shapes.json");
  const cluster_calibration c = calibrate_cluster(cluster_preset("a100-sxm-80gb"), m);
  const auto& points = c.cluster.gemm_efficiency.points;
  REQUIRE(points.size() >= 2);
  for (std::size_t i = 0; i < points.size(); ++i) {
    CHECK(points[i].second > 0.0);
    CHECK(points[i].second <= 1.0);
    if (i > 0) {
      CHECK(points[i].first > points[i - 1].first);
      CHECK(points[i].second >= points[i - 1].second);
    }
  }
  // A CPU against the A100's 19.5 TFLOP/s fp32 peak: far below 1.
  CHECK(c.cluster.gemm_efficiency.ceiling() < 0.1);
  CHECK(c.fit.gemms == 57);
  CHECK(c.fit.gemms_by_precision[static_cast<std::size_t>(gemm_precision::fp32)] == 57);
  CHECK(c.notes.front().rfind("a CPU-only run", 0) == 0);
}

TEST_CASE("calibrate_cluster: nothing to fit is an error saying why", "[plan][calibration]") {
  kernel_measurements m;
  m.seconds_by_category[static_cast<std::size_t>(kernel_category::elementwise)] = 1.0;
  CHECK_THROWS_WITH(calibrate_cluster(cluster_preset("a100-sxm-80gb"), m),
                    Catch::StartsWith("calibrate: the trace has no GEMM"));
}
