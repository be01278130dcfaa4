#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/calibration_report.hpp>
#include <pipesched/io/profiler_trace.hpp>

using namespace pipesched;

namespace {

// One bf16 GEMM of 2·1024·2048·1024 FLOPs whose kernel took 22 us, and an all-reduce.
const char* const report_trace = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
   "args": {"Input Dims": [[1024, 1024], [1024, 2048]],
            "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2,
   "dur": 1, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
   "pid": 0, "tid": 7, "ts": 20, "dur": 22, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
   "pid": 0, "tid": 9, "ts": 50, "dur": 66, "args": {"correlation": 6}}]})";

struct report_fixture {
  calibration_source src;
  cluster_spec gpu = cluster_preset("a100-sxm-80gb");
  cluster_calibration cal;

  report_fixture() {
    src.trace = "run.json";
    src.gpu = "a100-sxm-80gb";
    src.output = "a100-calibrated.json";
    src.measured = read_profiler_trace(report_trace);
    cal = calibrate_cluster(gpu, src.measured);
  }
};

}  // namespace

TEST_CASE("calibration_to_json: shapes, the curve, time by category, the cluster",
          "[io][calibration_report]") {
  const report_fixture f;
  const nlohmann::json j = calibration_to_json(f.src, f.gpu, f.cal);
  const double e = 2.0 * 1024 * 2048 * 1024 / (22e-6 * 312e12);
  CHECK(j["version"] == 1);
  CHECK(j["mode"] == "trace");
  CHECK(j["trace"]["format"] == "kineto");
  CHECK(j["trace"]["shapes"].is_null());
  CHECK(j["gpu"]["peak_flops"]["bf16"] == 312e12);
  CHECK(j["gpu"]["peak_flops"]["tf32"] == 156e12);
  REQUIRE(j["gemm_shapes"].size() == 1);
  const nlohmann::json& s = j["gemm_shapes"][0];
  CHECK(s["m"] == 1024);
  CHECK(s["n"] == 2048);
  CHECK(s["k"] == 1024);
  CHECK(s["precision"] == "bf16");
  CHECK(s["seconds"].get<double>() == Approx(22e-6));
  CHECK(s["achieved_flops_per_s"].get<double>() == Approx(2.0 * 1024 * 2048 * 1024 / 22e-6));
  CHECK(s["efficiency"].get<double>() == Approx(e));
  CHECK(j["gemm_efficiency"][0][1].get<double>() == Approx(e));
  CHECK(j["gemms"]["by_precision"]["bf16"] == 1);
  CHECK(j["seconds_by_category"]["gemm"].get<double>() == Approx(22e-6));
  CHECK(j["seconds_by_category"]["communication"].get<double>() == Approx(66e-6));
  CHECK(j["memory"]["efficiency"].is_null());
  CHECK(j["output"] == "a100-calibrated.json");
  // The cluster reads back as the calibrated one.
  const cluster_spec back = cluster_spec_from_json(j["cluster"]);
  CHECK(back.gemm_efficiency == f.cal.cluster.gemm_efficiency);
  CHECK(back.name == "a100-sxm-80gb-calibrated");
}

TEST_CASE("calibration_text: every number with its unit", "[io][calibration_report]") {
  const report_fixture f;
  const std::string t = calibration_text(f.src, f.gpu, f.cal);
  CHECK_THAT(t, Catch::StartsWith("calibrate: run.json (kineto format, GPU kernels timed), GPU "
                                  "a100-sxm-80gb\n"));
  CHECK_THAT(t, Catch::Contains("  gemm                22 us   25.0 %\n"));
  CHECK_THAT(t, Catch::Contains("  communication       66 us   75.0 %\n"));
  CHECK_THAT(t, Catch::Contains("  total               88 us\n"));
  CHECK_THAT(t, Catch::Contains("GEMMs measured: 1 in 1 shapes, 1 in the fit; peaks used: bf16 "
                                "312 TFLOP/s (1 GEMMs)\n"));
  CHECK_THAT(t, Catch::Contains("       1    1024    2048    1024     1  4.29 GFLOP      22 us    "
                                "195 TFLOP/s    62.6 % bf16\n"));
  CHECK_THAT(t, Catch::Contains("   4.29 GFLOP      1      22 us    62.6 %    62.6 %\n"));
  CHECK_THAT(t, Catch::Contains("note: attention_efficiency is not fitted from a trace (kept from "
                                "the GPU)\n"));
  CHECK_THAT(t, Catch::EndsWith("wrote a100-calibrated.json: a100-sxm-80gb-calibrated with "
                                "gemm_efficiency (1 points), memory_efficiency 0.8, "
                                "achieved_fraction 1\n"));
}
