#pragma once

// A small multi-layer perceptron in plain C++ (double precision), cut into pipeline chunks, with
// the three passes of a real framework: F saves what B needs, B computes only the input
// gradient and keeps what W needs, W computes only the weight gradient from what B kept.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pipesched/exec/executor.hpp>

namespace mlp {

/// Row-major dense matrix.
struct matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> v;

  matrix() = default;
  matrix(std::size_t r, std::size_t c) : rows(r), cols(c), v(r * c, 0.0) {}
  double& operator()(std::size_t i, std::size_t j) { return v[i * cols + j]; }
  double operator()(std::size_t i, std::size_t j) const { return v[i * cols + j]; }
};

/// y = x · wᵀ + b  (x: n×in, w: out×in, y: n×out)
inline matrix affine(const matrix& x, const matrix& w, const std::vector<double>& b) {
  matrix y(x.rows, w.rows);
  for (std::size_t i = 0; i < x.rows; ++i) {
    for (std::size_t o = 0; o < w.rows; ++o) {
      double acc = b[o];
      for (std::size_t k = 0; k < x.cols; ++k) {
        acc += x(i, k) * w(o, k);
      }
      y(i, o) = acc;
    }
  }
  return y;
}

/// One dense layer, tanh-activated unless it is the model's output layer.
struct layer {
  matrix w;
  std::vector<double> b;
  bool tanh_act = true;
  matrix gw;  ///< accumulated weight gradient
  std::vector<double> gb;

  matrix forward(const matrix& x) const {
    matrix y = affine(x, w, b);
    if (tanh_act) {
      for (double& e : y.v) {
        e = std::tanh(e);
      }
    }
    return y;
  }
  /// dL/dz from dL/dy, using the layer output y.
  matrix pre_activation_grad(const matrix& gy, const matrix& y) const {
    matrix dz = gy;
    if (tanh_act) {
      for (std::size_t i = 0; i < dz.v.size(); ++i) {
        dz.v[i] *= 1.0 - y.v[i] * y.v[i];
      }
    }
    return dz;
  }
  /// dL/dx = dz · w
  matrix input_grad(const matrix& dz) const {
    matrix gx(dz.rows, w.cols);
    for (std::size_t i = 0; i < dz.rows; ++i) {
      for (std::size_t o = 0; o < w.rows; ++o) {
        const double d = dz(i, o);
        for (std::size_t k = 0; k < w.cols; ++k) {
          gx(i, k) += d * w(o, k);
        }
      }
    }
    return gx;
  }
  /// gw += dzᵀ · x, gb += Σ_rows dz
  void accumulate_weight_grad(const matrix& dz, const matrix& x) {
    for (std::size_t i = 0; i < dz.rows; ++i) {
      for (std::size_t o = 0; o < w.rows; ++o) {
        const double d = dz(i, o);
        for (std::size_t k = 0; k < w.cols; ++k) {
          gw(o, k) += d * x(i, k);
        }
        gb[o] += d;
      }
    }
  }
  void zero_grad() {
    gw = matrix(w.rows, w.cols);
    gb.assign(b.size(), 0.0);
  }
};

/// What the MLP examples train: the SGD rate, the layers' width, the samples per micro-batch and
/// the layers per chunk.
struct settings {
  double lr = 0.2;
  std::size_t width = 8;
  std::size_t batch = 4;
  std::size_t layers_per_chunk = 2;
};

/// The problem: m micro-batches of `batch` samples, inputs and regression targets.
struct dataset {
  std::vector<matrix> inputs;
  std::vector<matrix> targets;
};

inline dataset make_dataset(std::uint32_t microbatches, std::size_t batch, std::size_t width) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  dataset d;
  for (std::uint32_t j = 0; j < microbatches; ++j) {
    matrix x(batch, width);
    matrix t(batch, width);
    for (double& e : x.v) {
      e = u(rng);
    }
    for (std::size_t i = 0; i < batch; ++i) {
      for (std::size_t k = 0; k < width; ++k) {
        t(i, k) = 0.5 * std::sin(x(i, k) + x(i, (k + 1) % width));  // a smooth teacher
      }
    }
    d.inputs.push_back(std::move(x));
    d.targets.push_back(std::move(t));
  }
  return d;
}

/// The model's layers, `layers_per_chunk` for each of its `chunks` (a route's global chunks).
inline std::vector<layer> make_layers(std::uint32_t chunks,
                                      std::size_t layers_per_chunk,
                                      std::size_t width) {
  std::mt19937_64 rng(42);
  const double a = 1.5 / std::sqrt(static_cast<double>(width));
  std::uniform_real_distribution<double> u(-a, a);
  std::vector<layer> layers(std::size_t{chunks} * layers_per_chunk);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    layers[l].w = matrix(width, width);
    for (double& e : layers[l].w.v) {
      e = u(rng);
    }
    layers[l].b.assign(width, 0.0);
    for (double& e : layers[l].b) {
      e = 0.1 * u(rng);
    }
    layers[l].tanh_act = l + 1 < layers.size();
    layers[l].zero_grad();
  }
  return layers;
}

/// The layers a schedule of `routes` routes holds: the model once per route, in global chunk
/// order, so that global chunk g holds a copy of the model's chunk g % route_length
/// (route_copies.hpp).
inline std::vector<layer> replicate(const std::vector<layer>& model, std::uint32_t routes) {
  std::vector<layer> out;
  out.reserve(model.size() * routes);
  for (std::uint32_t r = 0; r < routes; ++r) {
    out.insert(out.end(), model.begin(), model.end());
  }
  return out;
}

/// The first of the `routes` copies replicate() made (the others equal it): the model.
inline std::span<const layer> one_copy(const std::vector<layer>& layers, std::uint32_t routes) {
  return std::span<const layer>(layers).first(layers.size() / routes);
}

/// The SGD step size for `lr` on `pl`: a deeper model (more chunks per stage along a route)
/// needs a smaller step to descend reliably.
inline double step_size(double lr, const pipesched::placement& pl) {
  return lr / static_cast<double>(pl.route_length() / pl.stages());
}

/// Zeroes every layer's accumulated gradient (the start of a training step).
inline void zero_grads(std::vector<layer>& layers) {
  for (auto& l : layers) {
    l.zero_grad();
  }
}

/// Plain SGD on every layer: w -= lr * gw, b -= lr * gb.
inline void sgd_step(std::vector<layer>& layers, double lr) {
  for (auto& l : layers) {
    for (std::size_t i = 0; i < l.w.v.size(); ++i) {
      l.w.v[i] -= lr * l.gw.v[i];
    }
    for (std::size_t i = 0; i < l.b.size(); ++i) {
      l.b[i] -= lr * l.gb[i];
    }
  }
}

/// Every gradient in one flat vector, layer by layer (gw row-major, then gb): what a
/// distributed run reduces across ranks.
inline std::vector<double> flatten_gradients(std::span<const layer> layers) {
  std::vector<double> flat;
  for (const auto& l : layers) {
    flat.insert(flat.end(), l.gw.v.begin(), l.gw.v.end());
    flat.insert(flat.end(), l.gb.begin(), l.gb.end());
  }
  return flat;
}

/// The inverse of flatten_gradients() (same layer shapes); throws on a size mismatch.
inline void assign_gradients(std::span<layer> layers, std::span<const double> flat) {
  std::size_t at = 0;
  for (auto& l : layers) {
    if (flat.size() - at < l.gw.v.size() + l.gb.size()) {
      throw std::length_error("assign_gradients: the flat vector is too short");
    }
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), l.gw.v.size(), l.gw.v.begin());
    at += l.gw.v.size();
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), l.gb.size(), l.gb.begin());
    at += l.gb.size();
  }
  if (at != flat.size()) {
    throw std::length_error("assign_gradients: the flat vector is too long");
  }
}

/// Loss of one micro-batch: ½‖y − t‖² / (m · batch), so the sum over micro-batches is the
/// mean over the whole mini-batch. Returns dL/dy.
inline matrix loss_grad(const matrix& y, const matrix& t, double scale, double& loss) {
  matrix g(y.rows, y.cols);
  for (std::size_t i = 0; i < y.v.size(); ++i) {
    const double diff = y.v[i] - t.v[i];
    loss += 0.5 * diff * diff * scale;
    g.v[i] = diff * scale;
  }
  return g;
}

/// The unpipelined reference: for each micro-batch in order, a plain forward through every
/// layer and a textbook fused backward. Written independently of the chunked executor.
inline std::vector<layer> reference_gradients(std::span<const layer> model,
                                              const dataset& data,
                                              double& loss) {
  std::vector<layer> layers(model.begin(), model.end());
  for (auto& l : layers) {
    l.zero_grad();
  }
  loss = 0.0;
  const double scale = 1.0 / static_cast<double>(data.inputs.size() * data.inputs[0].rows);
  for (std::size_t j = 0; j < data.inputs.size(); ++j) {
    std::vector<matrix> acts{data.inputs[j]};
    for (const auto& l : layers) {
      acts.push_back(l.forward(acts.back()));
    }
    matrix g = loss_grad(acts.back(), data.targets[j], scale, loss);
    for (std::size_t l = layers.size(); l-- > 0;) {
      const matrix dz = layers[l].pre_activation_grad(g, acts[l + 1]);
      g = layers[l].input_grad(dz);
      layers[l].accumulate_weight_grad(dz, acts[l]);
    }
  }
  return layers;
}

/// The pipelined model: a pipesched executor. Chunk g holds layers
/// [g·layers_per_chunk, (g+1)·layers_per_chunk) (of replicate()'s copies, with several
/// routes); each stage touches only its own chunks, so
/// run() is safe to call concurrently for different stages. It takes the context form of run():
/// the op_context names the op's global chunk and whether it is the first (reads the data) or
/// the last (computes the loss), so the model needs no copy of the schedule or its placement.
/// Overlapped pairs (ctx.overlaps_next: DualPipe(V)'s F of one micro-batch with the backward of
/// another) run one op after the other, as the executor concept allows: the two never need each
/// other's results, so the gradients are the same; a GPU executor would start the first op on its
/// own stream and return, to run the second alongside it (exec/executor.hpp).
class pipelined_mlp {
 public:
  using message = matrix;  ///< an activation (F) or a gradient (B), batch × width

  pipelined_mlp(std::vector<layer>& layers, std::size_t layers_per_chunk, const dataset& data)
      : layers_(&layers),
        per_chunk_(layers_per_chunk),
        data_(&data),
        chunks_(layers.size() / layers_per_chunk),
        scale_(1.0 / static_cast<double>(data.inputs.size() * data.inputs[0].rows)) {}

  message run(const pipesched::op_context& ctx, message&& in) {
    const pipesched::global_chunk g = ctx.chunk;
    chunk_state& c = chunks_.at(g);
    const std::uint32_t mb = ctx.o.mb;
    switch (ctx.o.kind) {
      case pipesched::op_kind::forward: {
        matrix x = ctx.first_chunk ? data_->inputs[mb] : std::move(in);
        if (pipesched::is_recomputed(ctx.o)) {
          // Checkpointed: keep only the input; the R before the backward rebuilds the rest.
          message out = forward_only(g, x);
          if (!c.f_input.emplace(mb, std::move(x)).second) {
            throw std::logic_error("F" + std::to_string(mb) + " ran twice");
          }
          return out;
        }
        return forward(g, c, mb, std::move(x));
      }
      case pipesched::op_kind::recompute: {
        auto it = c.f_input.find(mb);
        if (it == c.f_input.end()) {
          throw std::logic_error("R" + std::to_string(mb) + " without its checkpointed F");
        }
        matrix x = std::move(it->second);
        c.f_input.erase(it);
        (void)forward(g, c, mb, std::move(x));
        return {};
      }
      case pipesched::op_kind::backward_input:
        return backward_input(g, c, mb, ctx.last_chunk, std::move(in));
      case pipesched::op_kind::backward_weight:
        backward_weight(g, c, mb);
        return {};
      case pipesched::op_kind::backward_full: {
        message gx = backward_input(g, c, mb, ctx.last_chunk, std::move(in));
        backward_weight(g, c, mb);
        return gx;
      }
      default:
        return std::move(in);  // SEND/RECV: the driver's transport moves the data
    }
  }

  /// Loss summed over the micro-batches since the last reset (kept by each route's last chunk).
  double loss() const {
    double sum = 0.0;
    for (const auto& c : chunks_) {
      sum += c.loss;
    }
    return sum;
  }
  void reset_loss() {
    for (auto& c : chunks_) {
      c.loss = 0.0;
    }
  }
  /// Global chunk g's accumulated gradients, flattened (flatten_gradients), and put back: what
  /// route_copies sums over a block's copies.
  std::vector<double> flat_gradients(pipesched::global_chunk g) const {
    return flatten_gradients(chunk_layers(g));
  }
  void assign_flat_gradients(pipesched::global_chunk g, std::span<const double> flat) {
    assign_gradients(chunk_layers(g), flat);
  }
  /// Tensors still held for a B or W that never ran (0 after a complete iteration).
  std::size_t stashed() const {
    std::size_t n = 0;
    for (const auto& c : chunks_) {
      n += c.f_saved.size() + c.w_saved.size() + c.f_input.size();
    }
    return n;
  }

 private:
  struct chunk_state {
    std::map<std::uint32_t, std::vector<matrix>> f_saved;  ///< per mb: layer inputs + output
    std::map<std::uint32_t, matrix> f_input;  ///< per mb: the input a recomputed F keeps
    /// per mb, per layer: (layer input, dL/dz) — exactly what W needs
    std::map<std::uint32_t, std::vector<std::pair<matrix, matrix>>> w_saved;
    double loss = 0.0;
  };

  std::span<layer> chunk_layers(pipesched::global_chunk g) const {
    return std::span<layer>(*layers_).subspan(g * per_chunk_, per_chunk_);
  }
  layer& at(pipesched::global_chunk g, std::size_t k) { return chunk_layers(g)[k]; }

  message forward(pipesched::global_chunk g, chunk_state& c, std::uint32_t mb, matrix x) {
    std::vector<matrix> acts{std::move(x)};
    for (std::size_t k = 0; k < per_chunk_; ++k) {
      acts.push_back(at(g, k).forward(acts.back()));
    }
    message out = acts.back();
    if (!c.f_saved.emplace(mb, std::move(acts)).second) {
      throw std::logic_error("F" + std::to_string(mb) + " ran twice");
    }
    return out;
  }

  // The forward of a checkpointed F: the same arithmetic as forward(), nothing saved.
  message forward_only(pipesched::global_chunk g, const matrix& x) {
    matrix y = x;
    for (std::size_t k = 0; k < per_chunk_; ++k) {
      y = at(g, k).forward(y);
    }
    return y;
  }

  message backward_input(
      pipesched::global_chunk g, chunk_state& c, std::uint32_t mb, bool last, matrix gy) {
    auto it = c.f_saved.find(mb);
    if (it == c.f_saved.end()) {
      throw std::logic_error("B" + std::to_string(mb) + " before its F");
    }
    std::vector<matrix> acts = std::move(it->second);
    c.f_saved.erase(it);
    if (last) {
      gy = loss_grad(acts.back(), data_->targets[mb], scale_, c.loss);
    }
    std::vector<std::pair<matrix, matrix>> keep(per_chunk_);
    for (std::size_t k = per_chunk_; k-- > 0;) {
      matrix dz = at(g, k).pre_activation_grad(gy, acts[k + 1]);
      gy = at(g, k).input_grad(dz);
      keep[k] = {acts[k], std::move(dz)};  // layer k-1 still needs acts[k] as its output
    }
    c.w_saved.emplace(mb, std::move(keep));
    return gy;  // `acts` dies here: the chunk's output activation is freed, W needs only `keep`
  }

  void backward_weight(pipesched::global_chunk g, chunk_state& c, std::uint32_t mb) {
    auto it = c.w_saved.find(mb);
    if (it == c.w_saved.end()) {
      throw std::logic_error("W" + std::to_string(mb) + " before its B");
    }
    for (std::size_t k = 0; k < per_chunk_; ++k) {
      at(g, k).accumulate_weight_grad(it->second[k].second, it->second[k].first);
    }
    c.w_saved.erase(it);
  }

  std::vector<layer>* layers_;
  std::size_t per_chunk_;
  const dataset* data_;
  std::vector<chunk_state> chunks_;
  double scale_;
};

static_assert(pipesched::executor<pipelined_mlp>);

/// max over tensors of max|a − b| / max|b| (normwise relative difference). `got` may hold the
/// model several times (replicate()): every copy is compared with `ref`.
inline double max_rel_diff(const std::vector<layer>& got, const std::vector<layer>& ref) {
  double worst = 0.0;
  auto tensor = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double diff = 0.0;
    double norm = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double d = std::abs(a[i] - b[i]);
      diff = std::isfinite(d) ? std::max(diff, d) : HUGE_VAL;  // NaN must not pass
      norm = std::max(norm, std::abs(b[i]));
    }
    worst = std::max(worst, norm > 0.0 ? diff / norm : diff);
  };
  for (std::size_t l = 0; l < got.size(); ++l) {
    tensor(got[l].gw.v, ref[l % ref.size()].gw.v);
    tensor(got[l].gb, ref[l % ref.size()].gb);
  }
  return worst;
}

}  // namespace mlp
