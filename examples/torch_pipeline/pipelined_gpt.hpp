#pragma once

// The GPT of gpt.hpp as a pipesched executor (context form), with three ways to split the
// backward (docs/torch_pipeline.md), and the unpipelined reference its gradients are checked
// against. Shared by torch_pipeline (threads) and torch_pipeline_mpi (one rank per stage).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <torch/torch.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pipesched/exec/executor.hpp>
#include <pipesched/ir/placement.hpp>
#include <pipesched/ir/timed_op.hpp>
#include <pipesched/model/cost_model.hpp>

#include "gpt.hpp"

namespace gpt {

/// How a chunk's backward is split into B (input gradient) and W (weight gradient).
enum class split_mode {
  /// BW is one autograd::grad over the chunk's input and parameters (the reference cost of a
  /// backward). B and W ops, which this mode does not define, run as in `autograd`.
  fused,
  /// B: autograd::grad over the input, graph retained; W: autograd::grad over the parameters,
  /// which walks the graph again and recomputes the activation gradients B already had.
  autograd,
  /// B: one autograd::grad over the input and the cheap parameters (LayerNorm, embeddings),
  /// graph released; each linear layer leaves (X, dY) in the micro-batch's store. W: only the
  /// weight-gradient products dW = dYᵀX, db = Σ dY from that store.
  store,
};

inline const char* to_string(split_mode m) {
  switch (m) {
    case split_mode::fused:
      return "fused";
    case split_mode::autograd:
      return "autograd";
    case split_mode::store:
      return "store";
  }
  return "?";
}

/// The pipelined model: a pipesched executor of the context form. The op_context names the op's
/// global chunk g (model.chunks[g]) and whether it is the first (reads the tokens) or the last
/// (computes the loss), so the executor keeps no copy of the schedule or its placement. Each
/// stage touches only the state of its own chunks, so run() is safe to call concurrently for
/// different stages.
class pipelined_gpt {
 public:
  struct message {
    torch::Tensor t;  ///< an activation (F) or a gradient (B); undefined when empty
  };

  /// `perturb`: scale the loss by 1 + perturb (0: exact; a test that the check can fail).
  pipelined_gpt(model& m, const dataset& data, split_mode mode, double perturb = 0.0)
      : model_(&m),
        data_(&data),
        mode_(mode),
        chunks_(m.chunks.size()),
        scale_((1.0 + perturb) / static_cast<double>(static_cast<std::int64_t>(data.inputs.size()) *
                                                     m.cfg.batch * m.cfg.seq)) {
    for (std::size_t g = 0; g < chunks_.size(); ++g) {
      chunk_state& c = chunks_[g];
      const chunk& ch = *m.chunks[g];
      c.params = ch.parameters();
      for (std::size_t i = 0; i < c.params.size(); ++i) {
        c.index_of.emplace(c.params[i].unsafeGetTensorImpl(), i);
        c.all_index.push_back(i);
      }
      std::unordered_map<const void*, bool> deferred;
      for (const split_linear* l : ch.linears()) {
        deferred[l->weight.unsafeGetTensorImpl()] = true;
        deferred[l->bias.unsafeGetTensorImpl()] = true;
      }
      for (std::size_t i = 0; i < c.params.size(); ++i) {
        if (!deferred.contains(c.params[i].unsafeGetTensorImpl())) {
          c.immediate.push_back(c.params[i]);
          c.immediate_index.push_back(i);
        }
      }
      c.linears = ch.linears().size();
      c.weight_share = flops_of(ch, m.cfg).weight_share();
    }
    zero_grad();
  }

  message run(const pipesched::op_context& ctx, message&& in) {
    if (ctx.chunk >= chunks_.size()) {
      throw std::invalid_argument("global chunk " + std::to_string(ctx.chunk) +
                                  " is outside the model (" + std::to_string(chunks_.size()) +
                                  " chunks)");
    }
    return run_chunk(ctx.chunk, ctx.first_chunk, ctx.last_chunk, ctx.o, std::move(in));
  }

  /// Zeroes the accumulated gradients and the loss (the start of a training step).
  void zero_grad() {
    torch::NoGradGuard no_grad;
    for (auto& c : chunks_) {
      c.grads.clear();
      for (const auto& p : c.params) {
        c.grads.push_back(torch::zeros_like(p));
      }
      c.loss = 0.0;
      c.bw_input_seconds.clear();
    }
  }
  split_mode mode() const { return mode_; }
  /// Loss summed over the micro-batches since zero_grad() (kept by each route's last chunk).
  double loss() const {
    double sum = 0.0;
    for (const auto& c : chunks_) {
      sum += c.loss;
    }
    return sum;
  }
  /// Global chunks, every route's copy of the model.
  std::size_t chunks() const { return chunks_.size(); }
  /// Accumulated weight gradients of global chunk g, in chunk->parameters() order.
  const std::vector<torch::Tensor>& grads(pipesched::global_chunk g) const {
    return chunks_.at(g).grads;
  }
  std::vector<torch::Tensor>& grads(pipesched::global_chunk g) { return chunks_.at(g).grads; }
  /// Global chunk g's accumulated gradients flattened, and put back: what route_copies sums
  /// over a block's copies.
  std::vector<double> flat_gradients(pipesched::global_chunk g) const {
    std::vector<double> flat;
    for (const torch::Tensor& t : chunks_.at(g).grads) {
      const torch::Tensor c = t.contiguous();
      flat.insert(flat.end(), c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    }
    return flat;
  }
  void assign_flat_gradients(pipesched::global_chunk g, std::span<const double> flat) {
    torch::NoGradGuard no_grad;
    std::size_t at = 0;
    for (torch::Tensor& t : chunks_.at(g).grads) {
      const auto n = static_cast<std::size_t>(t.numel());
      if (flat.size() - at < n) {
        throw std::length_error("assign_flat_gradients: chunk " + std::to_string(g) +
                                " has more gradient values than " + std::to_string(flat.size()));
      }
      // from_blob only reads here: copy_ copies out of it.
      t.copy_(torch::from_blob(const_cast<double*>(flat.data() + at), t.sizes(), torch::kDouble));
      at += n;
    }
    if (at != flat.size()) {
      throw std::length_error("assign_flat_gradients: chunk " + std::to_string(g) + " has " +
                              std::to_string(at) + " gradient values, not " +
                              std::to_string(flat.size()));
    }
  }
  /// Graphs or stores still held for a B or W that never ran (0 after a complete iteration).
  std::size_t stashed() const {
    std::size_t n = 0;
    for (const auto& c : chunks_) {
      n += c.after_f.size() + c.after_b.size() + c.deferred.size();
    }
    return n;
  }
  /// How long the B half of the BW op of (g, mb) took, in seconds (for profiles of schedules
  /// that fuse B and W); nullopt when that op did not run since zero_grad(). In `fused` mode
  /// the BW is one call: its B half is its time times the B share of its FLOPs (flops_of).
  std::optional<double> bw_input_seconds(pipesched::global_chunk g, std::uint32_t mb) const {
    const auto& m = chunks_.at(g).bw_input_seconds;
    const auto it = m.find(mb);
    return it == m.end() ? std::nullopt : std::optional<double>(it->second);
  }
  /// `store` mode: the largest store one micro-batch's B of global chunk g left for its W, in
  /// bytes (each tensor storage counted once); 0 before any.
  std::size_t store_bytes(pipesched::global_chunk g) const { return chunks_.at(g).store_bytes; }

 private:
  /// What F keeps for B (input leaf and output), and, in `autograd` mode, B for W (output and
  /// its gradient): the autograd graph between them stays alive through `output`.
  struct saved {
    torch::Tensor input;     ///< F's input as a leaf requiring grad (undefined for chunk 0)
    torch::Tensor output;    ///< F's output, or the micro-batch's loss for the last chunk
    torch::Tensor grad_out;  ///< dL/d(output), set by B
  };
  struct chunk_state {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> grads;
    std::unordered_map<const void*, std::size_t> index_of;  ///< TensorImpl -> params position
    std::vector<std::size_t> all_index;                     ///< 0, 1, ..., params.size() - 1
    std::vector<torch::Tensor> immediate;  ///< `store`: gradients B computes (norms, embeddings)
    std::vector<std::size_t> immediate_index;
    std::size_t linears = 0;
    double weight_share = 0.0;
    std::map<std::uint32_t, saved> after_f;  ///< per micro-batch, between F and B
    std::map<std::uint32_t, saved> after_b;  ///< `autograd`: per micro-batch, between B and W
    std::map<std::uint32_t, std::vector<weight_grad_task>> deferred;  ///< `store`: B to W
    std::map<std::uint32_t, double> bw_input_seconds;
    std::size_t store_bytes = 0;
    double loss = 0.0;
  };
  using clock = std::chrono::steady_clock;

  message run_chunk(
      pipesched::global_chunk g, bool first, bool last, const pipesched::op& o, message&& in) {
    chunk_state& c = chunks_[g];
    switch (o.kind) {
      case pipesched::op_kind::forward:
        return forward(g, c, first, last, o.mb, std::move(in));
      case pipesched::op_kind::backward_input:
        return mode_ == split_mode::store
                   ? input_gradient_store(g, c, first, last, o.mb, std::move(in))
                   : input_gradient(c, first, last, o.mb, std::move(in));
      case pipesched::op_kind::backward_weight:
        if (mode_ == split_mode::store) {
          weight_gradient_store(g, c, o.mb);
        } else {
          weight_gradient_autograd(c, o.mb);
        }
        return {};
      case pipesched::op_kind::backward_full: {
        const auto t0 = clock::now();
        if (mode_ == split_mode::fused) {
          message gx = fused_backward(c, first, last, o.mb, std::move(in));
          const double d = std::chrono::duration<double>(clock::now() - t0).count();
          c.bw_input_seconds[o.mb] = d * (1.0 - c.weight_share);
          return gx;
        }
        const bool store = mode_ == split_mode::store;
        message gx = store ? input_gradient_store(g, c, first, last, o.mb, std::move(in))
                           : input_gradient(c, first, last, o.mb, std::move(in));
        const auto t1 = clock::now();
        if (store) {
          weight_gradient_store(g, c, o.mb);
        } else {
          weight_gradient_autograd(c, o.mb);
        }
        c.bw_input_seconds[o.mb] = std::chrono::duration<double>(t1 - t0).count();
        return gx;
      }
      default:
        return std::move(in);  // SEND/RECV: the driver's transport moves the data
    }
  }

  message forward(pipesched::global_chunk g,
                  chunk_state& c,
                  bool first,
                  bool last,
                  std::uint32_t mb,
                  message&& in) {
    saved sv;
    torch::Tensor x;
    if (first) {
      x = data_->inputs.at(mb);
    } else {
      if (!in.t.defined()) {
        throw std::logic_error("F" + std::to_string(mb) + ": no input activation");
      }
      sv.input = in.t.detach().requires_grad_(true);
      x = sv.input;
    }
    const torch::Tensor y = model_->chunks[g]->forward(x);
    message out;
    if (last) {
      sv.output = gpt::loss(y, data_->targets.at(mb), scale_);
      c.loss += sv.output.item<double>();
    } else {
      sv.output = y;
      out.t = y.detach();  // the next chunk starts a graph of its own
    }
    if (!c.after_f.emplace(mb, std::move(sv)).second) {
      throw std::logic_error("F" + std::to_string(mb) + " ran twice");
    }
    return out;
  }

  /// Takes F's saved state of `mb` and sets its output gradient (the message, or 1 for the
  /// loss).
  static saved take_after_f(chunk_state& c, bool last, std::uint32_t mb, message&& in) {
    const auto it = c.after_f.find(mb);
    if (it == c.after_f.end()) {
      throw std::logic_error("B" + std::to_string(mb) + " before its F");
    }
    saved sv = std::move(it->second);
    c.after_f.erase(it);
    if (last) {
      sv.grad_out = torch::ones_like(sv.output);
    } else {
      if (!in.t.defined()) {
        throw std::logic_error("B" + std::to_string(mb) + ": no output gradient");
      }
      sv.grad_out = std::move(in.t);
    }
    return sv;
  }

  /// Adds `g[k]` to the accumulated gradient of parameter `index[k]`.
  static void accumulate(chunk_state& c,
                         std::span<const torch::Tensor> g,
                         std::span<const std::size_t> index) {
    torch::NoGradGuard no_grad;
    for (std::size_t k = 0; k < g.size(); ++k) {
      c.grads[index[k]].add_(g[k]);
    }
  }

  // --- autograd: two autograd::grad calls over one retained graph -----------------------------

  message input_gradient(chunk_state& c, bool first, bool last, std::uint32_t mb, message&& in) {
    saved sv = take_after_f(c, last, mb, std::move(in));
    message gx;
    if (!first) {
      gx.t = torch::autograd::grad({sv.output}, {sv.input}, {sv.grad_out},
                                   /*retain_graph=*/true)[0];
    }
    sv.input = torch::Tensor();  // the graph keeps what W needs
    c.after_b.emplace(mb, std::move(sv));
    return gx;
  }

  void weight_gradient_autograd(chunk_state& c, std::uint32_t mb) {
    const auto it = c.after_b.find(mb);
    if (it == c.after_b.end()) {
      throw std::logic_error("W" + std::to_string(mb) + " before its B");
    }
    const std::vector<torch::Tensor> g = torch::autograd::grad(
        {it->second.output}, c.params, {it->second.grad_out}, /*retain_graph=*/false);
    c.after_b.erase(it);  // the graph is released with the last reference to `output`
    accumulate(c, g, c.all_index);
  }

  // --- fused: one autograd::grad over the input and every parameter ---------------------------

  message fused_backward(chunk_state& c, bool first, bool last, std::uint32_t mb, message&& in) {
    saved sv = take_after_f(c, last, mb, std::move(in));
    std::vector<torch::Tensor> wrt;
    if (!first) {
      wrt.push_back(sv.input);
    }
    wrt.insert(wrt.end(), c.params.begin(), c.params.end());
    const std::vector<torch::Tensor> g =
        torch::autograd::grad({sv.output}, wrt, {sv.grad_out}, /*retain_graph=*/false);
    const std::size_t at = first ? 0 : 1;
    accumulate(c, std::span<const torch::Tensor>(g).subspan(at), c.all_index);
    message gx;
    if (!first) {
      gx.t = g[0];
    }
    return gx;
  }

  // --- store: B leaves each linear layer's (X, dY); W runs only the weight products -----------

  message input_gradient_store(pipesched::global_chunk g,
                               chunk_state& c,
                               bool first,
                               bool last,
                               std::uint32_t mb,
                               message&& in) {
    saved sv = take_after_f(c, last, mb, std::move(in));
    std::vector<torch::Tensor> wrt;
    if (!first) {
      wrt.push_back(sv.input);
    }
    wrt.insert(wrt.end(), c.immediate.begin(), c.immediate.end());
    std::vector<weight_grad_task>& tasks = c.deferred[mb];
    if (!tasks.empty()) {
      throw std::logic_error("B" + std::to_string(mb) + " ran twice");
    }
    std::vector<torch::Tensor> grads;
    {
      const weight_grad_store into(tasks);
      // The graph is released here: the store alone keeps what W needs.
      grads = torch::autograd::grad({sv.output}, wrt, {sv.grad_out}, /*retain_graph=*/false);
    }
    if (tasks.size() != c.linears) {
      throw std::logic_error("B" + std::to_string(mb) + " of chunk " + std::to_string(g) +
                             " stored " + std::to_string(tasks.size()) +
                             " weight-gradient tasks, "
                             "expected one per linear layer (" +
                             std::to_string(c.linears) + ")");
    }
    c.store_bytes = std::max(c.store_bytes, stored_bytes(tasks));
    const std::size_t at = first ? 0 : 1;
    accumulate(c, std::span<const torch::Tensor>(grads).subspan(at), c.immediate_index);
    message gx;
    if (!first) {
      gx.t = grads[0];
    }
    return gx;
  }

  void weight_gradient_store(pipesched::global_chunk g, chunk_state& c, std::uint32_t mb) {
    const auto it = c.deferred.find(mb);
    if (it == c.deferred.end()) {
      throw std::logic_error("W" + std::to_string(mb) + " before its B");
    }
    torch::NoGradGuard no_grad;
    for (const weight_grad_task& t : it->second) {
      const auto w = c.index_of.find(t.weight.unsafeGetTensorImpl());
      const auto b = c.index_of.find(t.bias.unsafeGetTensorImpl());
      if (w == c.index_of.end() || b == c.index_of.end()) {
        throw std::logic_error("W" + std::to_string(mb) + ": a stored task names a tensor that " +
                               "is not a parameter of chunk " + std::to_string(g));
      }
      c.grads[w->second].add_(weight_gradient(t.input, t.grad_output));
      c.grads[b->second].add_(bias_gradient(t.grad_output));
    }
    c.deferred.erase(it);
  }

  model* model_;
  const dataset* data_;
  split_mode mode_;
  std::vector<chunk_state> chunks_;
  double scale_;
};

static_assert(pipesched::executor<pipelined_gpt>);

/// The unpipelined step: for each micro-batch in order, the whole model's forward, the loss and
/// one autograd::grad over every parameter, accumulated. Per chunk of the model (its first
/// copy), parameters() order.
inline std::vector<std::vector<torch::Tensor>> reference_gradients(model& m,
                                                                   const dataset& data,
                                                                   double& total_loss) {
  std::vector<torch::Tensor> params;
  for (const auto& ch : m.one_copy()) {
    const auto ps = ch->parameters();
    params.insert(params.end(), ps.begin(), ps.end());
  }
  std::vector<torch::Tensor> acc;
  for (const auto& p : params) {
    acc.push_back(torch::zeros_like(p));
  }
  const double scale = 1.0 / static_cast<double>(static_cast<std::int64_t>(data.inputs.size()) *
                                                 m.cfg.batch * m.cfg.seq);
  total_loss = 0.0;
  for (std::size_t j = 0; j < data.inputs.size(); ++j) {
    torch::Tensor x = data.inputs[j];
    for (const auto& ch : m.one_copy()) {
      x = ch->forward(x);
    }
    const torch::Tensor l = gpt::loss(x, data.targets[j], scale);
    total_loss += l.item<double>();
    const auto g = torch::autograd::grad({l}, params);
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < g.size(); ++i) {
      acc[i].add_(g[i]);
    }
  }
  std::vector<std::vector<torch::Tensor>> out;
  std::size_t at = 0;
  for (const auto& ch : m.one_copy()) {
    const std::size_t n = ch->parameters().size();
    out.emplace_back(acc.begin() + static_cast<std::ptrdiff_t>(at),
                     acc.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

/// max over parameter tensors of max|a − b| / max|b| (normwise relative difference); a NaN or
/// an infinity anywhere gives +inf. Every copy of the model `got` holds is compared with `ref`.
inline double max_rel_diff(const pipelined_gpt& got,
                           const std::vector<std::vector<torch::Tensor>>& ref) {
  double worst = 0.0;
  for (std::size_t g = 0; g < got.chunks(); ++g) {
    const auto& a = got.grads(static_cast<pipesched::global_chunk>(g));
    const auto& r = ref[g % ref.size()];
    for (std::size_t i = 0; i < r.size(); ++i) {
      const double diff = (a[i] - r[i]).abs().max().item<double>();
      const double norm = r[i].abs().max().item<double>();
      if (!std::isfinite(diff)) {
        return HUGE_VAL;
      }
      worst = std::max(worst, norm > 0.0 ? diff / norm : diff);
    }
  }
  return worst;
}

inline void sgd_step(model& m, const pipelined_gpt& exec, double lr) {
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < m.chunks.size(); ++g) {
    auto params = m.chunks[g]->parameters();
    const auto& grads = exec.grads(static_cast<pipesched::global_chunk>(g));
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].sub_(grads[i] * lr);
    }
  }
}

inline double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Measured op durations per (stage, local chunk) and kind: a stage's T_F is the sum over its
/// chunks of the median F time over micro-batches and runs (likewise T_B, T_W). A BW counts as
/// a B of its B half (pipelined_gpt::bw_input_seconds) and a W of the rest, so T_B + T_W of a
/// fused backward is its measured time.
class cost_samples {
 public:
  cost_samples(std::uint32_t stages, std::uint32_t chunks)
      : stages_(stages), chunks_(chunks), samples_(std::size_t{stages} * chunks * 3) {}

  /// Adds the compute ops of `ops` (any stages; SEND/RECV ignored), seconds.
  void add(const pipesched::placement& pl,
           std::span<const pipesched::timed_op> ops,
           const pipelined_gpt& exec) {
    for (const auto& t : ops) {
      const std::size_t base = (std::size_t{t.stage} * chunks_ + t.o.chunk) * 3;
      const double d = t.end - t.start;
      switch (t.o.kind) {
        case pipesched::op_kind::forward:
          samples_.at(base).push_back(d);
          break;
        case pipesched::op_kind::backward_input:
          samples_.at(base + 1).push_back(d);
          break;
        case pipesched::op_kind::backward_weight:
          samples_.at(base + 2).push_back(d);
          break;
        case pipesched::op_kind::backward_full: {
          const double b =
              exec.bw_input_seconds(pl.global(t.stage, t.o.chunk), t.o.mb).value_or(0.0);
          samples_.at(base + 1).push_back(b);
          samples_.at(base + 2).push_back(std::max(0.0, d - b));
          break;
        }
        default:
          break;
      }
    }
  }

  /// Stage s's costs in milliseconds.
  pipesched::op_costs stage_ms(pipesched::stage_index s) const {
    pipesched::op_costs c{0.0, 0.0, 0.0};
    for (std::uint32_t k = 0; k < chunks_; ++k) {
      const std::size_t base = (std::size_t{s} * chunks_ + k) * 3;
      c.forward += median(samples_[base]) * 1e3;
      c.backward_input += median(samples_[base + 1]) * 1e3;
      c.backward_weight += median(samples_[base + 2]) * 1e3;
    }
    return c;
  }
  std::uint32_t stages() const { return stages_; }
  void clear() {
    for (auto& list : samples_) {
      list.clear();
    }
  }

 private:
  std::uint32_t stages_;
  std::uint32_t chunks_;
  std::vector<std::vector<double>> samples_;  ///< [(s*v + c)*3 + k], k: F, B, W; seconds
};

}  // namespace gpt
