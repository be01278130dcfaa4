#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#ifdef PIPESCHED_HAVE_ZLIB
#include <zlib.h>
#endif

#include <pipesched/io/profiler_trace.hpp>

using namespace pipesched;

namespace {

// A Kineto trace cut to what calibration reads: two GEMMs of known shapes and kernel times,
// an elementwise add, an all-reduce launched outside any op, a memcpy, flow and metadata
// events. GEMM 1: linear -> addmm, bf16 [1024, 1024] x [1024, 2048], a GEMM kernel of 20 us
// and a split-K reduce of 2 us. GEMM 2: mm, fp32 [4096, 4096] x [4096, 4096] on TF32 tensor
// ops, 1100 us. The add: two [16, 1024, 1024] floats in, one out, 100 us.
const char* const kineto_trace = R"json({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
  "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
     "args": {"External id": 1, "Input Dims": [[1024, 1024], [2048, 1024], [2048]],
              "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 105, "dur": 40,
     "args": {"External id": 2, "Input Dims": [[2048], [1024, 1024], [1024, 2048], [], []],
              "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
              "Call stack": "model.py(12): forward"}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110,
     "dur": 5, "args": {"correlation": 7, "External id": 2}},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 110},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120,
     "dur": 5, "args": {"correlation": 8, "External id": 2}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 300, "dur": 30,
     "args": {"External id": 3, "Input Dims": [[4096, 4096], [4096, 4096]],
              "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 310,
     "dur": 5, "args": {"correlation": 9, "External id": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 400, "dur": 20,
     "args": {"External id": 4, "Input Dims": [[16, 1024, 1024], [16, 1024, 1024], []],
              "Input type": ["float", "float", "Scalar"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 405,
     "dur": 5, "args": {"correlation": 10, "External id": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 500,
     "dur": 5, "args": {"correlation": 11}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 600,
     "dur": 5, "args": {"correlation": 12}},
    {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32",
     "pid": 0, "tid": 7, "ts": 200, "dur": 20, "args": {"correlation": 7, "External id": 2}},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 200, "bp": "e"},
    {"ph": "X", "cat": "kernel", "name": "void splitKreduce_kernel<float, float, float, float>",
     "pid": 0, "tid": 7, "ts": 220, "dur": 2, "args": {"correlation": 8, "External id": 2}},
    {"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>",
     "pid": 0, "tid": 7, "ts": 400, "dur": 1100, "args": {"correlation": 9, "External id": 3}},
    {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
     "pid": 0, "tid": 7, "ts": 1600, "dur": 100, "args": {"correlation": 10, "External id": 4}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
     "pid": 0, "tid": 20, "ts": 1700, "dur": 50, "args": {"correlation": 11}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)",
     "pid": 0, "tid": 7, "ts": 1800, "dur": 3, "args": {"correlation": 12, "bytes": 1024}},
    {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "Traces", "tid": "t", "ts": 0}
  ]
})json";

// The legacy format of torch without Kineto and the shapes file of scripts/record_trace.py:
// linear -> addmm (fp32 [32, 128] x [128, 64], 80 us) and an add of two 1024-float tensors.
const char* const legacy_trace = R"([
{"name": "aten::linear", "ph": "X", "ts": 10, "dur": 100, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::addmm", "ph": "X", "ts": 20, "dur": 80, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::add", "ph": "X", "ts": 200, "dur": 10, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::linear", "ph": "s", "ts": 10, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}
])";

const char* const legacy_shapes = R"({"version": 1, "format": "pipesched-op-shapes",
  "input_type": "float", "ops": [
  {"name": "aten::addmm", "tid": 1, "ts": 20, "input_shapes": [[64], [32, 128], [128, 64], [], []]},
  {"name": "aten::add", "tid": 1, "ts": 200, "input_shapes": [[1024], [1024], []]}]})";

double category_seconds(const kernel_measurements& m, kernel_category c) {
  return m.seconds_by_category[static_cast<std::size_t>(c)];
}

std::string profiler_trace_temp(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / ("pipesched_test_" + name);
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

}  // namespace

TEST_CASE("read_profiler_trace: Kineto GEMMs with their kernels' time, shapes and precision",
          "[io][profiler_trace]") {
  const kernel_measurements m = read_profiler_trace(kineto_trace);
  CHECK(m.format == "kineto");
  CHECK(m.device_kernels);
  REQUIRE(m.gemms.size() == 2);
  // The innermost GEMM op holds the shapes; its kernels, split-K reduce included, its time.
  CHECK(m.gemms[0].op == "aten::addmm");
  CHECK(m.gemms[0].shape == gemm_shape{1, 1024, 2048, 1024});
  CHECK(m.gemms[0].precision == gemm_precision::bf16);
  CHECK(m.gemms[0].seconds == Approx(22e-6));
  CHECK(m.gemms[0].kernels == 2);
  CHECK(m.gemms[0].event == 2);
  CHECK(m.gemms[1].op == "aten::mm");
  CHECK(m.gemms[1].shape == gemm_shape{1, 4096, 4096, 4096});
  CHECK(m.gemms[1].precision == gemm_precision::tf32);
  CHECK(m.gemms[1].seconds == Approx(1100e-6));
  REQUIRE(m.memory_ops.size() == 1);
  CHECK(m.memory_ops[0].op == "aten::add");
  CHECK(m.memory_ops[0].bytes == 3.0 * 4 * 16 * 1024 * 1024);
  CHECK(m.memory_ops[0].seconds == Approx(100e-6));
  CHECK(category_seconds(m, kernel_category::gemm) == Approx(1122e-6));
  CHECK(category_seconds(m, kernel_category::elementwise) == Approx(100e-6));
  CHECK(category_seconds(m, kernel_category::communication) == Approx(50e-6));
  CHECK(category_seconds(m, kernel_category::other) == Approx(3e-6));
  CHECK(category_seconds(m, kernel_category::attention) == 0.0);
  CHECK(m.gemm_ops_without_shapes == 0);
  CHECK(m.gemm_kernels_outside_ops == 0);
}

TEST_CASE("read_profiler_trace: kernels found by External id when launches were cut",
          "[io][profiler_trace]") {
  nlohmann::json j = nlohmann::json::parse(kineto_trace);
  auto& ev = j["traceEvents"];
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& e : ev) {
    if (e.value("cat", "") != "cuda_runtime") {
      kept.push_back(e);
    }
  }
  ev = kept;
  const kernel_measurements m = read_profiler_trace(j.dump());
  REQUIRE(m.gemms.size() == 2);
  CHECK(m.gemms[0].seconds == Approx(22e-6));
  CHECK(m.gemms[1].seconds == Approx(1100e-6));
}

TEST_CASE("read_profiler_trace: GEMMs without shapes or kernels are counted, not measured",
          "[io][profiler_trace]") {
  const char* const trace = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1,
     "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "pid": 1, "tid": 1, "ts": 20, "dur": 10,
     "args": {"Input Dims": [[2, 3, 4], [2, 4, 5]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 40,
     "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_32x32_nn", "pid": 0, "tid": 7, "ts": 50,
     "dur": 4, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_32x32_nn", "pid": 0, "tid": 7, "ts": 60,
     "dur": 4, "args": {"correlation": 2}}]})";
  const kernel_measurements m = read_profiler_trace(trace);
  CHECK(m.gemms.empty());
  CHECK(m.gemm_ops_without_shapes == 1);
  CHECK(m.gemm_ops_without_kernels == 1);  // the bmm: its launch at ts 40 is outside it
  CHECK(m.gemm_kernels_outside_ops == 1);
  CHECK(category_seconds(m, kernel_category::gemm) == Approx(8e-6));
}

TEST_CASE("read_profiler_trace: the legacy format with its shapes file", "[io][profiler_trace]") {
  const kernel_measurements m = read_profiler_trace(legacy_trace, legacy_shapes);
  CHECK(m.format == "legacy");
  CHECK_FALSE(m.device_kernels);
  REQUIRE(m.gemms.size() == 1);
  CHECK(m.gemms[0].op == "aten::addmm");
  CHECK(m.gemms[0].shape == gemm_shape{1, 32, 64, 128});
  CHECK(m.gemms[0].precision == gemm_precision::fp32);
  CHECK(m.gemms[0].seconds == Approx(80e-6));
  CHECK(m.gemms[0].kernels == 0);
  REQUIRE(m.memory_ops.size() == 1);
  CHECK(m.memory_ops[0].bytes == 3 * 4096.0);
  // Each op's own time: linear 20 us around its addmm's 80, both GEMM ops.
  CHECK(category_seconds(m, kernel_category::gemm) == Approx(100e-6));
  CHECK(category_seconds(m, kernel_category::elementwise) == Approx(10e-6));
  // Without the shapes file the GEMM is seen but not measurable.
  const kernel_measurements bare = read_profiler_trace(legacy_trace);
  CHECK(bare.gemms.empty());
  CHECK(bare.gemm_ops_without_shapes == 1);
}

TEST_CASE("read_profiler_trace: malformed traces name the event and the rule",
          "[io][profiler_trace]") {
  CHECK_THROWS_WITH(read_profiler_trace("{\"traceEvents\": ["),
                    Catch::StartsWith("profiler trace: malformed JSON: "));
  CHECK_THROWS_WITH(read_profiler_trace("{\"displayTimeUnit\": \"ms\"}"),
                    "/: no \"traceEvents\": not a Chrome trace of torch.profiler");
  CHECK_THROWS_WITH(read_profiler_trace("42"),
                    "/: must be an object with \"traceEvents\" (Kineto) or an array of events "
                    "(the legacy format), not number");
  CHECK_THROWS_WITH(
      read_profiler_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
        "ts": 5}]})"),
      "/traceEvents/0/dur: missing: the complete event \"aten::mm\" (ph \"X\") needs a duration");
  CHECK_THROWS_WITH(
      read_profiler_trace(R"({"traceEvents": [{"ph": "X", "name": "x", "ts": 5, "dur": -1}]})"),
      "/traceEvents/0/dur: must be a finite number >= 0, not -1");
  CHECK_THROWS_WITH(read_profiler_trace(R"([{"name": "aten::mm", "ts": 5, "dur": 1}])"),
                    "/0: an event needs \"ph\" (its phase: \"X\" for a complete event)");
  CHECK_THROWS_WITH(
      read_profiler_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
        "pid": 1, "tid": 1, "ts": 0, "dur": 9, "args": {"Input Dims": [[4, 8], [16, 2]],
        "Input type": ["float", "float"]}}]})"),
      "/traceEvents/0: aten::mm: the shapes do not multiply: [4, 8] by [16, 2] (inner "
      "dimensions 8 and 16)");
  CHECK_THROWS_WITH(
      read_profiler_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
        "ts": 0, "dur": 9, "args": {"Input Dims": [[4, -8], [8, 2]]}}]})"),
      "/traceEvents/0/args/Input Dims/0/1: must be an integer >= 0, not -8");
  CHECK_THROWS_WITH(
      read_profiler_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
        "ts": 0, "dur": 9, "args": {"Input Dims": [[4, 8], [8, 2]], "Input type": ["float"]}}]})"),
      "/traceEvents/0/args/Input type: must have one type per input (2 in \"Input Dims\"), not 1");
  CHECK_THROWS_WITH(read_profiler_trace(kineto_trace, legacy_shapes),
                    Catch::StartsWith("shapes: given with a Kineto trace"));
}

TEST_CASE("read_profiler_trace: a shapes file that does not match its trace is refused",
          "[io][profiler_trace]") {
  std::string moved = legacy_shapes;
  moved.replace(moved.find("\"ts\": 20"), 8, "\"ts\": 21");
  CHECK_THROWS_WITH(read_profiler_trace(legacy_trace, moved),
                    "shapes: /ops/0: no event \"aten::addmm\" on thread 1 at ts 21 in the trace: "
                    "the shapes file is not this trace's");
  std::string twice = legacy_shapes;
  const std::string add = "\"name\": \"aten::add\", \"tid\": 1, \"ts\": 200";
  twice.replace(twice.find(add), add.size(), "\"name\": \"aten::addmm\", \"tid\": 1, \"ts\": 20");
  CHECK_THROWS_WITH(read_profiler_trace(legacy_trace, twice),
                    "shapes: /ops/1: describes the event \"aten::addmm\" at ts 20 a second time");
  CHECK_THROWS_WITH(
      read_profiler_trace(legacy_trace, R"({"version": 1, "format": "x", "ops": []})"),
      Catch::StartsWith("shapes: /format: must be \"pipesched-op-shapes\""));
  CHECK_THROWS_WITH(read_profiler_trace(legacy_trace, "[1"),
                    Catch::StartsWith("shapes: malformed JSON"));
}

TEST_CASE("load_profiler_trace: files by path, gzip read when zlib is built in",
          "[io][profiler_trace]") {
  const std::string trace = profiler_trace_temp("legacy.json", legacy_trace);
  const std::string shapes = profiler_trace_temp("legacy.shapes.json", legacy_shapes);
  CHECK(load_profiler_trace(trace, shapes).gemms.size() == 1);
  const std::string bad = profiler_trace_temp("bad.shapes.json", "[1");
  CHECK_THROWS_WITH(load_profiler_trace(trace, bad), Catch::StartsWith(bad + ": malformed JSON"));
  const std::string broken = profiler_trace_temp("broken.json", "[{\"ph\": 1}]");
  CHECK_THROWS_WITH(load_profiler_trace(broken), broken + ": /0/ph: must be a string, not number");
  // gzip: compressed here with zlib's own gzip writer.
  const std::string gz_path =
      (std::filesystem::temp_directory_path() / "pipesched_test_kineto.json.gz").string();
#ifdef PIPESCHED_HAVE_ZLIB
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  REQUIRE(gz != nullptr);
  const std::string text = kineto_trace;
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  const kernel_measurements m = load_profiler_trace(gz_path);
  CHECK(m.gemms.size() == 2);
  CHECK(m.gemms[1].seconds == Approx(1100e-6));
  // A truncated gzip file is an error, not a shorter trace.
  std::string bytes = read_text_file(gz_path);
  const std::string cut = profiler_trace_temp("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_profiler_trace(cut), Catch::StartsWith(cut + ": not a valid gzip file"));
#else
  std::ofstream(gz_path, std::ios::binary) << std::string("\x1f\x8b\x08\x00", 4);
  CHECK_THROWS_WITH(load_profiler_trace(gz_path),
                    gz_path +
                        ": is gzip-compressed, and this build of pipesched reads no gzip "
                        "(built without zlib): decompress it first (gunzip -k " +
                        gz_path + ")");
#endif
}

TEST_CASE("load_profiler_trace: the committed CPU trace of a small GPT", "[io][profiler_trace]") {
  const kernel_measurements m = load_profiler_trace(PIPESCHED_TEST_DATA_DIR "/gpt_cpu.trace.json",
                                                    PIPESCHED_TEST_DATA_DIR "/gpt_cpu.shapes.json");
  CHECK(m.format == "legacy");
  CHECK_FALSE(m.device_kernels);
  // 12 addmm (inside linear), 27 mm and 18 bmm: every innermost GEMM op has its shapes.
  CHECK(m.gemms.size() == 57);
  CHECK(m.gemm_ops_without_shapes == 0);
  for (const measured_gemm& g : m.gemms) {
    CHECK(g.precision == gemm_precision::fp32);
    CHECK(g.shape.flops() > 0.0);
  }
  CHECK(category_seconds(m, kernel_category::gemm) > category_seconds(m, kernel_category::other));
  CHECK_FALSE(m.memory_ops.empty());
}
