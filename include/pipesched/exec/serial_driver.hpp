#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "pipesched/exec/detail/channel.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/run_stage.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"

namespace pipesched {

/// Runs every stage of `sched` in the calling thread, one op at a time, always picking a stage
/// whose next op has its inputs (the order of traverse(): deterministic, stage 0 first).
/// Messages between stages go through in-process channels exactly as with run_threaded.
/// Throws deadlock_error (what() holds deadlock_witness::describe()) or invalid_argument for a
/// schedule that can't run, before running anything; execution_error when an op throws
/// (no later op runs).
template <class E>
void run_serial(E& e, const schedule& sched) {
  static_assert(detail::check_executor<E>());
  // Only a model of executor gets further: the static_assert above explains a near miss in
  // plain words instead of a wall of template errors.
  if constexpr (executor<E>) {
    using message = typename E::message;
    detail::require_runnable(sched, "run_serial");
    detail::channel_hub<message> hub(sched.stages(), /*blocking=*/false);
    std::vector<detail::stage_runner<message>> runners;
    std::vector<detail::channel_endpoint<message>> endpoints;
    runners.reserve(sched.stages());
    endpoints.reserve(sched.stages());
    for (stage_index s = 0; s < sched.stages(); ++s) {
      runners.emplace_back(sched, s);
      endpoints.emplace_back(hub, s);
    }
    // traverse visits a SEND/RECV pair back to back, in either order; a RECV seen first waits
    // for its SEND so the channel holds the message in time.
    std::optional<stage_index> deferred_recv;
    const placement& pl = sched.layout();
    const traversal_result r = traverse(sched, [&](stage_index s, std::size_t i, const op& o) {
      PIPESCHED_ASSERT(runners[s].position() == i, "traverse visits each stage in list order");
      (void)i;
      if (o.kind == op_kind::recv_forward || o.kind == op_kind::recv_backward) {
        const auto partner = comm_partner(pl, s, o);
        const auto& peer = runners[partner->stage];
        if (!peer.done() && sched.ops(partner->stage)[peer.position()] == partner->o) {
          deferred_recv = s;
          return;
        }
      }
      runners[s].step(e, endpoints[s]);
      if (deferred_recv && (o.kind == op_kind::send_forward || o.kind == op_kind::send_backward)) {
        const stage_index t = *deferred_recv;
        deferred_recv.reset();
        runners[t].step(e, endpoints[t]);
      }
    });
    if (!r.complete) {  // unreachable after validation; kept so a bug can never pass silently
      throw deadlock_error("run_serial: schedule \"" + sched.name() + "\"", r.witness);
    }
  }
}

}  // namespace pipesched
