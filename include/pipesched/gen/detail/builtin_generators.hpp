#pragma once

#include "pipesched/gen/dualpipe.hpp"
#include "pipesched/gen/dualpipev.hpp"
#include "pipesched/gen/gpipe.hpp"
#include "pipesched/gen/interleaved.hpp"
#include "pipesched/gen/one_f_one_b.hpp"
#include "pipesched/gen/registry.hpp"
#include "pipesched/gen/v_shape.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/gen/zb_v.hpp"
#include "pipesched/gen/zero_bubble.hpp"

// The list of built-in generators, once: gen/builtin_registry.hpp's builtin_registry() calls it,
// compiled in the library (src/pipesched.cpp) or inline with PIPESCHED_HEADER_ONLY.

namespace pipesched::detail {

/// Adds the built-in generators to `r`, under their names, with their `pipesched list` lines.
inline void add_builtin_generators(generator_registry& r) {
  r.add(gpipe{}, "GPipe: all forwards, then all fused backwards; peak memory m*M_B");
  r.add(gpipe{true}, "GPipe with split backward (B then W at once), for comparison");
  r.add(one_f_one_b{}, "1F1B: warm-up forwards, then one forward one backward; peak p*M_B");
  r.add(one_f_one_b{true}, "1F1B with split backward (B then W at once), for comparison");
  r.add(zb_h1{}, "ZB-H1: zero-bubble handcrafted, 1F1B memory, bubble (p-1)(TF+TB-TW)");
  r.add(zb_h2{}, "ZB-H2: zero-bubble handcrafted, (2p-1)*M_B memory, no bubble at equal costs");
  r.add(interleaved_1f1b{},
        "Interleaved 1F1B (Megatron virtual pipeline): v chunks per stage, bubble 1/v of 1F1B's",
        2);
  r.add(zb_v{}, "ZB-V: V placement, 2 chunks, cost-aware greedy; 1F1B memory, zero bubble", 2);
  r.add(v_half{}, "V-Half: V placement, 2 chunks; (p+2)//2 stage activations, bubble ~p/(2m)", 2);
  r.add(v_min{}, "V-Min: V placement, 2 chunks; (p+4)//3 stage activations, bubble ~2p/(3m)", 2);
  r.add(dualpipev{},
        "DualPipeV (PyTorch ScheduleDualPipeV): V placement, 2 chunks, overlapped F&B pairs; "
        "m >= 2p",
        2);
  r.add(dualpipe{},
        "DualPipe (DeepSeek-V3): two routes in opposite directions, stage s and p-1-s per rank, "
        "overlapped F&B pairs; p even, m even >= 2p",
        2);
  r.add(zb_auto{},
        "ZB automatic: memory-bounded greedy search (memory_limit, default p*M_B) + bound");
  r.add(zb_auto{zb_memory_preset::one_p}, "ZB-1p: automatic zero-bubble with limit p*M_B");
  r.add(zb_auto{zb_memory_preset::two_p}, "ZB-2p: automatic zero-bubble with limit 2p*M_B");
}

}  // namespace pipesched::detail
