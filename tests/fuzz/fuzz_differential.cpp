// libFuzzer target: decode a small, possibly broken schedule from bytes (p, m <= 4, loop / V /
// custom placements, split or fused backward, lowered or not, then byte-driven mutations, or
// fully random op lists) and check validator, traversal, simulator and memory checker against
// each other and against independent recomputations:
//  - validate() reports a deadlock exactly when traverse() and simulate() do;
//  - a valid schedule simulates to the end, every op starts no earlier than its stage's previous
//    op and its inputs (+ T_comm across stages), busy time is the sum of the costs, and its
//    buffer lifetimes are clean;
//  - check_memory()'s per-stage peaks equal a recomputation from the ops in simulated order;
//  - lower_communication() of a valid compute-only schedule is valid, completes, and keeps
//    every stage's compute ops in order.
// Any other exception than pipesched::invalid_argument, a crash, a hang or a mismatch is a bug.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/ir/dependencies.hpp>
#include <pipesched/ir/schedule.hpp>
#include <pipesched/ir/traversal.hpp>
#include <pipesched/transform/comm_lowering.hpp>

using namespace pipesched;

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_differential: %s\n", what);
  std::abort();
}

/// Reads the input byte by byte; zeros once exhausted, so every input decodes.
struct byte_source {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  std::uint32_t next() { return pos < size ? data[pos++] : 0u; }
  std::uint32_t below(std::uint32_t n) { return n == 0 ? 0 : next() % n; }
  bool empty() const { return pos >= size; }
};

placement decode_placement(byte_source& in, std::uint32_t p) {
  switch (in.below(4)) {
    case 0:
      return placement::sequential(p);
    case 1:
      return placement::loop(p, 1 + in.below(3));
    case 2:
      return placement::v_shape(p);
    default: {
      const std::uint32_t v = 1 + in.below(2);
      std::vector<global_chunk> table(std::size_t{p} * v);
      for (std::size_t i = 0; i < table.size(); ++i) {
        table[i] = static_cast<global_chunk>(i);
      }
      for (std::size_t i = table.size(); i > 1; --i) {
        std::swap(table[i - 1], table[in.below(static_cast<std::uint32_t>(i))]);
      }
      if (in.below(16) == 0) {
        table[0] = table.back();  // not a permutation: placement::custom must refuse it
      }
      return placement::custom(p, v, std::move(table));
    }
  }
}

/// A valid schedule: every stage's list is a subsequence of one topological order of all ops,
/// chosen by the input (which ready op runs next). Lowered: each transfer's SEND and RECV are
/// adjacent in that order, so the rendezvous can always happen.
void build_valid(byte_source& in, schedule& s, bool split, bool lowered) {
  const placement& pl = s.layout();
  const std::uint32_t g_count = pl.total_chunks();
  const std::uint32_t m = s.microbatches();
  std::vector<std::uint32_t> fwd(m, 0);           // next chunk to forward
  std::vector<std::int64_t> bwd(m, g_count - 1);  // next chunk to backward
  std::vector<std::pair<global_chunk, microbatch_index>> w_pending;
  auto emit = [&](global_chunk g, op_kind k, microbatch_index j) {
    s.stage_ops(pl.stage_of(g)).push_back(make_op(k, j, pl.local_of(g)));
  };
  for (;;) {
    std::vector<std::uint32_t> ready;  // j for F, m + j for B, 2m + i for W
    for (microbatch_index j = 0; j < m; ++j) {
      if (fwd[j] < g_count) {
        ready.push_back(j);
      } else if (bwd[j] >= 0) {
        ready.push_back(m + j);
      }
    }
    for (std::size_t i = 0; i < w_pending.size(); ++i) {
      ready.push_back(2 * m + static_cast<std::uint32_t>(i));
    }
    if (ready.empty()) {
      break;
    }
    const std::uint32_t pick = ready[in.below(static_cast<std::uint32_t>(ready.size()))];
    if (pick < m) {
      const microbatch_index j = pick;
      const global_chunk g = fwd[j]++;
      emit(g, op_kind::forward, j);
      if (lowered && !pl.is_last(g) && pl.stage_of(g + 1) != pl.stage_of(g)) {
        emit(g, op_kind::send_forward, j);
        emit(g + 1, op_kind::recv_forward, j);
      }
    } else if (pick < 2 * m) {
      const microbatch_index j = pick - m;
      const auto g = static_cast<global_chunk>(bwd[j]--);
      emit(g, split ? op_kind::backward_input : op_kind::backward_full, j);
      if (split) {
        w_pending.emplace_back(g, j);
      }
      if (lowered && g > 0 && pl.stage_of(g - 1) != pl.stage_of(g)) {
        emit(g, op_kind::send_backward, j);
        emit(g - 1, op_kind::recv_backward, j);
      }
    } else {
      const std::size_t i = pick - 2 * m;
      emit(w_pending[i].first, op_kind::backward_weight, w_pending[i].second);
      w_pending.erase(w_pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

op random_op(byte_source& in, const schedule& s) {
  const auto kind = static_cast<op_kind>(in.below(op_kind_count));
  const auto mb = in.below(s.microbatches() + 1);  // sometimes out of range
  const auto chunk = static_cast<chunk_index>(in.below(s.chunks() + 1));
  return make_op(kind, mb, chunk);
}

void mutate(byte_source& in, schedule& s) {
  const stage_index st = in.below(s.stages());
  auto& ops = s.stage_ops(st);
  const auto n = static_cast<std::uint32_t>(ops.size());
  switch (in.below(6)) {
    case 0:  // swap two ops
      if (n > 1) {
        std::swap(ops[in.below(n)], ops[in.below(n)]);
      }
      break;
    case 1:  // delete one
      if (n > 0) {
        ops.erase(ops.begin() + in.below(n));
      }
      break;
    case 2:  // duplicate one
      if (n > 0) {
        const op o = ops[in.below(n)];
        ops.insert(ops.begin() + in.below(n + 1), o);
      }
      break;
    case 3:  // insert a random op
      ops.insert(ops.begin() + in.below(n + 1), random_op(in, s));
      break;
    case 4:  // move one to another stage
      if (n > 0) {
        const std::uint32_t i = in.below(n);
        const op o = ops[i];
        ops.erase(ops.begin() + i);
        auto& other = s.stage_ops(in.below(s.stages()));
        other.insert(other.begin() + in.below(static_cast<std::uint32_t>(other.size()) + 1), o);
      }
      break;
    default:  // change a kind
      if (n > 0) {
        ops[in.below(n)].kind = static_cast<op_kind>(in.below(op_kind_count));
      }
      break;
  }
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

/// Timing rules of docs/model.md §3, checked op by op on a completed simulation of a valid,
/// non-lowered schedule, with the producers located independently of the simulator.
void check_timing(const schedule& s, const shaped_cost_model& costs, const simulation_result& r) {
  const placement& pl = s.layout();
  // (event, global chunk, mb) -> (end time, stage)
  std::map<std::tuple<int, global_chunk, microbatch_index>, std::pair<double, stage_index>> ends;
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto ops = s.ops(st);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const auto g = pl.global(st, ops[i].chunk);
      for (int e = 0; e < 6; ++e) {
        if ((events_produced(ops[i]) & (1u << e)) != 0) {
          ends[{e, g, ops[i].mb}] = {r.ops[st][i].end, st};
        }
      }
    }
  }
  double makespan = 0.0;
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto ops = s.ops(st);
    double busy = 0.0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const timed_op t = r.ops[st][i];
      const double d = costs.duration(st, ops[i].kind, ops[i].chunk);
      busy += d;
      makespan = std::max(makespan, t.end);
      if (!close(t.end - t.start, d)) {
        finding("an op's duration differs from its cost");
      }
      double earliest = i == 0 ? 0.0 : r.ops[st][i - 1].end;
      for (const requirement& q : requirements_of(pl, st, ops[i], false)) {
        const auto it = ends.find({static_cast<int>(q.what), q.chunk, q.mb});
        if (it == ends.end()) {
          finding("a valid schedule has an op whose input is never produced");
        }
        const double arrival =
            it->second.first + (it->second.second != st ? costs.comm(it->second.second, st) : 0.0);
        earliest = std::max(earliest, arrival);
      }
      if (!close(t.start, earliest)) {
        finding("an op does not start at max(previous end, input arrivals)");
      }
    }
    if (!close(busy, r.stages[st].busy)) {
      finding("stage busy time differs from the sum of op costs");
    }
  }
  if (!close(makespan, r.makespan)) {
    finding("makespan differs from the last op end");
  }
}

/// Per-stage peaks from the ops in simulated order (ties by list order), own bookkeeping.
std::vector<double> recompute_peaks(const schedule& s,
                                    const shaped_memory_model& mm,
                                    const simulation_result& r) {
  const placement& pl = s.layout();
  const bool lowered = s.has_comm();
  std::vector<double> peaks(s.stages(), 0.0);
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto ops = s.ops(st);
    std::vector<std::size_t> order(ops.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return r.ops[st][a].start < r.ops[st][b].start;
    });
    double value = mm.static_memory(st);
    double peak = value;
    for (std::size_t i : order) {
      const op& o = ops[i];
      const chunk_memory& c = mm.at(st, o.chunk);
      switch (o.kind) {
        case op_kind::forward:  // a checkpointed F keeps only its input until its R
          value += is_recomputed(o) ? c.input : c.activation;
          break;
        case op_kind::recompute:
          value += c.activation - c.input;
          break;
        case op_kind::backward_input:
          value -= c.activation - c.weight_grad_input;
          break;
        case op_kind::backward_weight:
          value -= c.weight_grad_input;
          break;
        case op_kind::backward_full:
          value -= c.activation;
          break;
        case op_kind::recv_forward:
        case op_kind::recv_backward:
          value += c.received;
          break;
        default:
          break;
      }
      if (lowered && (o.kind == op_kind::forward || produces_input_grad(o.kind))) {
        const global_chunk g = pl.global(st, o.chunk);
        const bool from_recv = o.kind == op_kind::forward
                                   ? g > 0 && pl.stage_of(g - 1) != st
                                   : !pl.is_last(g) && pl.stage_of(g + 1) != st;
        if (from_recv) {
          value -= c.received;
        }
      }
      peak = std::max(peak, value);
    }
    peaks[st] = peak;
  }
  return peaks;
}

void run(byte_source& in) {
  const std::uint32_t p = 1 + in.below(4);
  const std::uint32_t m = 1 + in.below(4);
  placement pl = decode_placement(in, p);
  schedule s = schedule::on("fuzz", std::move(pl), m);
  const std::uint32_t mode = in.below(8);
  if (mode == 0) {  // fully random lists
    for (stage_index st = 0; st < p; ++st) {
      const std::uint32_t n = in.below(12);
      for (std::uint32_t i = 0; i < n; ++i) {
        s.stage_ops(st).push_back(random_op(in, s));
      }
    }
  } else {
    build_valid(in, s, (mode & 1) != 0, (mode & 2) != 0 && p > 1);
    const std::uint32_t mutations = in.below(4) == 0 ? 0 : 1 + in.below(3);
    for (std::uint32_t k = 0; k < mutations; ++k) {
      mutate(in, s);
    }
  }
  // Per-stage values (docs/model.md §2); the independent checks below read them per chunk, as
  // the documented for_shape() splits them.
  const cost_model costs = cost_model::uniform(in.below(4), in.below(4), in.below(4), in.below(3));
  const double mb_size = 1.0 + in.below(4);
  const memory_model mm(chunk_memory{mb_size, mb_size * in.below(5) / 4.0, 0.25 * in.below(3)});
  const shaped_cost_model chunk_costs = costs.for_shape(p, s.layout().chunks(), "fuzz");
  const shaped_memory_model chunk_mm = mm.for_shape(p, s.layout().chunks(), "fuzz");

  const validation_report vr = validate(s);
  const traversal_result tr = traverse(s, [](stage_index, std::size_t, const op&) {});
  const simulation_result sim = simulate(s, costs);
  const memory_report mem = check_memory(s, mm, {}, sim);

  if (vr.deadlock.has_value() != !tr.complete || sim.completed() != tr.complete) {
    finding("validate, traverse and simulate disagree about a deadlock");
  }
  if (vr.total < vr.violations.size() || vr.ok() != (vr.total == 0)) {
    finding("inconsistent validation counts");
  }
  if (!sim.completed() && sim.deadlock->stuck.empty()) {
    finding("a deadlock without a stuck stage");
  }
  if (!vr.ok()) {
    return;
  }
  if (!sim.completed()) {
    finding("valid schedule does not simulate to the end");
  }
  for (stage_index st = 0; st < p; ++st) {
    if (sim.stages[st].ops_run != s.ops(st).size() || sim.ops[st].size() != s.ops(st).size()) {
      finding("valid schedule: not every op was simulated");
    }
  }
  if (!mem.lifetimes_ok()) {
    finding("valid schedule has buffer-lifetime errors");
  }
  if (!s.has_comm()) {
    check_timing(s, chunk_costs, sim);
  }
  const auto peaks = recompute_peaks(s, chunk_mm, sim);
  for (stage_index st = 0; st < p; ++st) {
    if (!close(peaks[st], mem.peak_memory(st))) {
      finding("memory checker peak differs from the recomputation in simulated order");
    }
  }
  if (s.has_comm()) {
    return;
  }
  // A valid compute-only schedule lowers to a valid, deadlock-free one with the same compute
  // ops in the same order on every stage.
  lowering_options lo;
  lo.receives = in.below(2) == 0 ? receive_placement::eager : receive_placement::late;
  lo.costs = costs;
  const schedule low = lower_communication(s, lo);
  if (!validate(low).ok() || !simulate(low, costs).completed()) {
    finding("lower_communication of a valid schedule is invalid or deadlocks");
  }
  for (stage_index st = 0; st < p; ++st) {
    std::vector<op> compute;
    for (const op& o : low.ops(st)) {
      if (is_compute(o.kind)) {
        compute.push_back(o);
      }
    }
    if (compute != s.stage_ops(st)) {
      finding("lower_communication changed a stage's compute ops");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_source in{data, size};
  try {
    run(in);
  } catch (const pipesched::invalid_argument&) {
    // placement::custom refusing a non-permutation: expected
  }
  return 0;
}
