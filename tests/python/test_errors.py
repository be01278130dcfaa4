"""Invalid input raises InvalidArgument (a ValueError) carrying the library's message."""

import pytest

import pipesched as ps


def raises(match):
    return pytest.raises(ValueError, match=match)


def test_invalid_argument_is_a_value_error():
    assert issubclass(ps.InvalidArgument, ValueError)
    with pytest.raises(ps.InvalidArgument, match=r"stages \(p=0\) must be at least 1"):
        ps.generate("1f1b", stages=0, microbatches=8)


def test_generator_errors():
    with raises(r'unknown schedule "nope" \(known: gpipe, .*zb-h1'):
        ps.generate("nope", stages=4, microbatches=8)
    with raises(r"microbatches \(m=0\) must be at least 1"):
        ps.generate("zb-h1", stages=4, microbatches=0)
    with raises(r"chunks \(v=3\) must be 2 for this schedule"):
        ps.generate("zb-v", stages=4, microbatches=8, chunks=3)
    with raises(r"search_evaluations: only meaningful for schedules that search \(.*\), not \"1f1b\""):
        ps.generate("1f1b", 4, 8, search_evaluations=10)
    with raises(r"1f1b: over memory_limit: stage 0 exceeds its memory limit 2"):
        ps.generate("1f1b", 4, 8, memory_limit=2)
    with raises(r'recv: must be eager or late, not "soon"'):
        ps.generate("1f1b", 4, 8, with_comm=True, recv="soon")
    # The rules between options are the library's (make_request), named in keyword terms.
    with raises(r"^recv: only meaningful with with_comm$"):
        ps.generate("1f1b", 4, 8, recv="late")
    with raises(r"^recompute_policy: must be before-backward or idle-slot, not \"soon\"$"):
        ps.generate("1f1b", 4, 8, recompute="all", recompute_policy="soon")
    with raises(r"^search_budget: only meaningful when a schedule that searches \(.*zb-auto.*\) "
                r"is generated, not with a given schedule$"):
        ps.generate(ps.generate("1f1b", 4, 8), search_budget=5)
    with raises(r'^recv: must be eager or late, not "soon"$'):
        ps.lower_communication(ps.generate("1f1b", 2, 2), recv="soon")


def test_model_argument_errors():
    with raises(r"cost: expected \(TF, TB, TW\[, TC\]\), got 2 value\(s\)"):
        ps.simulate(ps.generate("1f1b", 2, 2), cost=(1, 1))
    with raises(r"cost: expected a CostModel or numbers"):
        ps.simulate(ps.generate("1f1b", 2, 2), cost="fast")
    with raises(r"cost_model"):  # the library's own rule on negative costs
        ps.simulate(ps.generate("1f1b", 2, 2), cost=(1, -1, 1))
    with raises(r"cost and costs: give one"):
        ps.simulate(ps.generate("1f1b", 2, 2), cost=(1, 1, 1), costs="x.json")
    with raises(r"costs /nonexistent.json: "):
        ps.simulate(ps.generate("1f1b", 2, 2), costs="/nonexistent.json")
    with raises(r"memory: expected \(MB, MW\[, MIN\]\), got 4 value"):
        ps.check_memory(ps.generate("1f1b", 2, 2), memory=(1, 0.5, 2, 3))
    with raises(r"M_W|weight_grad_input"):
        ps.check_memory(ps.generate("1f1b", 2, 2), memory=(1, 2))


def test_io_errors():
    with raises(r"from_torch_csv: row 1, column 2"):
        ps.from_torch_csv("0F0,0X1\n")
    with raises(r"/ops/0/0: must be an object, not string"):
        ps.from_json('{"version": 1, "name": "x", "stages": 2, "microbatches": 1, "chunks": 1, "ops": [["F0"], 7]}')
    with raises(r"csv_layout: must be 'steps' or 'list'"):
        ps.to_torch_csv(ps.generate("1f1b", 2, 2), csv_layout="grid")
    with raises(r"input_format: must be 'json' or 'torch-csv'"):
        ps.read_schedule("x", input_format="yaml")


def test_ir_errors():
    with raises(r'Op: kind "Q" is not an op kind \(known: F, B, W, BW'):
        ps.Op("Q", 0)
    with raises(r"Op: recompute marks an F only, not BW"):
        ps.Op("BW", 0, recompute=True)
    with raises(r"placement: stages \(p=0\) must be at least 1"):
        ps.Schedule(0, 1)
    with raises(r"ops has 1 stage list\(s\), must have one per stage \(p=2\)"):
        ps.Schedule(2, 1, ops=[[]])
    with pytest.raises(IndexError, match=r"stage 5 out of range \(p=2\)"):
        ps.Schedule(2, 1).stage_ops(5)
    with raises(r"count: kind \"bad\" is not a violation kind"):
        ps.validate(ps.generate("1f1b", 2, 2)).count("bad")
    with pytest.raises(TypeError):
        ps.Op("F", -1)  # micro-batch indices are unsigned
