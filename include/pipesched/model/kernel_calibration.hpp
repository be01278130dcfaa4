#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/model/efficiency_curve.hpp"

// What a profiler trace measured, and the cluster efficiencies fitted to it (docs/model.md
// §10.5): kernels sorted into categories by name, a GEMM's shape and FLOPs from its op's input
// shapes, an elementwise op's bytes, then each measured GEMM's share of its precision's peak and
// the GEMM efficiency curve (model/efficiency_curve.hpp) through them. The naming rules of
// PyTorch ops and CUDA kernels live here, once: io/profiler_trace.hpp reads the trace formats,
// plan/calibration.hpp puts the fit into a cluster description.

namespace pipesched {

/// Where a kernel's time goes. Memory-bound kernels (norms, activations, softmax, copies, the
/// optimizer's) are `elementwise`; communication is NCCL's collectives and point-to-point.
enum class kernel_category : std::uint8_t { gemm, attention, elementwise, communication, other };

inline constexpr std::array<kernel_category, 5> kernel_categories = {
    kernel_category::gemm, kernel_category::attention, kernel_category::elementwise,
    kernel_category::communication, kernel_category::other};

constexpr std::string_view to_string(kernel_category c) noexcept {
  switch (c) {
    case kernel_category::gemm:
      return "gemm";
    case kernel_category::attention:
      return "attention";
    case kernel_category::elementwise:
      return "elementwise";
    case kernel_category::communication:
      return "communication";
    case kernel_category::other:
      break;
  }
  return "other";
}

/// The arithmetic a GEMM ran in, which decides the peak it is measured against.
enum class gemm_precision : std::uint8_t { fp8, bf16, fp16, tf32, fp32 };

constexpr std::string_view to_string(gemm_precision p) noexcept {
  switch (p) {
    case gemm_precision::fp8:
      return "fp8";
    case gemm_precision::bf16:
      return "bf16";
    case gemm_precision::fp16:
      return "fp16";
    case gemm_precision::tf32:
      return "tf32";
    case gemm_precision::fp32:
      break;
  }
  return "fp32";
}

/// Dense peak FLOP/s per precision of one GPU; 0 where it has none (or it is not known).
struct precision_peaks {
  double fp8 = 0.0;
  double bf16 = 0.0;
  double fp16 = 0.0;
  double tf32 = 0.0;
  double fp32 = 0.0;

  double of(gemm_precision p) const noexcept {
    switch (p) {
      case gemm_precision::fp8:
        return fp8;
      case gemm_precision::bf16:
        return bf16;
      case gemm_precision::fp16:
        return fp16;
      case gemm_precision::tf32:
        return tf32;
      case gemm_precision::fp32:
        break;
    }
    return fp32;
  }

  /// A GPU's peaks from its dense bf16 and fp8 ones, by the ratios of NVIDIA's A100 and H100
  /// data sheets: fp16 tensor ops as fast as bf16, TF32 tensor ops half of it (A100 156 of
  /// 312 TFLOP/s, H100 SXM 494.7 of 989.4), and plain fp32 (SIMT, no tensor cores) a
  /// sixteenth (A100's 19.5 of 312; the H100 SXM's 67 is 1/14.8 of its bf16, so fp32 GEMMs
  /// read about 8 % too efficient there).
  static precision_peaks of_gpu(double bf16_peak, double fp8_peak) noexcept {
    return {fp8_peak, bf16_peak, bf16_peak, bf16_peak / 2.0, bf16_peak / 16.0};
  }
};

namespace detail {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

inline bool has_any(std::string_view s, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](std::string_view p) { return s.find(p) != std::string_view::npos; });
}

/// The op name without torch's namespace ("aten::addmm" -> "addmm").
inline std::string_view op_base_name(std::string_view op) {
  const auto colons = op.rfind("::");
  return colons == std::string_view::npos ? op : op.substr(colons + 2);
}

}  // namespace detail

/// A GPU kernel's category by its name (case-insensitive): NCCL's kernels are communication;
/// flash / fused multi-head attention kernels attention; cuBLAS, cuBLASLt and CUTLASS GEMMs
/// (`gemm`, `gemv`, `xmma`, `nvjet`, `cutlass`, `cublas`, split-K's reduce) GEMM, except
/// fbgemm's embedding kernels; PyTorch's own kernels (`at::native::`), Triton's fused ones and
/// other memory-bound names (elementwise, reduce, norm, softmax, dropout, copy, fill, the
/// optimizer's multi_tensor_apply) elementwise; the rest (embedding tables, sorts, ...) other.
inline kernel_category kernel_category_of(std::string_view kernel_name) {
  std::string n = detail::ascii_lower(kernel_name);
  if (detail::has_any(n, {"nccl", "rccl"})) {
    return kernel_category::communication;
  }
  if (detail::has_any(n, {"flash", "fmha", "attention", "attn"})) {
    return kernel_category::attention;
  }
  for (auto at = n.find("fbgemm"); at != std::string::npos; at = n.find("fbgemm", at)) {
    n.replace(at, 6, "fb");  // fbgemm_gpu's embedding kernels are no GEMMs
  }
  if (detail::has_any(n,
                      {"gemm", "gemv", "xmma", "nvjet", "cutlass", "cublas", "splitkreduce",
                       "triton_tem_fused_mm", "triton_tem_fused_addmm", "triton_tem_fused_bmm"})) {
    return kernel_category::gemm;
  }
  if (detail::has_any(n, {"at::native::", "elementwise", "vectorized", "reduce", "norm", "softmax",
                          "dropout", "copy", "fill", "multi_tensor_apply", "triton_"})) {
    return kernel_category::elementwise;
  }
  return kernel_category::other;
}

/// True when a GEMM kernel's name says it ran TF32 tensor ops on fp32 data (cuBLAS's and
/// CUTLASS's `s1688gemm` / `s16816gemm`, `tensorop_s`, `tf32`), not fp32 SIMT (`sgemm`).
inline bool is_tf32_kernel(std::string_view kernel_name) {
  const std::string n = detail::ascii_lower(kernel_name);
  return detail::has_any(n, {"tf32", "s1688", "s16816", "s1684", "tensorop_s"});
}

/// True for the torch ops whose work is one GEMM or a batch of them: mm, addmm, bmm, baddbmm,
/// matmul, linear, mv, addmv, _addmm_activation, _scaled_mm (gemm_shape_of reads their shapes).
inline bool is_gemm_op(std::string_view op) {
  const std::string_view b = detail::op_base_name(op);
  return b == "mm" || b == "addmm" || b == "bmm" || b == "baddbmm" || b == "matmul" ||
         b == "linear" || b == "mv" || b == "addmv" || b == "_addmm_activation" ||
         b == "_scaled_mm";
}

/// The input of a GEMM op that holds its first matrix operand, whose dtype is the GEMM's: 1
/// for the ops whose added term comes first (addmm, baddbmm, addmv, _addmm_activation), else 0.
inline std::size_t gemm_operand_index(std::string_view op) {
  const std::string_view b = detail::op_base_name(op);
  return b == "addmm" || b == "baddbmm" || b == "addmv" || b == "_addmm_activation" ? 1 : 0;
}

/// An op's category by its name, for a CPU-only run where an op's own time is its kernels'
/// time: GEMM ops (is_gemm_op); scaled_dot_product / flash / efficient attention; collectives
/// (c10d, NCCL, Gloo, all_reduce, ...); the other `aten::` ops elementwise (on a CPU they are
/// memory-bound: copies, activations, norms, reductions, the optimizer's) except convolutions;
/// everything else (autograd's engine, user annotations, module wrappers) other.
inline kernel_category op_category_of(std::string_view op) {
  if (is_gemm_op(op)) {
    return kernel_category::gemm;
  }
  const std::string n = detail::ascii_lower(op);
  if (detail::has_any(
          n, {"c10d::", "nccl", "gloo", "all_reduce", "allreduce", "all_gather", "allgather",
              "reduce_scatter", "all_to_all", "alltoall", "record_param_comms"})) {
    return kernel_category::communication;
  }
  if (detail::has_any(n, {"scaled_dot_product", "flash_attention", "efficient_attention"})) {
    return kernel_category::attention;
  }
  if (n.rfind("aten::", 0) == 0 && !detail::has_any(n, {"conv"})) {
    return kernel_category::elementwise;
  }
  return kernel_category::other;
}

/// One input of an op as torch.profiler records it (`record_shapes=True`): the tensor's
/// dimensions (empty for a scalar, a 0-dim tensor or a tensor list) and its dtype as the
/// profiler spells it ("float", "c10::BFloat16", "Scalar"; empty when not recorded).
struct op_input {
  std::vector<std::uint64_t> dims;
  std::string type;

  friend bool operator==(const op_input&, const op_input&) = default;
};

/// A GEMM: `batch` products of [m, k] by [k, n].
struct gemm_shape {
  std::uint64_t batch = 1;
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;

  /// 2·batch·m·n·k: a multiply-add is two FLOPs.
  double flops() const noexcept {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
           static_cast<double>(k);
  }
  friend auto operator<=>(const gemm_shape&, const gemm_shape&) = default;
};

namespace detail {

inline std::string dims_text(const std::vector<std::uint64_t>& d) {
  std::string out = "[";
  for (std::size_t i = 0; i < d.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(d[i]);
  }
  return out + "]";
}

inline double product(std::span<const std::uint64_t> d) {
  double p = 1.0;
  for (const std::uint64_t x : d) {
    p *= static_cast<double>(x);
  }
  return p;
}

inline std::uint64_t whole(double x, std::string_view op) {
  if (!(x < 1.8e19)) {
    fail(op, ": the shapes are too large (", x, " elements)");
  }
  return static_cast<std::uint64_t>(x);
}

}  // namespace detail

/// The GEMM an op computes from its inputs' dimensions, in torch's argument order: mm
/// [M,K]·[K,N]; addmm and _addmm_activation (bias, [M,K], [K,N]); bmm [B,M,K]·[B,K,N];
/// baddbmm (C, [B,M,K], [B,K,N]); linear ([..., K], weight [N,K]): M the product of the leading
/// dimensions; matmul as torch broadcasts it (a vector operand has M or N = 1, the batch the
/// broadcast of the leading dimensions); mv [M,K]·[K]; addmv (y, [M,K], [K]); _scaled_mm
/// ([M,K], [K,N], ...). Throws invalid_argument naming the op and its dimensions when they are
/// not those of the op (too few inputs, a rank it does not take, inner dimensions that differ:
/// "the shapes do not multiply").
inline gemm_shape gemm_shape_of(std::string_view op, const std::vector<op_input>& inputs) {
  const std::string_view b = detail::op_base_name(op);
  const auto dims_of =
      [&](std::size_t i,
          std::initializer_list<std::size_t> ranks) -> const std::vector<std::uint64_t>& {
    if (i >= inputs.size()) {
      detail::fail(op, ": needs at least ", i + 1, " inputs, the trace gives ", inputs.size());
    }
    const auto& d = inputs[i].dims;
    if (std::find(ranks.begin(), ranks.end(), d.size()) == ranks.end()) {
      std::string want;
      for (const std::size_t r : ranks) {
        want += (want.empty() ? "" : " or ") + std::to_string(r);
      }
      detail::fail(op, ": input ", i, " must have ", want, " dimensions, not ",
                   detail::dims_text(d));
    }
    return d;
  };
  const auto inner = [&](std::uint64_t ka, std::uint64_t kb, const std::vector<std::uint64_t>& a,
                         const std::vector<std::uint64_t>& w) {
    if (ka != kb) {
      detail::fail(op, ": the shapes do not multiply: ", detail::dims_text(a), " by ",
                   detail::dims_text(w), " (inner dimensions ", ka, " and ", kb, ")");
    }
  };
  gemm_shape g;
  const std::size_t first = gemm_operand_index(op);
  if (b == "mm" || b == "addmm" || b == "_addmm_activation" || b == "_scaled_mm") {
    const auto& a = dims_of(first, {2});
    const auto& w = dims_of(first + 1, {2});
    inner(a[1], w[0], a, w);
    g = {1, a[0], w[1], a[1]};
  } else if (b == "bmm" || b == "baddbmm") {
    const auto& a = dims_of(first, {3});
    const auto& w = dims_of(first + 1, {3});
    if (a[0] != w[0]) {
      detail::fail(op, ": the shapes do not multiply: ", detail::dims_text(a), " by ",
                   detail::dims_text(w), " (batches ", a[0], " and ", w[0], ")");
    }
    inner(a[2], w[1], a, w);
    g = {a[0], a[1], w[2], a[2]};
  } else if (b == "mv" || b == "addmv") {
    const auto& a = dims_of(first, {2});
    const auto& x = dims_of(first + 1, {1});
    inner(a[1], x[0], a, x);
    g = {1, a[0], 1, a[1]};
  } else if (b == "linear") {
    const auto& x = dims_of(0, {1, 2, 3, 4, 5, 6, 7, 8});
    const auto& w = dims_of(1, {1, 2});
    const std::uint64_t n = w.size() == 2 ? w[0] : 1;
    inner(x.back(), w.back(), x, w);
    g = {1, detail::whole(detail::product(std::span(x).first(x.size() - 1)), op), n, x.back()};
  } else if (b == "matmul") {
    const auto& a = dims_of(0, {1, 2, 3, 4, 5, 6, 7, 8});
    const auto& w = dims_of(1, {1, 2, 3, 4, 5, 6, 7, 8});
    const std::uint64_t ka = a.back();
    const std::uint64_t kb = w.size() == 1 ? w[0] : w[w.size() - 2];
    inner(ka, kb, a, w);
    const std::uint64_t m = a.size() == 1 ? 1 : a[a.size() - 2];
    const std::uint64_t n = w.size() == 1 ? 1 : w.back();
    // Leading (batch) dimensions broadcast from the right, as torch.matmul does.
    const std::size_t la = a.size() > 2 ? a.size() - 2 : 0;
    const std::size_t lb = w.size() > 2 ? w.size() - 2 : 0;
    double batch = 1.0;
    for (std::size_t i = 0; i < std::max(la, lb); ++i) {
      const std::uint64_t da = i < la ? a[la - 1 - i] : 1;
      const std::uint64_t db = i < lb ? w[lb - 1 - i] : 1;
      if (da != db && da != 1 && db != 1) {
        detail::fail(op, ": the shapes do not multiply: ", detail::dims_text(a), " by ",
                     detail::dims_text(w), " (batch dimensions ", da, " and ", db,
                     " do not broadcast)");
      }
      batch *= static_cast<double>(std::max(da, db));
    }
    g = {detail::whole(batch, op), m, n, ka};
  } else {
    detail::fail(op, ": not a GEMM op (mm, addmm, bmm, baddbmm, matmul, linear, mv, addmv)");
  }
  if (!(g.flops() < 1e30)) {
    detail::fail(op, ": the shapes are too large (", g.flops(), " FLOPs)");
  }
  return g;
}

/// Bytes of one element of a dtype as torch.profiler spells it ("float" 4, "c10::BFloat16" 2,
/// "long int" 8, ...); 0 when unknown (or not a tensor: "Scalar", "TensorList", "").
inline double element_bytes(std::string_view type) {
  static const std::array<std::pair<std::string_view, double>, 22> sizes = {{
      {"float", 4},
      {"double", 8},
      {"c10::Half", 2},
      {"c10::BFloat16", 2},
      {"long", 8},
      {"long int", 8},
      {"int", 4},
      {"short", 2},
      {"short int", 2},
      {"bool", 1},
      {"unsigned char", 1},
      {"signed char", 1},
      {"char", 1},
      {"c10::Float8_e4m3fn", 1},
      {"c10::Float8_e5m2", 1},
      {"c10::Float8_e4m3fnuz", 1},
      {"c10::Float8_e5m2fnuz", 1},
      {"c10::complex<float>", 8},
      {"c10::complex<double>", 16},
      {"float32", 4},
      {"bfloat16", 2},
      {"float16", 2},
  }};
  for (const auto& [name, bytes] : sizes) {
    if (name == type) {
      return bytes;
    }
  }
  return 0.0;
}

/// A GEMM's precision from its operands' dtype: bf16, fp16 and the fp8 formats as they are;
/// fp32 data is tf32 when its kernels ran TF32 tensor ops (`tf32_kernels`, is_tf32_kernel),
/// else fp32; nullopt for any other type (double, integers, unknown).
inline std::optional<gemm_precision> gemm_precision_of(std::string_view type, bool tf32_kernels) {
  if (type == "c10::BFloat16" || type == "bfloat16") {
    return gemm_precision::bf16;
  }
  if (type == "c10::Half" || type == "float16") {
    return gemm_precision::fp16;
  }
  if (type.rfind("c10::Float8", 0) == 0) {
    return gemm_precision::fp8;
  }
  if (type == "float" || type == "float32") {
    return tf32_kernels ? gemm_precision::tf32 : gemm_precision::fp32;
  }
  return std::nullopt;
}

/// True for the ops elementwise_bytes_of knows the traffic of.
inline bool has_bytes_rule(std::string_view op) {
  // Names between spaces, so that looking up " name " matches whole names only.
  static constexpr std::string_view known =
      " add add_ sub sub_ mul mul_ div div_ neg exp sqrt rsqrt abs pow relu relu_ gelu silu silu_"
      " sigmoid tanh gelu_backward silu_backward sigmoid_backward tanh_backward threshold_backward"
      " maximum minimum addcmul_ addcdiv_ lerp_ clamp clamp_min masked_fill masked_fill_ copy_"
      " fill_ zero_ _softmax native_layer_norm native_dropout nan_to_num clone ";
  const std::string_view b = detail::op_base_name(op);
  return op.rfind("aten::", 0) == 0 && !b.empty() &&
         known.find(" " + std::string(b) + " ") != std::string_view::npos;
}

/// Bytes an elementwise op moves through memory, from its inputs (has_bytes_rule): every tensor
/// input read once and one output of their broadcast shape written, each at its element size;
/// copy_ reads its source and writes its destination; fill_ and zero_ write only; the in-place
/// ops write their first input. nullopt when an input's dtype is unknown, the shapes do not
/// broadcast, or the op has no rule (so it is not timed as memory-bound).
inline std::optional<double> elementwise_bytes_of(std::string_view op,
                                                  const std::vector<op_input>& inputs) {
  if (!has_bytes_rule(op) || inputs.empty() || inputs[0].dims.empty()) {
    return std::nullopt;
  }
  const std::string_view b = detail::op_base_name(op);
  const auto bytes_of = [](const op_input& in) -> std::optional<double> {
    const double e = element_bytes(in.type);
    if (e == 0.0) {
      return std::nullopt;
    }
    return e * detail::product(in.dims);
  };
  const auto first = bytes_of(inputs[0]);
  if (!first) {
    return std::nullopt;
  }
  if (b == "fill_" || b == "zero_") {
    return *first;
  }
  if (b == "copy_") {
    if (inputs.size() < 2 || inputs[1].dims.empty()) {
      return std::nullopt;
    }
    const auto src = bytes_of(inputs[1]);
    return src ? std::optional(*first + *src) : std::nullopt;
  }
  // Reads: every tensor input; the write: the broadcast shape at the first input's element size.
  double reads = 0.0;
  std::vector<std::uint64_t> out;
  for (const op_input& in : inputs) {
    if (in.dims.empty()) {
      continue;  // a scalar
    }
    const auto r = bytes_of(in);
    if (!r) {
      return std::nullopt;
    }
    reads += *r;
    if (in.dims.size() > out.size()) {
      out.insert(out.begin(), in.dims.size() - out.size(), 1);
    }
    const std::size_t shift = out.size() - in.dims.size();
    for (std::size_t i = 0; i < in.dims.size(); ++i) {
      std::uint64_t& o = out[shift + i];
      if (o == 1) {
        o = in.dims[i];
      } else if (in.dims[i] != 1 && in.dims[i] != o) {
        return std::nullopt;
      }
    }
  }
  return reads + element_bytes(inputs[0].type) * detail::product(out);
}

/// One GEMM op of a trace: its shape, precision (nullopt: not known or not a floating type
/// with a peak), seconds (its kernels' GPU time summed, split-K reduce and bias copies
/// included; on a CPU-only run the op's own time), kernels launched, and the index of its
/// event in the trace (for messages).
struct measured_gemm {
  std::string op;
  gemm_shape shape;
  std::optional<gemm_precision> precision;
  double seconds = 0.0;
  std::size_t kernels = 0;
  std::size_t event = 0;
};

/// One elementwise op of a trace whose bytes are known (elementwise_bytes_of), with its time
/// as measured_gemm's.
struct measured_memory_op {
  std::string op;
  double bytes = 0.0;
  double seconds = 0.0;
  std::size_t kernels = 0;
  std::size_t event = 0;
};

/// What a profiler trace measured (io/profiler_trace.hpp reads it): the GEMMs with shapes, the
/// elementwise ops with bytes, the time by category (GPU kernels' durations summed over all
/// streams, which may overlap; on a CPU-only run each op's own time, its children's taken
/// out), and what could not be measured.
struct kernel_measurements {
  std::string format;           ///< "kineto" or "legacy"
  bool device_kernels = false;  ///< GPU kernels timed; false: a CPU-only run, op times
  std::vector<measured_gemm> gemms;
  std::vector<measured_memory_op> memory_ops;
  std::array<double, kernel_categories.size()> seconds_by_category{};
  std::size_t gemm_ops_without_shapes = 0;   ///< GEMM ops the trace gives no shapes for
  std::size_t gemm_ops_without_kernels = 0;  ///< GEMM ops that launched nothing (GPU traces)
  std::size_t gemm_kernels_outside_ops = 0;  ///< GEMM kernels no GEMM op launched
  std::size_t events = 0;                    ///< events read
};

/// How calibration fits: GEMMs binned by log10 FLOPs, `bins_per_decade` bins a decade; the
/// memory-bound rate from elementwise ops moving at least `min_memory_bytes` each (smaller
/// ones are launch-latency bound).
struct calibration_options {
  std::uint32_t bins_per_decade = 4;
  double min_memory_bytes = 16.0 * 1024 * 1024;
};

/// GEMMs of one shape and precision: `count` ops of `flops` each took `seconds` together,
/// measured against `peak` FLOP/s.
struct gemm_shape_measurement {
  gemm_shape shape;
  gemm_precision precision = gemm_precision::bf16;
  std::size_t count = 0;
  double flops = 0.0;  ///< per op
  double seconds = 0.0;
  double peak = 0.0;

  double achieved() const noexcept { return flops * static_cast<double>(count) / seconds; }
  double efficiency() const noexcept { return achieved() / peak; }
};

/// One bin of the fit: the GEMMs of FLOPs in [lo, hi), their geometric-mean size, their
/// efficiency (their FLOPs over the peak's time for them: the one efficiency that times the
/// bin's GEMMs in the time they took) and the fitted (monotone, at most 1) value.
struct gemm_efficiency_bin {
  double lo = 0.0;
  double hi = 0.0;
  double size = 0.0;
  std::size_t count = 0;
  double seconds = 0.0;
  double measured = 0.0;
  double fitted = 0.0;
};

/// The result of fit_trace_calibration.
struct trace_calibration {
  calibration_options options;                 ///< as fitted
  std::vector<gemm_shape_measurement> shapes;  ///< by FLOPs, then shape and precision
  std::vector<gemm_efficiency_bin> bins;       ///< by size
  efficiency_curve gemm_efficiency;            ///< one point per bin: (size, fitted)
  std::size_t gemms = 0;                       ///< GEMM ops measured (in `shapes`)
  /// GEMM ops in the bins: all measured, or without the fp32 (SIMT) ones when the trace has
  /// tensor-core GEMMs, which are the ones the curve describes.
  std::size_t gemms_fitted = 0;
  std::array<std::size_t, 5> gemms_by_precision{};  ///< indexed by gemm_precision
  std::size_t gemms_without_time = 0;               ///< took 0 s (below the trace's resolution)
  std::size_t gemms_without_peak = 0;  ///< precision unknown or the GPU has no peak for it
  std::size_t shapes_above_peak = 0;   ///< measured faster than the peak: capped at 1
  std::size_t memory_ops = 0;          ///< elementwise ops in the memory-bound rate
  double memory_bytes = 0.0;
  double memory_seconds = 0.0;
  /// memory_bytes / (memory_seconds · HBM bandwidth), at most 1; nullopt when no op moved
  /// min_memory_bytes or the GPU's HBM bandwidth is not known.
  std::optional<double> memory_efficiency;
  std::array<double, kernel_categories.size()> seconds_by_category{};
};

/// Isotonic regression (pool adjacent violators): the non-decreasing sequence closest to
/// `values` in weighted least squares. Adjacent values that fall are pooled into their
/// weighted mean until none does. Weights must be > 0 and as many as the values.
inline std::vector<double> isotonic_fit(std::span<const double> values,
                                        std::span<const double> weights) {
  if (values.size() != weights.size()) {
    detail::fail("isotonic_fit: ", values.size(), " values but ", weights.size(), " weights");
  }
  struct block {
    double value, weight;
    std::size_t count;
  };
  std::vector<block> blocks;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(weights[i] > 0.0) || !std::isfinite(weights[i]) || !std::isfinite(values[i])) {
      detail::fail("isotonic_fit: value ", i, " (", values[i], ", weight ", weights[i],
                   ") must be finite with a weight > 0");
    }
    blocks.push_back({values[i], weights[i], 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].value > blocks.back().value) {
      const block top = blocks.back();
      blocks.pop_back();
      block& below = blocks.back();
      const double w = below.weight + top.weight;
      below.value = (below.value * below.weight + top.value * top.weight) / w;
      below.weight = w;
      below.count += top.count;
    }
  }
  std::vector<double> out;
  out.reserve(values.size());
  for (const block& b : blocks) {
    out.insert(out.end(), b.count, b.value);
  }
  return out;
}

/// Fits the GEMM efficiency curve to the measured GEMMs and the memory-bound efficiency to the
/// elementwise ops (docs/model.md §10.5). Each GEMM is measured against the peak of its
/// precision (`peaks`); GEMMs of the same shape and precision are reported together. The
/// GEMMs (only the tensor-core ones, fp8 to tf32, when there are any: fp32 SIMT kernels are
/// then reported, not fitted) are binned by log10 FLOPs; a bin's efficiency is its FLOPs over the
/// time its GEMMs would take at the peak (a FLOP-weighted harmonic mean, so the bin's GEMMs timed
/// at it take the time they took); the bins' efficiencies are made non-decreasing by isotonic_fit
/// (weights: the peak's time for each bin) and capped at 1. Throws invalid_argument saying
/// why when there is nothing to fit: no GEMM in the trace, none with shapes, none with a
/// precision the GPU has a peak for, or none that took measurable time.
inline trace_calibration fit_trace_calibration(const kernel_measurements& m,
                                               const precision_peaks& peaks,
                                               double hbm_bandwidth,
                                               const calibration_options& o = {}) {
  if (o.bins_per_decade == 0 || o.bins_per_decade > 100) {
    detail::fail("calibrate: bins_per_decade (", o.bins_per_decade, ") must be in 1 .. 100");
  }
  if (!std::isfinite(o.min_memory_bytes) || o.min_memory_bytes < 0.0) {
    detail::fail("calibrate: min_memory_bytes (", o.min_memory_bytes, ") must be >= 0");
  }
  trace_calibration r;
  r.options = o;
  r.seconds_by_category = m.seconds_by_category;
  // Shapes: (shape, precision) -> the GEMMs of it.
  std::map<std::tuple<double, gemm_shape, gemm_precision>, gemm_shape_measurement> by_shape;
  for (const measured_gemm& g : m.gemms) {
    const double peak = g.precision ? peaks.of(*g.precision) : 0.0;
    if (!(peak > 0.0)) {
      ++r.gemms_without_peak;
      continue;
    }
    if (!(g.seconds > 0.0) || !(g.shape.flops() > 0.0)) {
      ++r.gemms_without_time;
      continue;
    }
    auto& s = by_shape[{g.shape.flops(), g.shape, *g.precision}];
    s.shape = g.shape;
    s.precision = *g.precision;
    s.flops = g.shape.flops();
    s.peak = peak;
    ++s.count;
    s.seconds += g.seconds;
    ++r.gemms;
    ++r.gemms_by_precision[static_cast<std::size_t>(*g.precision)];
  }
  if (r.gemms == 0) {
    const std::size_t seen = m.gemms.size() + m.gemm_ops_without_shapes;
    if (seen == 0 && m.gemm_kernels_outside_ops == 0) {
      detail::fail(
          "calibrate: the trace has no GEMM (no op mm, addmm, bmm, baddbmm, matmul or linear, "
          "no GEMM kernel): nothing to fit the GEMM efficiency to");
    }
    if (m.gemms.empty()) {
      const auto counted = [](std::size_t n, std::string_view what) {
        return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
      };
      std::string seen_text = counted(m.gemm_ops_without_shapes, "GEMM op");
      if (m.gemm_kernels_outside_ops > 0) {
        seen_text += ", " + counted(m.gemm_kernels_outside_ops, "GEMM kernel") + " outside them";
      }
      detail::fail("calibrate: none of the trace's GEMMs has shapes (", seen_text,
                   "): record with record_shapes=True, or give a legacy trace its shapes file");
    }
    if (r.gemms_without_peak > 0 && r.gemms_without_time == 0) {
      detail::fail("calibrate: none of the trace's GEMMs (", m.gemms.size(),
                   ") has a precision the GPU has a peak for (bf16, fp16, tf32, fp32, or fp8 "
                   "with peak_flops_fp8 > 0): their input types are unknown or not floating "
                   "point");
    }
    detail::fail("calibrate: none of the trace's GEMMs (", m.gemms.size(),
                 ") took a measurable time (every duration is 0 at the trace's resolution, or "
                 "the GPU has no peak for the others)");
  }
  for (auto& [key, s] : by_shape) {
    if (s.efficiency() > 1.0) {
      ++r.shapes_above_peak;
    }
    r.shapes.push_back(s);
  }
  // Bins by log10 FLOPs: accumulate FLOPs, the peak's time and log sizes.
  struct acc {
    std::size_t count = 0;
    double seconds = 0.0, flops = 0.0, peak_seconds = 0.0, log_sum = 0.0;
    double smallest = std::numeric_limits<double>::infinity(), largest = 0.0;
  };
  const double per = static_cast<double>(o.bins_per_decade);
  // A SIMT kernel's share of the SIMT peak says nothing of how tensor-core GEMMs fill the
  // machine: with tensor-core GEMMs in the trace, the fp32 ones are reported but not fitted.
  const bool tensor_cores = std::any_of(r.shapes.begin(), r.shapes.end(), [](const auto& s) {
    return s.precision != gemm_precision::fp32;
  });
  std::map<long long, acc> bins;
  for (const gemm_shape_measurement& s : r.shapes) {
    if (tensor_cores && s.precision == gemm_precision::fp32) {
      continue;
    }
    r.gemms_fitted += s.count;
    const auto bin = static_cast<long long>(std::floor(std::log10(s.flops) * per));
    acc& a = bins[bin];
    const double n = static_cast<double>(s.count);
    a.count += s.count;
    a.seconds += s.seconds;
    a.flops += s.flops * n;
    a.peak_seconds += s.seconds * s.peak;
    a.log_sum += std::log10(s.flops) * n;
    a.smallest = std::min(a.smallest, s.flops);
    a.largest = std::max(a.largest, s.flops);
  }
  std::vector<double> measured, weights;
  for (const auto& [bin, a] : bins) {
    gemm_efficiency_bin b;
    b.lo = std::pow(10.0, static_cast<double>(bin) / per);
    b.hi = std::pow(10.0, static_cast<double>(bin + 1) / per);
    // Within its GEMMs' sizes, and exactly theirs when they are all one size (no 1e-16 noise).
    b.size = a.smallest == a.largest
                 ? a.smallest
                 : std::clamp(std::pow(10.0, a.log_sum / static_cast<double>(a.count)), a.smallest,
                              a.largest);
    b.count = a.count;
    b.seconds = a.seconds;
    b.measured = a.flops / a.peak_seconds;
    r.bins.push_back(b);
    measured.push_back(b.measured);
    weights.push_back(a.peak_seconds);
  }
  const std::vector<double> fitted = isotonic_fit(measured, weights);
  for (std::size_t i = 0; i < r.bins.size(); ++i) {
    r.bins[i].fitted = std::min(fitted[i], 1.0);
    r.gemm_efficiency.points.emplace_back(r.bins[i].size, r.bins[i].fitted);
  }
  r.gemm_efficiency.check("calibrate", "gemm_efficiency");
  for (const measured_memory_op& op : m.memory_ops) {
    if (op.bytes >= o.min_memory_bytes && op.bytes > 0.0 && op.seconds > 0.0) {
      ++r.memory_ops;
      r.memory_bytes += op.bytes;
      r.memory_seconds += op.seconds;
    }
  }
  if (r.memory_ops > 0 && hbm_bandwidth > 0.0 && std::isfinite(hbm_bandwidth)) {
    r.memory_efficiency = std::min(1.0, r.memory_bytes / (r.memory_seconds * hbm_bandwidth));
  }
  return r;
}

}  // namespace pipesched
