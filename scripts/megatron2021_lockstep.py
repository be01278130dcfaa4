#!/usr/bin/env python3
"""Megatron-LM of April 2021's interleaved 1F1B replayed in lock step (docs/validation.md).

megatron/schedules.py at aed2f75e20 (Narayanan et al.'s code) runs, in its steady state, a
forward and a backward and then one batched exchange with both pipeline neighbours, waited on,
before the next pair. This replays that order on the per-chunk op times a plan exports
(`pipesched plan ... --export PREFIX` writes PREFIX.costs.json) twice: in lock step (each
exchange ends T after both sides reach it) and data-driven (each op starts when its stage is free
and its input has arrived; the sending op lasts T longer, as `--p2p blocking` times it), and
prints both makespans. A check of one modelling question, not part of the library.

  scripts/megatron2021_lockstep.py PREFIX.costs.json MICROBATCHES TRANSFER_SECONDS
"""

import json
import sys


def main():
    costs = json.load(open(sys.argv[1]))
    m = int(sys.argv[2])
    t_comm = float(sys.argv[3])
    fwd = [[c["forward"] for c in stage] for stage in costs["chunks"]]
    bwd = [[c["backward_input"] + c["backward_weight"] + c["recompute"] for c in stage]
           for stage in costs["chunks"]]
    p, v = len(fwd), len(fwd[0])
    total = m * v

    def chunk(k, forward):
        c = (k % (p * v)) // p
        return c if forward else v - 1 - c

    def microbatch(k):
        return (k // (p * v)) * p + k % p

    def program(r):
        """Rank r's steps as that code runs them: (ops computed, exchange flags)."""
        first, last = r == 0, r == p - 1
        all_warm = m == p
        warm = total if all_warm else min((p - r - 1) * 2 + (v - 1) * p, total)
        rest = total - warm
        steps = [([], {"rp": not first})]
        for k in range(warm):
            rp = not (first and chunk(k + 1, True) == 0) and k != total - 1
            sn = not (last and chunk(k, True) == v - 1)
            flags = {"sn": sn, "rp": rp}
            if k == warm - 1 and not all_warm:
                flags["rn"] = not last
            steps.append(([("F", chunk(k, True), microbatch(k))], flags))
        for k in range(rest):
            fk = k + warm
            rp = not (first and chunk(fk - (p - 1), True) == v - 1) and k != rest - 1
            rn = not (last and chunk(k - (p - 1), False) == 0)
            sn = not (last and chunk(fk, True) == v - 1)
            sp = not (first and chunk(k, False) == 0)
            steps.append(([("F", chunk(fk, True), microbatch(fk)),
                           ("B", chunk(k, False), microbatch(k))],
                          {"sn": sn, "rp": rp, "sp": sp, "rn": rn}))
        if all_warm:
            steps.append(([], {"rn": not last}))
        for k in range(rest, total):
            rn = not (last and chunk(k + 1, False) == v - 1) and k != total - 1
            sp = not (first and chunk(k, False) == 0)
            steps.append(([("B", chunk(k, False), microbatch(k))], {"sp": sp, "rn": rn}))
        return steps

    progs = [program(r) for r in range(p)]

    def steps_with(flag):
        return {r: [i for i, (_, f) in enumerate(progs[r]) if f.get(flag)] for r in range(p)}

    sn, rp, sp, rn = steps_with("sn"), steps_with("rp"), steps_with("sp"), steps_with("rn")
    peer = {}
    for r in range(p):
        nxt, prv = (r + 1) % p, (r - 1) % p
        assert len(sn[r]) == len(rp[nxt]) and len(sp[r]) == len(rn[prv])
        for a, b in zip(sn[r], rp[nxt]):
            peer[(r, a, "sn")], peer[(nxt, b, "rp")] = (nxt, b), (r, a)
        for a, b in zip(sp[r], rn[prv]):
            peer[(r, a, "sp")], peer[(prv, b, "rn")] = (prv, b), (r, a)

    def seconds(r, kind, c):
        return fwd[r][c] if kind == "F" else bwd[r][c]

    def replay(items, advance):
        """Each rank's items in order; advance(r, i) times item i of rank r and returns its end,
        or None while what it waits for has not started. Returns the makespan."""
        pos, clock = [0] * p, [0.0] * p
        moved = True
        while moved:
            moved = False
            for r in range(p):
                while pos[r] < len(items[r]):
                    end = advance(r, pos[r], clock[r])
                    if end is None:
                        break
                    clock[r] = end
                    pos[r] += 1
                    moved = True
        assert pos == [len(x) for x in items], "the replay did not finish"
        return max(clock)

    # Lock step: a step's exchange starts after its ops; it ends T after both sides started it.
    start = [[None] * len(progs[r]) for r in range(p)]

    def lock_step_advance(r, i, now):
        ops, flags = progs[r][i]
        if start[r][i] is None:
            start[r][i] = now + sum(seconds(r, k, c) for k, c, _ in ops)
        peers = [peer[(r, i, f)] for f in ("sn", "rp", "sp", "rn") if flags.get(f)]
        if any(start[pr][pi] is None for pr, pi in peers):
            return None
        return max([start[r][i]] + [max(start[r][i], start[pr][pi]) + t_comm
                                    for pr, pi in peers])

    lock_step = replay(progs, lock_step_advance)

    # Data-driven, the same order per rank: an op starts when its stage is free and its input
    # has arrived; a sending op lasts T longer.
    order = [[op for ops, _ in progs[r] for op in ops] for r in range(p)]
    done = {}

    def data_driven_advance(r, i, now):
        kind, c, mb = order[r][i]
        vs = c * p + r
        if kind == "F":
            dep = ("F", vs - 1, mb) if vs > 0 else None
        else:
            dep = ("B", vs + 1, mb) if vs < p * v - 1 else ("F", vs, mb)
        if dep is not None and dep not in done:
            return None
        sends = vs < p * v - 1 if kind == "F" else vs > 0
        begin = max(now, done[dep] if dep else 0.0)
        done[(kind, vs, mb)] = begin + seconds(r, kind, c) + (t_comm if sends else 0.0)
        return done[(kind, vs, mb)]

    data_driven = replay(order, data_driven_advance)
    print(f"p={p} v={v} m={m} T={t_comm * 1e3:.2f} ms: lock step {lock_step:.4f} s, "
          f"data-driven {data_driven:.4f} s, ratio {lock_step / data_driven:.4f}")


if __name__ == "__main__":
    main()
