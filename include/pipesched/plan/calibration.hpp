#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/model/kernel_calibration.hpp"
#include "pipesched/plan/job.hpp"

// A cluster description calibrated to measurements (`pipesched calibrate`, docs/model.md
// §10.5): from a profiler trace, the GEMM efficiency curve and the memory-bound efficiency
// fitted to its kernels, put into the cluster the trace ran on.

namespace pipesched {

/// The peaks a GPU's measured GEMMs are compared with, by precision
/// (precision_peaks::of_gpu's ratios from its dense bf16 and fp8 peaks).
inline precision_peaks precision_peaks_of(const cluster_spec& gpu) {
  return precision_peaks::of_gpu(gpu.peak_flops_bf16, gpu.peak_flops_fp8);
}

/// A calibrated cluster: the fit, the cluster with it, the peaks used, and what a reader
/// should know about them (one sentence each).
struct cluster_calibration {
  trace_calibration fit;
  precision_peaks peaks;
  cluster_spec cluster;
  std::vector<std::string> notes;
};

/// `gpu` calibrated to a trace's measurements: gemm_efficiency the curve fitted to its GEMMs
/// (each against its precision's peak: the curve is read as the share of the peak a GEMM of
/// that size achieves at any precision), memory_efficiency the memory-bound rate when it was
/// measured, achieved_fraction 1 (the curve now describes the GPU), and the name marked
/// "-calibrated". Everything else, attention_efficiency included, is the gpu's. Throws
/// invalid_argument (fit_trace_calibration) when there is nothing to fit.
inline cluster_calibration calibrate_cluster(const cluster_spec& gpu,
                                             const kernel_measurements& m,
                                             const calibration_options& o = {}) {
  cluster_calibration out;
  out.peaks = precision_peaks_of(gpu);
  out.fit = fit_trace_calibration(m, out.peaks, gpu.hbm_bandwidth, o);
  out.cluster = gpu;
  out.cluster.name = gpu.name + "-calibrated";
  out.cluster.gemm_efficiency = out.fit.gemm_efficiency;
  out.cluster.achieved_fraction = 1.0;
  if (out.fit.memory_efficiency) {
    out.cluster.memory_efficiency = *out.fit.memory_efficiency;
  }
  out.cluster.check("calibrate");

  auto note = [&](auto&&... parts) { out.notes.push_back(detail::concat(parts...)); };
  if (!m.device_kernels) {
    note(
        "a CPU-only run: each op's own time is its kernel time, so the efficiencies are the "
        "CPU's rates against the GPU's peaks (far below 1)");
  }
  if (out.fit.gemms_fitted < out.fit.gemms) {
    note(out.fit.gemms - out.fit.gemms_fitted,
         " fp32 GEMMs (SIMT kernels, no tensor cores) reported but not fitted: the curve "
         "describes the tensor-core GEMMs");
  }
  if (out.fit.gemms_without_peak > 0) {
    note(out.fit.gemms_without_peak,
         " GEMMs left out: their precision is unknown or the GPU has no peak for it");
  }
  if (out.fit.gemms_without_time > 0) {
    note(out.fit.gemms_without_time, " GEMMs left out: they took 0 s at the trace's resolution");
  }
  if (m.gemm_ops_without_shapes > 0) {
    note(m.gemm_ops_without_shapes, " GEMM ops left out: the trace gives no shapes for them");
  }
  if (m.gemm_ops_without_kernels > 0) {
    note(m.gemm_ops_without_kernels,
         " GEMM ops left out: they launched no GEMM kernel (CPU tensors, or empty)");
  }
  if (m.gemm_kernels_outside_ops > 0) {
    note(m.gemm_kernels_outside_ops,
         " GEMM kernels left out: no GEMM op launched them, so their shapes are unknown");
  }
  if (out.fit.shapes_above_peak > 0) {
    note(out.fit.shapes_above_peak,
         " GEMM shapes ran faster than their precision's peak (capped at 1): is the GPU's "
         "peak the one the trace ran on?");
  }
  if (!out.fit.memory_efficiency) {
    note(out.fit.memory_ops == 0
             ? "memory_efficiency not fitted: no elementwise op of known bytes moved enough "
               "to measure the memory-bound rate (kept from the GPU)"
             : "memory_efficiency not fitted: the GPU's hbm_bandwidth is not known (kept)");
  }
  note("attention_efficiency is not fitted from a trace (kept from the GPU)");
  return out;
}

}  // namespace pipesched
