#pragma once

// A small GPT-like language model in libtorch (double precision), cut into pipeline chunks:
// chunk 0 starts with the token and position embeddings, every chunk holds the same number of
// transformer blocks (pre-LayerNorm, causal multi-head self-attention, GELU MLP), the last
// chunk ends with the final LayerNorm and the LM head. The loss (cross-entropy, summed over
// tokens and scaled by 1 / all tokens of the mini-batch) is computed by the caller.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <torch/torch.h>
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

/// Pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)).
struct block : torch::nn::Module {
  block(const config& c, torch::Tensor causal_mask)
      : heads_(c.heads), head_dim_(c.d_model / c.heads), mask_(std::move(causal_mask)) {
    const std::int64_t d = c.d_model;
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc = register_module("fc", torch::nn::Linear(d, 4 * d));
    out = register_module("out", torch::nn::Linear(4 * d, d));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const std::int64_t b = x.size(0);
    const std::int64_t s = x.size(1);
    const std::int64_t d = x.size(2);
    const auto parts = qkv(ln1(x)).chunk(3, -1);
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
    torch::Tensor h = x + proj(y);
    return h + out(torch::gelu(fc(ln2(h))));
  }

  torch::nn::LayerNorm ln1{nullptr};
  torch::nn::Linear qkv{nullptr};
  torch::nn::Linear proj{nullptr};
  torch::nn::LayerNorm ln2{nullptr};
  torch::nn::Linear fc{nullptr};
  torch::nn::Linear out{nullptr};

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
      head = register_module("head", torch::nn::Linear(c.d_model, c.vocab));
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
    if (!head.is_empty()) {
      h = head(ln_f(h));
    }
    return h;
  }

  torch::nn::Embedding tok{nullptr};
  torch::nn::Embedding pos{nullptr};
  std::vector<std::shared_ptr<block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
};

/// The whole model: `total_chunks` chunks in model (global chunk) order, built in that order
/// from `c.seed`, so the same config always gives the same weights; double precision.
struct model {
  model(const config& c, std::uint32_t total_chunks) : cfg(c) {
    torch::manual_seed(c.seed);
    const torch::Tensor mask = torch::ones({c.seq, c.seq}, torch::kBool).triu(1);
    for (std::uint32_t g = 0; g < total_chunks; ++g) {
      auto ch = std::make_shared<chunk>(c, g == 0, g + 1 == total_chunks, mask);
      ch->to(torch::kDouble);
      chunks.push_back(std::move(ch));
    }
  }
  std::size_t blocks() const { return chunks.size() * cfg.blocks_per_chunk; }
  std::int64_t parameter_count() const {
    std::int64_t n = 0;
    for (const auto& ch : chunks) {
      for (const auto& t : ch->parameters()) {
        n += t.numel();
      }
    }
    return n;
  }

  config cfg;
  std::vector<std::shared_ptr<chunk>> chunks;
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
