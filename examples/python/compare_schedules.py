#!/usr/bin/env python3
"""1F1B, ZB-H1, ZB-H2 and zb-auto side by side for a transformer's dimensions.

Costs and memory come from the library's per-layer formulas (pipesched.transformer_costs,
docs/model.md section 5) for one stage's slice of the model; zb-auto searches within 1F1B's
memory (p * M_B per stage) and reports its lower bound. Run it from a build
(PYTHONPATH=build/python) or after `pip install .`:

    python3 examples/python/compare_schedules.py --hidden 4096 --heads 32 --stages 8
"""

import argparse

import pipesched as ps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=2048, help="hidden size h")
    ap.add_argument("--heads", type=int, default=16, help="attention heads a")
    ap.add_argument("--sequence", type=int, default=2048, help="sequence length s")
    ap.add_argument("--microbatch", type=int, default=1, help="sequences per micro-batch b")
    ap.add_argument("--layers", type=int, default=4, help="transformer layers per stage")
    ap.add_argument("--stages", type=int, default=4, help="pipeline stages p")
    ap.add_argument("--microbatches", type=int, default=16, help="micro-batches m")
    ap.add_argument("--comm", type=float, default=0.0,
                    help="latency of one transfer, in forward-times of one layer")
    args = ap.parse_args()

    prof = ps.transformer_costs(args.hidden, args.heads, args.sequence, args.microbatch,
                                args.layers)
    cost, memory = prof.cost_model(args.comm), prof.memory_model()
    c = prof.costs
    print(f"h={args.hidden} a={args.heads} s={args.sequence} b={args.microbatch}, "
          f"{args.layers} layers per stage, p={args.stages} m={args.microbatches}")
    print(f"per stage: T_F={c.forward:.3g} T_B={c.backward_input:.3g} "
          f"T_W={c.backward_weight:.3g} (one layer's forward = 1), "
          f"M_B={prof.memory.activation:.3g} M_W={prof.memory.weight_grad_input:.3g}")
    limit = args.stages * prof.memory.activation  # 1F1B's peak
    print(f"{'schedule':<10}| {'makespan':>9} | {'bubble':>7} | {'peak/M_B':>8} | lower bound")
    for name in ("1f1b", "zb-h1", "zb-h2", "zb-auto"):
        g = ps.generate_result(name, args.stages, args.microbatches, cost=cost, memory=memory,
                               memory_limit=limit if name == "zb-auto" else None)
        r = ps.simulate(g.schedule, cost=cost, record_ops=False, critical_path=False)
        peak = ps.check_memory(g.schedule, memory=memory, record_curve=False).max_peak
        bound = f"{g.lower_bound:.4g}" if g.lower_bound is not None else "-"
        print(f"{name:<10}| {r.makespan:>9.4g} | {100 * r.bubble_rate:>6.1f}% | "
              f"{peak / prof.memory.activation:>8.3g} | {bound}")


if __name__ == "__main__":
    main()
