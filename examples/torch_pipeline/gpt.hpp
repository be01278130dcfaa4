#pragma once

// A small GPT-like language model in libtorch (double precision), cut into pipeline chunks:
// chunk 0 starts with the token and position embeddings, every chunk holds the same number of
// transformer blocks (pre-LayerNorm, causal multi-head self-attention, GELU MLP), the last
// chunk ends with the final LayerNorm and the LM head. The loss (cross-entropy, summed over
// tokens and scaled by 1 / all tokens of the mini-batch) is computed by the caller.
//
// Every linear layer (attention projections, MLP matrices, LM head) is a split_linear: its
// backward computes the input gradient, and its weight gradient either right away (as autograd
// does) or, while a backward runs with a weight_grad_store active on the thread, later, from
// the layer's input and output gradient it leaves in the store (the zero-bubble split of
// docs/torch_pipeline.md). LayerNorm and embedding gradients are cheap and always computed by
// the backward itself.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>

namespace gpt {

struct config {
  std::int64_t vocab = 32;
  std::int64_t d_model = 16;
  std::int64_t heads = 2;
  std::int64_t seq = 8;    ///< tokens per sequence
  std::int64_t batch = 2;  ///< sequences per micro-batch
  std::size_t blocks_per_chunk = 1;
  std::uint64_t seed = 1234;
};

/// A linear layer's deferred weight-gradient work for one micro-batch: dW = dYᵀX, db = Σ dY
/// over its rows. `weight` and `bias` name the parameters (the same tensors as the module's).
struct weight_grad_task {
  torch::Tensor weight;
  torch::Tensor bias;
  torch::Tensor input;        ///< X, the layer's input (..., in)
  torch::Tensor grad_output;  ///< dY, the gradient of its output (..., out)
};

// The matrix products below copy a transposed operand to contiguous memory first: with the
// reference BLAS Debian's libtorch links by default, a product with a transposed operand took
// 1.3 to 2 times as long as the copy and the plain product together (F 18 ms against 32,
// dW 17 against 24 to 38, for a block's four layers at 128 rows, d_model 128).

/// dW = dYᵀX over all rows: the one formula of a linear layer's weight gradient, used by the
/// immediate and the deferred path alike, so both give the same bits.
inline torch::Tensor weight_gradient(const torch::Tensor& input, const torch::Tensor& grad_output) {
  return grad_output.reshape({-1, grad_output.size(-1)})
      .t()
      .contiguous()
      .mm(input.reshape({-1, input.size(-1)}));
}
inline torch::Tensor bias_gradient(const torch::Tensor& grad_output) {
  return grad_output.reshape({-1, grad_output.size(-1)}).sum(0);
}

namespace detail {
// The backward of a CPU graph runs on the thread that called autograd::grad, so a
// thread-local pointer reaches the split_linear nodes of exactly that call.
inline thread_local std::vector<weight_grad_task>* active_store = nullptr;
}  // namespace detail

/// While alive, split_linear backwards on this thread push their weight-gradient work into
/// `tasks` instead of computing it (one store per micro-batch and chunk, owned by the caller).
class weight_grad_store {
 public:
  explicit weight_grad_store(std::vector<weight_grad_task>& tasks)
      : previous_(detail::active_store) {
    detail::active_store = &tasks;
  }
  ~weight_grad_store() { detail::active_store = previous_; }
  weight_grad_store(const weight_grad_store&) = delete;
  weight_grad_store& operator=(const weight_grad_store&) = delete;

 private:
  std::vector<weight_grad_task>* previous_;
};

/// Bytes held by the tensors of `tasks`, each storage counted once.
inline std::size_t stored_bytes(const std::vector<weight_grad_task>& tasks) {
  std::set<const void*> seen;
  std::size_t n = 0;
  for (const auto& t : tasks) {
    for (const torch::Tensor* x : {&t.input, &t.grad_output}) {
      if (seen.insert(x->storage().data()).second) {
        n += x->storage().nbytes();
      }
    }
  }
  return n;
}

/// y = x·Wᵀ + b as an autograd function: x (..., in), W (out, in), b (out).
struct linear_function : torch::autograd::Function<linear_function> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    ctx->save_for_backward({x, weight});
    // The parameters themselves, for a deferred task to name (their values are not needed).
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["bias"] = bias;
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(0);
    return torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight.t().contiguous()).view(sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& dy = grads[0];
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      dx = dy.reshape({-1, dy.size(-1)}).mm(weight).view(x.sizes());
    }
    if (detail::active_store != nullptr) {
      detail::active_store->push_back(
          {ctx->saved_data["weight"].toTensor(), ctx->saved_data["bias"].toTensor(), x, dy});
      return {dx, torch::Tensor(), torch::Tensor()};
    }
    torch::Tensor dw;
    torch::Tensor db;
    if (ctx->needs_input_grad(1)) {
      dw = weight_gradient(x, dy);
    }
    if (ctx->needs_input_grad(2)) {
      db = bias_gradient(dy);
    }
    return {dx, dw, db};
  }
};

/// A linear layer through linear_function; initialised like torch::nn::Linear's default range
/// (uniform in ±1/sqrt(in)).
struct split_linear : torch::nn::Module {
  split_linear(std::int64_t in, std::int64_t out) : in_features(in), out_features(out) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    weight = register_parameter("weight", torch::empty({out, in}).uniform_(-bound, bound));
    bias = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
  }
  torch::Tensor forward(const torch::Tensor& x) { return linear_function::apply(x, weight, bias); }

  std::int64_t in_features;
  std::int64_t out_features;
  torch::Tensor weight;
  torch::Tensor bias;
};

/// Pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)).
struct block : torch::nn::Module {
  block(const config& c, torch::Tensor causal_mask)
      : heads_(c.heads), head_dim_(c.d_model / c.heads), mask_(std::move(causal_mask)) {
    const std::int64_t d = c.d_model;
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", std::make_shared<split_linear>(d, 3 * d));
    proj = register_module("proj", std::make_shared<split_linear>(d, d));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc = register_module("fc", std::make_shared<split_linear>(d, 4 * d));
    out = register_module("out", std::make_shared<split_linear>(4 * d, d));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const std::int64_t b = x.size(0);
    const std::int64_t s = x.size(1);
    const std::int64_t d = x.size(2);
    const auto parts = qkv->forward(ln1(x)).chunk(3, -1);
    auto heads = [&](const torch::Tensor& t) {
      return t.view({b, s, heads_, head_dim_}).transpose(1, 2);  // b, h, s, hd
    };
    const torch::Tensor q = heads(parts[0]);
    const torch::Tensor k = heads(parts[1]);
    const torch::Tensor v = heads(parts[2]);
    torch::Tensor att =
        torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
    att = att.masked_fill(mask_.slice(0, 0, s).slice(1, 0, s),
                          -std::numeric_limits<double>::infinity());
    att = torch::softmax(att, -1);
    const torch::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({b, s, d});
    torch::Tensor h = x + proj->forward(y);
    return h + out->forward(torch::gelu(fc->forward(ln2(h))));
  }

  std::vector<split_linear*> linears() const {
    return {qkv.get(), proj.get(), fc.get(), out.get()};
  }

  torch::nn::LayerNorm ln1{nullptr};
  std::shared_ptr<split_linear> qkv;
  std::shared_ptr<split_linear> proj;
  torch::nn::LayerNorm ln2{nullptr};
  std::shared_ptr<split_linear> fc;
  std::shared_ptr<split_linear> out;

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  torch::Tensor mask_;  ///< true above the diagonal: a token sees only itself and earlier ones
};

/// One pipeline chunk: [embeddings] blocks [final LayerNorm + LM head].
struct chunk : torch::nn::Module {
  chunk(const config& c, bool first, bool last, const torch::Tensor& causal_mask) {
    if (first) {
      tok = register_module("tok", torch::nn::Embedding(c.vocab, c.d_model));
      pos = register_module("pos", torch::nn::Embedding(c.seq, c.d_model));
    }
    for (std::size_t i = 0; i < c.blocks_per_chunk; ++i) {
      blocks.push_back(
          register_module("block" + std::to_string(i), std::make_shared<block>(c, causal_mask)));
    }
    if (last) {
      ln_f =
          register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
      head = register_module("head", std::make_shared<split_linear>(c.d_model, c.vocab));
    }
  }

  /// First chunk: `x` is int64 tokens (batch, seq); otherwise the hidden state (batch, seq,
  /// d). Returns the hidden state, or the logits (batch, seq, vocab) for the last chunk.
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = x;
    if (!tok.is_empty()) {
      const torch::Tensor positions = torch::arange(x.size(1), torch::kLong);
      h = tok(x) + pos(positions);
    }
    for (auto& blk : blocks) {
      h = blk->forward(h);
    }
    if (head) {
      h = head->forward(ln_f(h));
    }
    return h;
  }

  /// The split_linear layers, in model order.
  std::vector<split_linear*> linears() const {
    std::vector<split_linear*> out;
    for (const auto& blk : blocks) {
      const auto l = blk->linears();
      out.insert(out.end(), l.begin(), l.end());
    }
    if (head) {
      out.push_back(head.get());
    }
    return out;
  }

  torch::nn::Embedding tok{nullptr};
  torch::nn::Embedding pos{nullptr};
  std::vector<std::shared_ptr<block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  std::shared_ptr<split_linear> head;
};

/// Multiply-add FLOPs (2 per multiply-add) of one micro-batch through a chunk: the forward,
/// and the part of the backward that is the linear layers' weight gradients (dW = dYᵀX). The
/// whole backward counts twice the forward (each matrix product has two in the backward); the
/// elementwise ops (norms, softmax, GELU) are left out.
struct chunk_flops {
  double forward = 0.0;
  double weight = 0.0;
  /// The weight-gradient share of the backward: W / (B + W).
  double weight_share() const { return forward > 0.0 ? weight / (2.0 * forward) : 0.0; }
};

inline chunk_flops flops_of(const chunk& ch, const config& c) {
  const auto rows = static_cast<double>(c.batch * c.seq);
  chunk_flops f;
  for (const split_linear* l : ch.linears()) {
    const double mm = 2.0 * rows * static_cast<double>(l->in_features * l->out_features);
    f.forward += mm;
    f.weight += mm;
  }
  // QKᵀ and attention·V: each 2·b·s·s·d per block.
  f.forward += static_cast<double>(ch.blocks.size()) * 4.0 *
               static_cast<double>(c.batch * c.seq * c.seq * c.d_model);
  return f;
}

/// The whole model: `route_length` chunks in model order, built in that order from `c.seed`, so
/// the same config always gives the same weights; double precision. A schedule of several
/// `routes` holds it once per route (route_copies.hpp), in global chunk order, each copy built
/// from the seed again: the copies start equal.
struct model {
  model(const config& c, std::uint32_t route_length, std::uint32_t route_count = 1)
      : cfg(c), routes(route_count) {
    for (std::uint32_t r = 0; r < routes; ++r) {
      torch::manual_seed(c.seed);
      const torch::Tensor mask = torch::ones({c.seq, c.seq}, torch::kBool).triu(1);
      for (std::uint32_t g = 0; g < route_length; ++g) {
        auto ch = std::make_shared<chunk>(c, g == 0, g + 1 == route_length, mask);
        ch->to(torch::kDouble);
        chunks.push_back(std::move(ch));
      }
    }
  }
  /// The first copy's chunks (the others equal it): the model.
  std::span<const std::shared_ptr<chunk>> one_copy() const {
    return std::span<const std::shared_ptr<chunk>>(chunks).first(chunks.size() / routes);
  }
  std::size_t blocks() const { return one_copy().size() * cfg.blocks_per_chunk; }
  std::int64_t parameter_count() const {
    std::int64_t n = 0;
    for (const auto& ch : one_copy()) {
      for (const auto& t : ch->parameters()) {
        n += t.numel();
      }
    }
    return n;
  }

  config cfg;
  std::uint32_t routes;
  std::vector<std::shared_ptr<chunk>> chunks;  ///< every copy's, in global chunk order
};

/// Loss of one micro-batch's logits: cross-entropy summed over its tokens, times `scale`.
inline torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets, double scale) {
  return torch::nn::functional::cross_entropy(
             logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
             torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) *
         scale;
}

/// m micro-batches of `batch` sequences, inputs and next-token targets (int64, batch x seq):
/// a noisy affine recurrence over the vocabulary, so there is something to learn. From a fixed
/// std::mt19937_64 seed, independent of torch's generator.
struct dataset {
  std::vector<torch::Tensor> inputs;
  std::vector<torch::Tensor> targets;
};

inline dataset make_dataset(const config& c, std::uint32_t microbatches) {
  std::mt19937_64 rng(c.seed + 1);
  std::uniform_int_distribution<std::int64_t> token(0, c.vocab - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  dataset d;
  for (std::uint32_t j = 0; j < microbatches; ++j) {
    std::vector<std::int64_t> seqs;
    for (std::int64_t i = 0; i < c.batch; ++i) {
      std::int64_t t = token(rng);
      for (std::int64_t k = 0; k <= c.seq; ++k) {
        seqs.push_back(t);
        t = u(rng) < 0.8 ? (3 * t + 1) % c.vocab : token(rng);
      }
    }
    const torch::Tensor all = torch::tensor(seqs, torch::kLong).view({c.batch, c.seq + 1});
    d.inputs.push_back(all.slice(1, 0, c.seq).contiguous());
    d.targets.push_back(all.slice(1, 1, c.seq + 1).contiguous());
  }
  return d;
}

}  // namespace gpt
