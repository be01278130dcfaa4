"""Generators, the IR, validate, simulate and check_memory through the Python module."""

import pickle

import pytest

import pipesched as ps


def one_based(schedule, stage):
    """A stage's ops as the zero-bubble paper prints them (1-based micro-batches)."""
    return " ".join(f"{o.kind}{o.mb + 1}" for o in schedule.stage_ops(stage))


# docs/model.md section 6, the same goldens as tests/gen/golden.hpp.
GOLDEN = {
    "1f1b": [
        "F1 F2 F3 F4 BW1 F5 BW2 F6 BW3 F7 BW4 F8 BW5 BW6 BW7 BW8",
        "F1 F2 F3 BW1 F4 BW2 F5 BW3 F6 BW4 F7 BW5 F8 BW6 BW7 BW8",
        "F1 F2 BW1 F3 BW2 F4 BW3 F5 BW4 F6 BW5 F7 BW6 F8 BW7 BW8",
        "F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5 F6 BW6 F7 BW7 F8 BW8",
    ],
    "zb-h1": [
        "F1 F2 F3 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 F8 B5 W5 B6 W6 B7 W7 B8 W8",
        "F1 F2 F3 B1 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 F8 B6 W5 B7 W6 B8 W7 W8",
        "F1 F2 B1 F3 B2 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 F8 B7 W5 B8 W6 W7 W8",
        "F1 B1 F2 B2 F3 B3 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 F8 B8 W5 W6 W7 W8",
    ],
    "zb-h2": [
        "F1 F2 F3 F4 F5 F6 F7 B1 W1 F8 B2 W2 B3 W3 B4 W4 B5 W5 B6 W6 B7 W7 B8 W8",
        "F1 F2 F3 F4 F5 B1 F6 B2 F7 B3 W1 F8 B4 W2 B5 W3 B6 W4 B7 W5 B8 W6 W7 W8",
        "F1 F2 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 W1 F8 B6 W2 B7 W3 B8 W4 W5 W6 W7 W8",
        "F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 W1 F8 B8 W2 W3 W4 W5 W6 W7 W8",
    ],
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_sequences(name):
    s = ps.generate(name, stages=4, microbatches=8)
    assert [one_based(s, st) for st in range(4)] == GOLDEN[name]
    assert (s.name, s.stages, s.microbatches, s.chunks) == (name, 4, 8, 1)


def test_every_registered_generator_runs_and_validates():
    names = [g.name for g in ps.schedules()]
    assert {"gpipe", "1f1b", "zb-h1", "zb-h2", "zb-v", "zb-auto"} <= set(names)
    for g in ps.schedules():
        s = ps.generate(g.name, stages=4, microbatches=8)
        assert s.chunks == g.default_chunks, g.name
        assert ps.validate(s).ok, g.name
        assert len(s) == sum(len(ops) for ops in s.ops)


def test_ops_repr_and_str():
    s = ps.generate("1f1b", stages=2, microbatches=2)
    assert s.ops == [[ps.Op("F", 0), ps.Op("F", 1), ps.Op("BW", 0), ps.Op("BW", 1)],
                     [ps.Op("F", 0), ps.Op("BW", 0), ps.Op("F", 1), ps.Op("BW", 1)]]
    assert repr(s.stage_ops(0)) == "[F0, F1, BW0, BW1]"
    assert repr(s) == "Schedule(name='1f1b', p=2, m=2, v=1, ops=[[F0, F1, BW0, BW1], [F0, BW0, F1, BW1]])"
    assert str(s) == "1f1b p=2 m=2 v=1\nstage 0: F0 F1 BW0 BW1\nstage 1: F0 BW0 F1 BW1"
    assert repr(ps.Op(ps.OpKind.B, 3, chunk=1)) == "B3.1"
    assert repr(ps.Op("F", 7, overlap_next=True)) == "F7+"
    assert repr(ps.Op("F", 2, recompute=True)) == "F2~" and ps.Op("F", 2, recompute=True).recompute
    v = ps.generate("zb-v", stages=2, microbatches=4)
    assert v.placement.kind == "v" and v.chunks == 2
    assert "F0.1" in str(v)


def test_op_kinds_come_from_the_library_table():
    names = list(ps.OpKind.__members__)
    assert names[:4] == ["F", "B", "W", "BW"]
    assert {"SEND_F", "RECV_F", "SEND_B", "RECV_B"} <= set(names)
    assert ps.OpKind.F.is_compute and ps.OpKind.SEND_F.is_comm
    assert str(ps.OpKind.BW) == "BW"
    for n in names:  # every kind round-trips through its short name
        assert ps.Op(n, 0).kind == ps.OpKind.__members__[n]


def test_op_equality_hash_and_same_work():
    a, b = ps.Op("F", 7), ps.Op("F", 7, overlap_next=True)
    assert a != b and a.same_work(b)
    assert len({a, ps.Op("F", 7), b}) == 2


def test_schedule_built_by_hand_and_edited():
    s = ps.Schedule(2, 1, name="mine")
    s.set_stage_ops(0, [ps.Op("F", 0), ps.Op("BW", 0)])
    s.set_stage_ops(1, [ps.Op("F", 0), ps.Op("BW", 0)])
    assert ps.validate(s).ok
    assert s == ps.generate("1f1b", stages=2, microbatches=1)  # names are labels
    s.ops = [[ps.Op("F", 0), ps.Op("B", 0), ps.Op("W", 0)], [ps.Op("F", 0), ps.Op("BW", 0)]]
    assert ps.validate(s).ok
    pl = ps.Placement.loop(2, 2)
    t = ps.Schedule(pl, 4)
    assert (t.stages, t.chunks, t.placement.global_chunk(1, 1)) == (2, 2, 3)
    assert pickle.loads(pickle.dumps(s)) == s


def test_validate_reports_violations_and_the_deadlock_witness():
    # Both stages wait on each other: stage 0 needs stage 1's B before its F reaches stage 1.
    s = ps.Schedule(2, 1, ops=[[ps.Op("BW", 0), ps.Op("F", 0)], [ps.Op("F", 0), ps.Op("BW", 0)]])
    r = ps.validate(s)
    assert not r.ok and not r
    assert r.total == len(r.violations) > 0
    kinds = {v.kind for v in r.violations}
    assert "local_order" in kinds
    assert r.count("local_order") >= 1
    assert all(v.message for v in r.violations)
    d = r.deadlock
    assert d is not None
    assert d.stuck and d.stuck[0].stage == 0 and d.stuck[0].op == ps.Op("BW", 0)
    assert d.describe().startswith("deadlock:")

    missing = ps.Schedule(2, 1, ops=[[ps.Op("F", 0)], [ps.Op("F", 0), ps.Op("BW", 0)]])
    r = ps.validate(missing)
    assert any(v.kind == "missing" and v.op_index is None for v in r.violations)


def test_simulate_times_and_numpy():
    s = ps.generate("1f1b", stages=4, microbatches=8)
    r = ps.simulate(s)  # unit costs: BW lasts T_B + T_W
    assert r.makespan == 33 and r.completed and r.deadlock is None
    assert abs(r.bubble_rate - 9 / 33) < 1e-12
    assert [t.op for t in r.ops[0][:2]] == [ps.Op("F", 0), ps.Op("F", 1)]
    assert r.ops[0][4].start == 10 and r.ops[0][4].duration == 2
    starts, ends = r.starts, r.ends
    assert len(starts) == 4 and len(starts[0]) == len(s.stage_ops(0))
    if ps.HAS_NUMPY:
        import numpy as np
        assert isinstance(starts[0], np.ndarray)
        assert float((ends[0] - starts[0]).sum()) == r.stages[0].busy
    assert list(starts[0][:4]) == [0, 1, 2, 3]
    assert r.critical_path[-1][0] in range(4)
    slow = ps.simulate(s, cost=(1, 2, 1, 0.5))
    assert slow.makespan > r.makespan
    assert ps.simulate(s, cost=ps.CostModel.uniform(1, 2, 1, 0.5)).makespan == slow.makespan


def test_check_memory_peaks_and_limits():
    s = ps.generate("1f1b", stages=4, microbatches=8)
    m = ps.check_memory(s)
    assert m.ok and m.peak_memory(0) == 4 and m.max_peak == 4
    assert m.stages[0].peak_stage_units == 4
    assert len(m.stages[0].curve) == len(s.stage_ops(0))
    over = ps.check_memory(s, memory_limit=3)
    assert not over.within_budget
    assert over.violations[0].stage == 0 and "exceeds" in over.violations[0].message
    per_stage = ps.check_memory(s, memory=(2, 1), memory_limit=[8, 8, 8, 8])
    assert per_stage.ok and per_stage.max_peak == 8
    timed = ps.check_memory(s, simulation=ps.simulate(s))
    assert len(timed.stages[0].curve_time) == len(s.stage_ops(0))


def test_zb_search_result_has_its_lower_bound():
    g = ps.generate_result("zb-auto", 4, 8, cost=(1, 1, 1), memory_limit=4,
                           search_evaluations=50)
    assert g.lower_bound is not None and g.span is not None
    assert g.lower_bound <= g.span + 1e-9
    assert ps.validate(g.schedule).ok
    assert ps.check_memory(g.schedule, memory_limit=4).ok
    hand = ps.generate_result("zb-h1", 4, 8)
    assert hand.lower_bound is None and hand.memory_violations == []
    over = ps.generate_result("1f1b", 4, 8, memory_limit=2)
    assert [v.stage for v in over.memory_violations][:1] == [0]
    # One limit per stage: only the stage over its own limit is named.
    per_stage = ps.generate_result("1f1b", 4, 8, memory_limit=[4, 3, 1.5, 1])
    assert [v.stage for v in per_stage.memory_violations] == [2]
    g = ps.generate_result("zb-auto", 4, 8, cost=(1, 1, 1), memory_limit=[8, 3, 2, 1],
                           search_evaluations=50)
    assert ps.check_memory(g.schedule, memory_limit=[8, 3, 2, 1]).ok
    with pytest.raises(ValueError, match=r"memory_limit: must hold one value or one per stage "
                                         r"\(p=4\), got 2"):
        ps.generate_result("zb-auto", 4, 8, memory_limit=[4, 4])
    with pytest.raises(TypeError):
        ps.generate_result("zb-auto", 4, 8, memory_limit="lots")


def test_with_comm_lowering():
    s = ps.generate("1f1b", stages=2, microbatches=2, with_comm=True)
    assert s.has_comm() and ps.validate(s).ok
    assert ps.lower_communication(ps.generate("1f1b", 2, 2)) == s
    late = ps.generate("1f1b", 2, 2, with_comm=True, recv="late")
    assert ps.validate(late).ok


def test_transformer_costs_feed_the_models():
    prof = ps.transformer_costs(2048, 16, 2048, 1, layers=4)  # T_F of one layer = 1
    assert prof.costs.forward == 4
    assert abs(prof.costs.backward_input + prof.costs.backward_weight - 8) < 1e-9
    assert prof.memory.activation == 4
    s = ps.generate("1f1b", 4, 8)
    r = ps.simulate(s, cost=prof.cost_model())
    assert r.makespan > ps.simulate(s).makespan
    assert ps.check_memory(s, memory=prof.memory_model()).max_peak == 16
    with pytest.raises(ValueError, match="units: must be 'absolute' or 'per_layer'"):
        ps.transformer_costs(1, 1, 1, 1, units="flops")
