#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/sim/cost_model.hpp"
#include "pipesched/validate/traversal.hpp"

namespace pipesched::detail {

/// Exact start times of a compute-only schedule under the paper's timing model (background §2):
/// an op starts at max(end of the previous op on its stage, end of each producer + T_comm when
/// the producer ran on another stage). The generators use it to score candidates and the
/// tests use it for closed forms; the public simulator lives in sim/.
struct gen_stage_times {
  std::vector<double> start;  ///< per op of the stage, in list order
  double first_start = 0.0;
  double last_end = 0.0;
  double busy = 0.0;
  double span() const noexcept { return last_end - first_start; }
};

struct gen_timing {
  bool complete = true;  ///< false when the schedule deadlocks (times are then partial)
  std::vector<gen_stage_times> stages;
  double makespan = 0.0;  ///< time 0 to the last end
  double max_span = 0.0;  ///< the longest stage span (the paper's objective)
};

inline gen_timing compute_timing(const schedule& sched, const cost_model& costs) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const std::size_t cells = std::size_t{pl.total_chunks()} * m;
  constexpr double unknown = -1.0;
  // End times per (global chunk, mb) of the three events ops wait for.
  std::vector<double> f_end(cells, unknown);
  std::vector<double> grad_end(cells, unknown);
  std::vector<double> b_end(cells, unknown);
  gen_timing out;
  out.stages.resize(p);
  std::vector<double> stage_end(p, 0.0);
  std::vector<char> started(p, 0);
  for (stage_index s = 0; s < p; ++s) {
    out.stages[s].start.assign(sched.ops(s).size(), 0.0);
  }
  const auto res = traverse(sched, [&](stage_index s, std::size_t idx, const op& o) {
    double start = stage_end[s];
    if (o.chunk < pl.chunks() && o.mb < m) {
      for (const requirement& r : requirements_of(pl, s, o, false)) {
        const std::size_t cell = std::size_t{r.chunk} * m + r.mb;
        double t = 0.0;
        if (r.what == event_kind::forward_done) {
          t = f_end[cell];
        } else if (r.what == event_kind::input_grad_done) {
          t = grad_end[cell];
        } else {
          t = b_end[cell];
        }
        start = std::max(start, t + costs.comm(r.stage, s));
      }
    }
    const double dur = costs.duration(s, o.kind, o.chunk);
    const double end = start + dur;
    gen_stage_times& st = out.stages[s];
    st.start[idx] = start;
    if (!started[s]) {
      started[s] = 1;
      st.first_start = start;
    }
    st.last_end = end;
    st.busy += dur;
    stage_end[s] = end;
    if (o.chunk < pl.chunks() && o.mb < m) {
      const std::size_t cell = std::size_t{pl.global(s, o.chunk)} * m + o.mb;
      if (o.kind == op_kind::forward) {
        f_end[cell] = end;
      } else if (o.kind == op_kind::backward_input) {
        grad_end[cell] = end;
        b_end[cell] = end;
      } else if (o.kind == op_kind::backward_full) {
        grad_end[cell] = end;
      }
    }
  });
  out.complete = res.complete;
  for (const auto& st : out.stages) {
    out.makespan = std::max(out.makespan, st.last_end);
    out.max_span = std::max(out.max_span, st.span());
  }
  return out;
}

}  // namespace pipesched::detail
