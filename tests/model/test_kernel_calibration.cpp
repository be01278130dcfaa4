#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/model/kernel_calibration.hpp>

using namespace pipesched;

namespace {

op_input tensor_of(std::vector<std::uint64_t> dims, std::string type = "float") {
  return {std::move(dims), std::move(type)};
}

op_input scalar_input() {
  return {{}, "Scalar"};
}

measured_gemm gemm_of(gemm_shape s, gemm_precision p, double seconds) {
  return {"aten::mm", s, p, seconds, 1, 0};
}

}  // namespace

TEST_CASE("kernel_category_of: CUDA kernel names by category", "[model][calibration]") {
  CHECK(kernel_category_of("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_"
                           "align4>(cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)") ==
        kernel_category::gemm);
  CHECK(kernel_category_of("ampere_sgemm_128x128_tn") == kernel_category::gemm);
  CHECK(kernel_category_of("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32") ==
        kernel_category::gemm);
  CHECK(kernel_category_of("void splitKreduce_kernel<float, float, float, float, true>") ==
        kernel_category::gemm);
  CHECK(kernel_category_of("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT") == kernel_category::gemm);
  CHECK(kernel_category_of("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>") ==
        kernel_category::attention);
  CHECK(kernel_category_of("fmha_cutlassF_bf16_aligned_64x64_rf_sm80") ==
        kernel_category::attention);
  CHECK(kernel_category_of("ncclKernel_AllReduce_RING_LL_Sum_float") ==
        kernel_category::communication);
  CHECK(kernel_category_of("void at::native::vectorized_elementwise_kernel<4, at::native::"
                           "CUDAFunctor_add<float>>") == kernel_category::elementwise);
  CHECK(kernel_category_of("void multi_tensor_apply_kernel<TensorListMetadata<4>, "
                           "AdamFunctor<float>>") == kernel_category::elementwise);
  CHECK(kernel_category_of("triton_poi_fused_add_mul_0") == kernel_category::elementwise);
  // fbgemm's embedding kernels say "gemm" in their namespace but are no GEMMs.
  CHECK(kernel_category_of("void fbgemm_gpu::permute_indices_weights_kernel<false, int>") ==
        kernel_category::other);
  CHECK(kernel_category_of("void cub::DeviceRadixSortOnesweepKernel<long>") ==
        kernel_category::other);
  CHECK(is_tf32_kernel("cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align4"));
  CHECK(is_tf32_kernel("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16"));
  CHECK_FALSE(is_tf32_kernel("ampere_sgemm_128x64_nn"));
}

TEST_CASE("op_category_of: CPU op names by category", "[model][calibration]") {
  CHECK(op_category_of("aten::addmm") == kernel_category::gemm);
  CHECK(op_category_of("aten::linear") == kernel_category::gemm);
  CHECK(op_category_of("aten::_scaled_dot_product_flash_attention") == kernel_category::attention);
  CHECK(op_category_of("c10d::allreduce_") == kernel_category::communication);
  CHECK(op_category_of("aten::gelu") == kernel_category::elementwise);
  CHECK(op_category_of("aten::convolution") == kernel_category::other);
  CHECK(op_category_of("autograd::engine::evaluate_function: AddmmBackward0") ==
        kernel_category::other);
  CHECK(op_category_of("Optimizer.step#AdamW.step") == kernel_category::other);
}

TEST_CASE("gemm_shape_of: M, N, K and FLOPs of each GEMM op", "[model][calibration]") {
  CHECK(gemm_shape_of("aten::mm", {tensor_of({64, 32}), tensor_of({32, 16})}) ==
        gemm_shape{1, 64, 16, 32});
  // addmm: bias first; the scalars beta and alpha after.
  const gemm_shape addmm =
      gemm_shape_of("aten::addmm", {tensor_of({512}), tensor_of({1024, 1705}),
                                    tensor_of({1705, 512}), scalar_input(), scalar_input()});
  CHECK(addmm == gemm_shape{1, 1024, 512, 1705});
  CHECK(addmm.flops() == 2.0 * 1024 * 512 * 1705);
  CHECK(gemm_shape_of("aten::bmm", {tensor_of({8, 4, 5}), tensor_of({8, 5, 6})}) ==
        gemm_shape{8, 4, 6, 5});
  CHECK(gemm_shape_of("aten::baddbmm", {tensor_of({8, 4, 6}), tensor_of({8, 4, 5}),
                                        tensor_of({8, 5, 6})}) == gemm_shape{8, 4, 6, 5});
  // linear: input [..., K], weight [N, K]; M is every leading dimension.
  CHECK(gemm_shape_of("aten::linear", {tensor_of({4, 128, 256}), tensor_of({768, 256}),
                                       tensor_of({768})}) == gemm_shape{1, 512, 768, 256});
  // matmul broadcasts its batch dimensions; a vector operand has M or N = 1.
  CHECK(gemm_shape_of("aten::matmul", {tensor_of({4, 1, 3, 5}), tensor_of({6, 5, 2})}) ==
        gemm_shape{24, 3, 2, 5});
  CHECK(gemm_shape_of("aten::matmul", {tensor_of({7}), tensor_of({7, 9})}) ==
        gemm_shape{1, 1, 9, 7});
  CHECK(gemm_shape_of("aten::matmul", {tensor_of({4, 3, 7}), tensor_of({7})}) ==
        gemm_shape{4, 3, 1, 7});
  CHECK(gemm_shape_of("aten::mv", {tensor_of({3, 7}), tensor_of({7})}) == gemm_shape{1, 3, 1, 7});
  CHECK(gemm_operand_index("aten::addmm") == 1);
  CHECK(gemm_operand_index("aten::mm") == 0);
}

TEST_CASE("gemm_shape_of: shapes that do not multiply are refused, naming them",
          "[model][calibration]") {
  CHECK_THROWS_WITH(gemm_shape_of("aten::mm", {tensor_of({4, 8}), tensor_of({16, 2})}),
                    "aten::mm: the shapes do not multiply: [4, 8] by [16, 2] (inner dimensions 8 "
                    "and 16)");
  CHECK_THROWS_WITH(gemm_shape_of("aten::bmm", {tensor_of({4, 8}), tensor_of({8, 2})}),
                    "aten::bmm: input 0 must have 3 dimensions, not [4, 8]");
  CHECK_THROWS_WITH(gemm_shape_of("aten::bmm", {tensor_of({2, 4, 8}), tensor_of({3, 8, 2})}),
                    "aten::bmm: the shapes do not multiply: [2, 4, 8] by [3, 8, 2] (batches 2 "
                    "and 3)");
  CHECK_THROWS_WITH(gemm_shape_of("aten::addmm", {tensor_of({4}), tensor_of({4, 8})}),
                    "aten::addmm: needs at least 3 inputs, the trace gives 2");
  CHECK_THROWS_WITH(gemm_shape_of("aten::linear", {tensor_of({4, 8}), tensor_of({3, 9})}),
                    Catch::Contains("aten::linear: the shapes do not multiply"));
  CHECK_THROWS_WITH(gemm_shape_of("aten::matmul", {tensor_of({2, 3, 4}), tensor_of({5, 4, 6})}),
                    Catch::Contains("batch dimensions 2 and 5 do not broadcast"));
  CHECK_THROWS_AS(gemm_shape_of("aten::add", {tensor_of({2})}), invalid_argument);
}

TEST_CASE("element sizes, precisions and elementwise bytes", "[model][calibration]") {
  CHECK(element_bytes("float") == 4);
  CHECK(element_bytes("c10::BFloat16") == 2);
  CHECK(element_bytes("Scalar") == 0);
  CHECK(gemm_precision_of("c10::BFloat16", false) == gemm_precision::bf16);
  CHECK(gemm_precision_of("float", true) == gemm_precision::tf32);
  CHECK(gemm_precision_of("float", false) == gemm_precision::fp32);
  CHECK_FALSE(gemm_precision_of("double", false).has_value());
  CHECK_FALSE(gemm_precision_of("", false).has_value());
  // add: two reads and a write of 1024 floats.
  CHECK(elementwise_bytes_of(
            "aten::add", {tensor_of({32, 32}), tensor_of({32, 32}), scalar_input()}) == 3 * 4096.0);
  // Broadcast: [32, 32] + [32] reads both and writes [32, 32].
  CHECK(elementwise_bytes_of("aten::mul", {tensor_of({32, 32}), tensor_of({32})}) ==
        4096.0 + 128.0 + 4096.0);
  // copy_ reads its source (bf16) and writes its destination (fp32).
  CHECK(elementwise_bytes_of("aten::copy_", {tensor_of({10}), tensor_of({10}, "c10::BFloat16"),
                                             scalar_input()}) == 40.0 + 20.0);
  CHECK(elementwise_bytes_of("aten::fill_", {tensor_of({10}), scalar_input()}) == 40.0);
  CHECK_FALSE(elementwise_bytes_of("aten::add", {tensor_of({3}, "")}).has_value());
  CHECK_FALSE(elementwise_bytes_of("aten::add", {tensor_of({3}), tensor_of({4})}).has_value());
  CHECK_FALSE(elementwise_bytes_of("aten::mm", {tensor_of({3, 3}), tensor_of({3, 3})}));
}

TEST_CASE("precision_peaks: A100 and H100 ratios from the bf16 peak", "[model][calibration]") {
  const precision_peaks a100 = precision_peaks::of_gpu(312e12, 0.0);
  CHECK(a100.of(gemm_precision::bf16) == 312e12);
  CHECK(a100.of(gemm_precision::fp16) == 312e12);
  CHECK(a100.of(gemm_precision::tf32) == 156e12);
  CHECK(a100.of(gemm_precision::fp32) == 19.5e12);
  CHECK(a100.of(gemm_precision::fp8) == 0.0);
}

TEST_CASE("isotonic_fit: pools falling neighbours into their weighted mean",
          "[model][calibration]") {
  // 0.5 after 0.6 (equal weights) pool to 0.55; then 0.3 falls below it: the three pool to
  // (0.6 + 0.5 + 2 * 0.3) / 4 = 0.425 with weight 4 against 0.1 before.
  const std::vector<double> v = {0.1, 0.6, 0.5, 0.3, 0.9};
  const std::vector<double> w = {1, 1, 1, 2, 1};
  const std::vector<double> fit = isotonic_fit(v, w);
  REQUIRE(fit.size() == 5);
  CHECK(fit[0] == Approx(0.1));
  CHECK(fit[1] == Approx(0.425));
  CHECK(fit[2] == Approx(0.425));
  CHECK(fit[3] == Approx(0.425));
  CHECK(fit[4] == Approx(0.9));
  // A monotone input comes back as it is.
  const std::vector<double> up = {0.1, 0.2, 0.2, 0.7};
  CHECK(isotonic_fit(up, std::vector<double>(4, 1.0)) == up);
  // A falling input becomes its weighted mean.
  const std::vector<double> down = {0.8, 0.4};
  const std::vector<double> dw = {1, 3};
  CHECK(isotonic_fit(down, dw) == std::vector<double>{0.5, 0.5});
  CHECK_THROWS_WITH(isotonic_fit(down, std::vector<double>{1.0, 0.0}),
                    "isotonic_fit: value 1 (0.4, weight 0) must be finite with a weight > 0");
}

TEST_CASE("fit_trace_calibration: exact efficiencies, bins, a monotone curve capped at 1",
          "[model][calibration]") {
  kernel_measurements m;
  m.format = "kineto";
  m.device_kernels = true;
  const precision_peaks peaks = precision_peaks::of_gpu(100e12, 0.0);
  // Three sizes a decade apart (one bin per decade): the middle one slower than the first.
  // 2e9 FLOPs in 40 us at 100 TFLOP/s: 2e9 / (40e-6 * 1e14) = 0.5.
  m.gemms.push_back(gemm_of({1, 1000, 1000, 1000}, gemm_precision::bf16, 40e-6));
  // 2e10 FLOPs: one GEMM at 0.4 (500 us), one at 0.2 (1000 us): together 4e10 / (1.5e-3 * 1e14)
  // = 0.2667, the FLOP-weighted harmonic mean (the mean would be 0.3).
  m.gemms.push_back(gemm_of({10, 1000, 1000, 1000}, gemm_precision::bf16, 500e-6));
  m.gemms.push_back(gemm_of({1, 10000, 1000, 1000}, gemm_precision::bf16, 1000e-6));
  // 2e11 FLOPs at the TF32 peak (50 TFLOP/s) in 2 ms: 2e11 / (2e-3 * 5e13) = 2: above the
  // peak, capped at 1.
  m.gemms.push_back(gemm_of({1, 10000, 10000, 1000}, gemm_precision::tf32, 2e-3));
  // Left out: no time, no precision.
  m.gemms.push_back(gemm_of({1, 8, 8, 8}, gemm_precision::bf16, 0.0));
  m.gemms.push_back({"aten::mm", {1, 8, 8, 8}, std::nullopt, 1e-6, 1, 0});
  m.memory_ops.push_back({"aten::add", 64e6, 50e-6, 1, 0});
  m.memory_ops.push_back({"aten::add", 1e3, 1e-6, 1, 0});  // too small to count
  m.seconds_by_category[static_cast<std::size_t>(kernel_category::gemm)] = 3.54e-3;

  calibration_options o;
  o.bins_per_decade = 1;
  const trace_calibration r = fit_trace_calibration(m, peaks, 2e12, o);
  CHECK(r.gemms == 4);
  CHECK(r.gemms_without_time == 1);
  CHECK(r.gemms_without_peak == 1);
  CHECK(r.gemms_by_precision[static_cast<std::size_t>(gemm_precision::bf16)] == 3);
  CHECK(r.gemms_by_precision[static_cast<std::size_t>(gemm_precision::tf32)] == 1);
  REQUIRE(r.shapes.size() == 4);
  CHECK(r.shapes[0].efficiency() == Approx(0.5));
  CHECK(r.shapes[0].achieved() == Approx(50e12));
  // Equal FLOPs: by shape, batch first.
  CHECK(r.shapes[1].shape == gemm_shape{1, 10000, 1000, 1000});
  CHECK(r.shapes[1].efficiency() == Approx(0.2));
  CHECK(r.shapes[2].efficiency() == Approx(0.4));
  CHECK(r.shapes[3].peak == 50e12);
  CHECK(r.shapes[3].efficiency() == Approx(2.0));
  CHECK(r.shapes_above_peak == 1);
  REQUIRE(r.bins.size() == 3);
  CHECK(r.bins[0].measured == Approx(0.5));
  CHECK(r.bins[1].measured == Approx(4.0 / 15.0));
  CHECK(r.bins[1].count == 2);
  CHECK(r.bins[1].size == Approx(2e10));
  CHECK(r.bins[2].measured == Approx(2.0));
  // 0.5 then 0.267 falls: the two bins pool to their FLOPs over their time at the peak,
  // (2e9 + 4e10) / (40e-6 * 1e14 + 1.5e-3 * 1e14) = 4.2e10 / 1.54e11 = 0.273.
  CHECK(r.bins[0].fitted == Approx(4.2e10 / 1.54e11));
  CHECK(r.bins[1].fitted == Approx(4.2e10 / 1.54e11));
  CHECK(r.bins[2].fitted == 1.0);
  REQUIRE(r.gemm_efficiency.points.size() == 3);
  CHECK(r.gemm_efficiency.points[0].first == Approx(2e9));
  CHECK(r.gemm_efficiency.points[2].second == 1.0);
  CHECK_NOTHROW(r.gemm_efficiency.check("test", "gemm_efficiency"));
  CHECK(r.memory_ops == 1);
  CHECK(*r.memory_efficiency == Approx(64e6 / (50e-6 * 2e12)));
  CHECK(r.seconds_by_category[0] == 3.54e-3);
  // Without an HBM bandwidth the rate is measured but no efficiency follows.
  CHECK_FALSE(fit_trace_calibration(m, peaks, 0.0, o).memory_efficiency.has_value());
}

TEST_CASE("fit_trace_calibration: fp32 SIMT GEMMs are fitted only without tensor-core ones",
          "[model][calibration]") {
  const precision_peaks peaks = precision_peaks::of_gpu(100e12, 0.0);
  kernel_measurements m;
  // TF32 at 0.2 of 50 TFLOP/s; fp32 SIMT of the same size at 0.9 of 6.25 TFLOP/s.
  m.gemms.push_back(gemm_of({1, 1000, 1000, 1000}, gemm_precision::tf32, 2e9 / (0.2 * 50e12)));
  m.gemms.push_back(gemm_of({1, 1000, 1000, 1000}, gemm_precision::fp32, 2e9 / (0.9 * 6.25e12)));
  const trace_calibration mixed = fit_trace_calibration(m, peaks, 0.0);
  CHECK(mixed.gemms == 2);
  CHECK(mixed.gemms_fitted == 1);
  REQUIRE(mixed.shapes.size() == 2);
  REQUIRE(mixed.bins.size() == 1);
  CHECK(mixed.bins[0].measured == Approx(0.2));
  m.gemms.erase(m.gemms.begin());
  const trace_calibration simt = fit_trace_calibration(m, peaks, 0.0);
  CHECK(simt.gemms_fitted == 1);
  CHECK(simt.bins[0].measured == Approx(0.9));
}

TEST_CASE("fit_trace_calibration: says why there is nothing to fit", "[model][calibration]") {
  const precision_peaks peaks = precision_peaks::of_gpu(100e12, 0.0);
  kernel_measurements none;
  CHECK_THROWS_WITH(fit_trace_calibration(none, peaks, 0.0),
                    Catch::StartsWith("calibrate: the trace has no GEMM"));
  kernel_measurements no_shapes;
  no_shapes.gemm_ops_without_shapes = 3;
  CHECK_THROWS_WITH(fit_trace_calibration(no_shapes, peaks, 0.0),
                    "calibrate: none of the trace's GEMMs has shapes (3 GEMM ops): record with "
                    "record_shapes=True, or give a legacy trace its shapes file");
  kernel_measurements doubles;
  doubles.gemms.push_back({"aten::mm", {1, 8, 8, 8}, std::nullopt, 1e-6, 1, 0});
  CHECK_THROWS_WITH(fit_trace_calibration(doubles, peaks, 0.0),
                    Catch::Contains("none of the trace's GEMMs (1) has a precision"));
  kernel_measurements instant;
  instant.gemms.push_back(gemm_of({1, 8, 8, 8}, gemm_precision::fp32, 0.0));
  CHECK_THROWS_WITH(fit_trace_calibration(instant, peaks, 0.0),
                    Catch::Contains("took a measurable time"));
  calibration_options bad;
  bad.bins_per_decade = 0;
  CHECK_THROWS_WITH(fit_trace_calibration(instant, peaks, 0.0, bad),
                    "calibrate: bins_per_decade (0) must be in 1 .. 100");
}
