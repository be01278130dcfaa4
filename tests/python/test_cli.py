"""The module's results equal the `pipesched` CLI's on a small grid (same library, two faces).

The CLI is $PIPESCHED_CLI (set by the ctest), else build*/bin/pipesched in the repository;
the tests are skipped when neither exists.
"""

import glob
import json
import os
import subprocess

import pytest

import pipesched as ps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_cli():
    path = os.environ.get("PIPESCHED_CLI")
    if path:
        return path
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "bin", "pipesched")))
    return found[0] if found else None


CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="no pipesched CLI built (set PIPESCHED_CLI)")

GRID = [(name, p, m) for name in ("gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b",
                                  "zb-v", "v-half", "v-min", "zb-auto")
        for p, m in ((2, 4), (3, 6), (4, 8))]
MODEL = ["--cost", "1,1.5,0.5,0.1", "--memory", "1,0.5"]


def cli(*args):
    out = subprocess.run([CLI, *args], capture_output=True, text=True, check=False)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout


@pytest.mark.parametrize("name,p,m", GRID)
def test_generate_json_and_csv_equal_the_cli(name, p, m):
    shape = ["-s", name, "-p", str(p), "-m", str(m), "--search-evaluations", "20"] \
        if name == "zb-auto" else ["-s", name, "-p", str(p), "-m", str(m)]
    kw = {"search_evaluations": 20} if name == "zb-auto" else {}
    s = ps.generate(name, stages=p, microbatches=m, cost=(1, 1.5, 0.5, 0.1), **kw)
    assert json.loads(cli("generate", *shape, *MODEL, "--format", "json")) == \
        json.loads(ps.to_json(s))
    assert cli("generate", *shape, *MODEL, "--format", "torch-csv") == ps.to_torch_csv(s)


@pytest.mark.parametrize("name,p,m", GRID)
def test_simulate_json_equals_the_cli(name, p, m):
    extra = ["--search-evaluations", "20"] if name == "zb-auto" else []
    kw = {"search_evaluations": 20} if name == "zb-auto" else {}
    g = ps.generate_result(name, p, m, cost=(1, 1.5, 0.5, 0.1), memory=(1, 0.5), **kw)
    ours = ps.simulation_json(g.schedule, cost=(1, 1.5, 0.5, 0.1), memory=(1, 0.5),
                              lower_bound=g.lower_bound)
    theirs = cli("simulate", "-s", name, "-p", str(p), "-m", str(m), *MODEL, *extra, "--json")
    assert json.loads(ours) == json.loads(theirs)
    r = ps.simulate(g.schedule, cost=(1, 1.5, 0.5, 0.1))
    assert json.loads(theirs)["makespan"] == r.makespan


def test_export_schedule_writes_what_the_cli_exports(tmp_path):
    # The library's export (io/schedule_export.hpp), from Python and from `pipesched pack`'s
    # writer: the same five files; they read back as the schedule.
    s = ps.generate("zb-h1", 4, 8, recompute=[0])
    paths = ps.export_schedule(str(tmp_path / "zb"), s, cost=(1, 2, 1, 0.5), memory=(4, 1))
    assert [p[len(str(tmp_path)) + 1:] for p in paths] == [
        "zb.csv", "zb.compute.csv", "zb.schedule.json", "zb.costs.json", "zb.memory.json"]
    assert ps.read_schedule(paths[2]) == s
    assert ps.read_schedule(paths[1]) == ps.generate("zb-h1", 4, 8)
    assert ps.validate(ps.read_schedule(paths[0])).ok
    ours = json.loads(cli("simulate", "-i", paths[1], "--costs", paths[3], "--json"))
    assert ours["makespan"] == ps.simulate(ps.generate("zb-h1", 4, 8),
                                           cost=(1, 2, 1, 0.5)).makespan
    with pytest.raises(ValueError, match="cannot open for writing"):
        ps.export_schedule(str(tmp_path / "no" / "such" / "x"), s)


def test_export_schedule_refuses_a_prefix_that_names_no_file_or_overwrites_an_input(tmp_path):
    # The library's rule (check_export_prefix, write_export), as the CLI's --export has it.
    s = ps.generate("1f1b", 2, 2)
    with pytest.raises(ValueError, match=r"schedule_export: prefix: must not be empty"):
        ps.export_schedule("", s)
    with pytest.raises(ValueError, match=r"is a directory: give a file name in it"):
        ps.export_schedule(str(tmp_path) + "/", s)
    with pytest.raises(ValueError, match=r"is a directory"):
        ps.export_schedule(str(tmp_path), s)
    costs = tmp_path / "c.costs.json"
    costs.write_text('{"version": 1, "forward": 1, "backward_input": 1, "backward_weight": 1}')
    before = costs.read_text()
    with pytest.raises(ValueError, match=r"c\.costs\.json would overwrite costs .*c\.costs\.json"):
        ps.export_schedule(str(tmp_path / "c"), s, costs=str(costs))
    assert costs.read_text() == before
    assert not (tmp_path / "c.csv").exists()


def test_validate_of_a_cli_file(tmp_path):
    path = tmp_path / "s.csv"
    cli("generate", "-s", "zb-h2", "-p", "4", "-m", "8", "--format", "torch-csv",
        "--output", str(path))
    s = ps.read_schedule(str(path))
    assert ps.validate(s).ok and s == ps.generate("zb-h2", 4, 8)


# One request, two front ends: the CLI's options and Python's keywords build
# the same schedule_request (build_schedule), whatif_request and analyze run, so the JSON each
# prints is the same, including recompute, lowering, a searching generator and a file input.
MODEL_KW = {"cost": (1, 1.5, 0.5, 0.1), "memory": (1, 0.5, 0.25)}
MODEL3 = ["--cost", "1,1.5,0.5,0.1", "--memory", "1,0.5,0.25"]
REQUESTS = [
    (["-s", "zb-h1", "-p", "4", "-m", "8", "--recompute", "all"],
     {"schedule": "zb-h1", "stages": 4, "microbatches": 8, "recompute": "all"}),
    (["-s", "1f1b", "-p", "4", "-m", "8", "--recompute", "1,2", "--recompute-policy",
      "idle-slot", "--memory-limit", "4"],
     {"schedule": "1f1b", "stages": 4, "microbatches": 8, "recompute": [1, 2],
      "recompute_policy": "idle-slot", "memory_limit": 4}),
    (["-s", "zb-v", "-p", "4", "-m", "8", "--with-comm", "--recv", "late"],
     {"schedule": "zb-v", "stages": 4, "microbatches": 8, "with_comm": True, "recv": "late"}),
    (["-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2", "--recompute", "0,3",
      "--with-comm"],
     {"schedule": "interleaved-1f1b", "stages": 2, "microbatches": 4, "chunks": 2,
      "recompute": [0, 3], "with_comm": True}),
    (["-s", "zb-auto", "-p", "4", "-m", "8", "--search-evaluations", "20", "--memory-limit", "5"],
     {"schedule": "zb-auto", "stages": 4, "microbatches": 8, "search_evaluations": 20,
      "memory_limit": 5}),
    # One memory limit per stage, through both (memory_limits: a number or one per stage).
    (["-s", "zb-auto", "-p", "4", "-m", "8", "--search-evaluations", "20", "--memory-limit",
      "6,3,2,1.5"],
     {"schedule": "zb-auto", "stages": 4, "microbatches": 8, "search_evaluations": 20,
      "memory_limit": [6, 3, 2, 1.5]}),
    (["-s", "zb-auto", "-p", "3", "-m", "6", "--search-evaluations", "10", "--recompute", "all",
      "--with-comm"],
     {"schedule": "zb-auto", "stages": 3, "microbatches": 6, "search_evaluations": 10,
      "recompute": "all", "with_comm": True}),
]


def py_simulation_json(kw):
    kw = dict(kw)
    limit = kw.get("memory_limit")
    g = ps.generate_result(kw.pop("schedule"), **kw, **MODEL_KW)
    return json.loads(ps.simulation_json(g.schedule, memory_limit=limit,
                                         lower_bound=g.lower_bound, **MODEL_KW))


@pytest.mark.parametrize("args,kw", REQUESTS)
def test_one_request_two_front_ends(args, kw):
    assert json.loads(cli("simulate", *args, *MODEL3, "--json")) == py_simulation_json(kw)


def test_a_file_input_through_both(tmp_path):
    path = tmp_path / "zb.json"
    cli("generate", "-s", "zb-h2", "-p", "4", "-m", "8", "--format", "json", "-o", str(path))
    args = ["-i", str(path), "--recompute", "all", "--with-comm", "--recv", "late"]
    kw = {"schedule": ps.read_schedule(str(path)), "recompute": "all", "with_comm": True,
          "recv": "late"}
    assert json.loads(cli("simulate", *args, *MODEL3, "--json")) == py_simulation_json(kw)


WHATIF = [
    (["--cv", "0.1", "--straggler", "1:1.2", "--samples", "50", "--seed", "3"],
     {"cv": 0.1, "stragglers": [(1, 1.2)], "samples": 50, "seed": 3}),
    (["--cv", "0.05", "--stalls", "0.01:2", "--sensitivity", "--samples", "20"],
     {"cv": 0.05, "stalls": (0.01, 2), "sensitivity": True, "samples": 20}),
    (["--cv", "0.1", "--dynamic", "--memory-limit", "4", "--samples", "20"],
     {"cv": 0.1, "dynamic": True, "memory_limit": 4, "samples": 20}),
    (["--cv", "0.05", "--replicas", "4", "--gradient-bytes", "2", "--bandwidth", "4",
      "--allreduce-latency", "0.1", "--samples", "30"],
     {"cv": 0.05, "replicas": 4, "gradient_bytes": 2, "bandwidth": 4, "allreduce_latency": 0.1,
      "samples": 30}),
    (["--cv", "0.05", "--link-bandwidth", "1", "--message-bytes", "0.5", "--replicas", "4",
      "--gradient-bytes", "16", "--buckets", "4", "--traffic", "priority", "--samples", "5"],
     {"cv": 0.05, "link_bandwidth": [1], "message_bytes": [0.5], "replicas": 4,
      "gradient_bytes": 16, "buckets": 4, "traffic": "priority", "samples": 5}),
]


@pytest.mark.parametrize("args,kw", WHATIF)
def test_whatif_through_both(args, kw):
    s = ps.generate("zb-h1", 4, 8)
    ours = ps.whatif(s, cost=(1, 1.5, 0.5, 0.1), **kw)
    assert cli("whatif", "-s", "zb-h1", "-p", "4", "-m", "8", "--cost", "1,1.5,0.5,0.1", *args,
               "--json") == ours
    assert cli("whatif", "-s", "zb-h1", "-p", "4", "-m", "8", "--cost", "1,1.5,0.5,0.1",
               *args) == ps.whatif(s, cost=(1, 1.5, 0.5, 0.1), format="text", **kw)


def test_whatif_memory_of_another_shape(tmp_path):
    # The memory model must have the schedule's shape even where the run does not read it.
    path = tmp_path / "m.json"
    path.write_text('{"version": 1, "stages": [{"activation": 1, "weight_grad_input": 0.5},'
                    ' {"activation": 1, "weight_grad_input": 0.5}]}')
    with pytest.raises(ValueError, match=r"memory: whatif: memory model stages table \(2 entries\)"):
        ps.whatif(ps.generate("1f1b", 4, 8), memory_file=str(path))


def test_whatif_errors_name_the_keyword():
    s = ps.generate("1f1b", 4, 8)
    with pytest.raises(ValueError, match="stragglers: stage 1 is given twice"):
        ps.whatif(s, stragglers=[(1, 1.5), (1, 2)])
    with pytest.raises(ValueError, match="gradient_bytes: only meaningful with replicas"):
        ps.whatif(s, gradient_bytes=1)
    with pytest.raises(ValueError, match="cv: must be a finite number >= 0 and <= 10"):
        ps.whatif(s, cv=float("inf"))
    with pytest.raises(ValueError, match="memory_limit: only meaningful with dynamic"):
        ps.whatif(s, memory_limit=4)


def test_analyze_through_both():
    run = os.path.join(ROOT, "examples", "robustness", "straggler_run.csv")
    assert cli("analyze", run, "--json", "--rel-threshold", "0.05") == \
        ps.analyze(run, rel_threshold=0.05)
    assert cli("analyze", run) == ps.analyze(run, format="text")


def test_analyze_calibration_through_both(tmp_path):
    # The run's time unit read as microseconds, against a plan of 10 ms per op and stage.
    run = os.path.join(ROOT, "examples", "robustness", "straggler_run.csv")
    costs = tmp_path / "plan.costs.json"
    costs.write_text(json.dumps({"version": 1, "stages": [
        {"forward": 0.01, "backward_input": 0.01, "backward_weight": 0.01}] * 4}))
    opts = ["--planned-costs", str(costs), "--planned-fraction", "0.5",
            "--seconds-per-unit", "1e-3"]
    py = ps.analyze(run, planned_costs=str(costs), planned_fraction=0.5, seconds_per_unit=1e-3)
    assert cli("analyze", run, "--json", *opts) == py
    cal = json.loads(py)["calibration"]
    assert cal["planned_s"] == pytest.approx(0.12)
    assert cal["ratio"] == pytest.approx(cal["measured_s"] / 0.12)
    assert cal["achieved_fraction"] == pytest.approx(0.5 / cal["ratio"])
    assert cli("analyze", run, *opts) == ps.analyze(run, planned_costs=str(costs),
                                                    planned_fraction=0.5, seconds_per_unit=1e-3,
                                                    format="text")
    with pytest.raises(ValueError, match="only meaningful together"):
        ps.analyze(run, planned_fraction=0.5)
    with pytest.raises(ValueError, match="planned_fraction: must be in \\(0, 1\\], got 2"):
        ps.analyze(run, planned_costs=str(costs), planned_fraction=2, seconds_per_unit=1e-3)


def test_python_takes_memory_and_recompute_as_the_cli():
    g = ps.generate_result("1f1b", 2, 4, memory=(1, 0.5, 0.25), recompute="all")
    kinds = [o["kind"] for stage in json.loads(ps.to_json(g.schedule))["ops"] for o in stage]
    assert kinds.count("R") == 2 * 4
    with pytest.raises(ValueError, match="recompute: 9 is not a global chunk"):
        ps.generate("1f1b", 2, 4, recompute=[9])
    with pytest.raises(ValueError, match="recompute_policy: only meaningful with recompute"):
        ps.generate("1f1b", 2, 4, recompute_policy="idle-slot")
    with pytest.raises(ValueError, match="search_budget: only meaningful for schedules that"):
        ps.generate("1f1b", 2, 4, search_budget=5)
    with pytest.raises(ValueError, match=r"memory: expected \(MB, MW\[, MIN\]\)"):
        ps.generate("1f1b", 2, 4, memory=(1,))
