"""pipesched.plan: the planner from Python gives what `pipesched plan` gives (one library call
behind both), takes a baseline as a dict, and raises ValueError with the library's message."""

import json
import os
import subprocess

import pytest

import pipesched as ps

from test_cli import CLI

REQUEST = dict(gpus=64, seq=8192, global_batch=64, top=3)
CLI_REQUEST = ["--gpus", "64", "--seq", "8192", "--global-batch", "64", "--top", "3"]


def without_timing(d):
    d = dict(d)
    d["search"] = {k: v for k, v in d["search"].items() if k != "seconds"}
    return d


def test_presets():
    assert "llama3-405b" in ps.model_presets()
    assert "h100-sxm-80gb" in ps.gpu_presets()


@pytest.mark.skipif(CLI is None, reason="no pipesched CLI built (set PIPESCHED_CLI)")
@pytest.mark.parametrize("extra,kw", [
    ([], {}),
    (["--recompute", "full", "--partition", "even"], {"recompute": "full", "partition": "even"}),
    (["--tp", "8", "--pp", "2", "--schedule", "zb-h1", "--micro-batch", "1"],
     {"tp": 8, "pp": 2, "schedule": "zb-h1", "micro_batch": 1}),
    (["--baseline", "tp=8,pp=2,schedule=1f1b"], {"baseline": {"tp": 8, "pp": 2,
                                                                  "schedule": "1f1b"}}),
    (["--tp", "8", "--cp", "2", "--recompute", "full"], {"tp": 8, "cp": 2, "recompute": "full"}),
    (["--memory-efficient-norm", "--recompute", "none"],
     {"memory_efficient_norm": True, "recompute": "none"}),
])
def test_plan_equals_the_cli(extra, kw):
    out = subprocess.run([CLI, "plan", "--model", "llama3-8b", "--gpu", "h100-sxm-80gb",
                          *CLI_REQUEST, *extra, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    ours = ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, **kw)
    assert without_timing(ours) == without_timing(json.loads(out.stdout))


def test_plan_formats_and_baseline_forms():
    as_dict = ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST,
                      baseline={"tp": 8, "pp": 2, "schedule": "1f1b", "sp": True})
    as_text = ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST,
                      baseline="tp=8,pp=2,schedule=1f1b,sp=on")
    assert without_timing(as_dict) == without_timing(as_text)
    assert as_dict["baseline"]["layout"]["sequence_parallel"] is True
    assert as_dict["baseline"]["speedup"] >= 1.0
    text = ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, format="text")
    assert "tok/s" in text and "GiB" in text
    assert ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, format="svg").startswith("<svg")


def test_plan_layout_rules_and_baseline_errors_pass_through():
    with pytest.raises(ValueError, match=r"--dp 3 does not divide the 64 GPUs"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, dp=3)
    with pytest.raises(ValueError, match=r"PP·v = 128 chunks for 32 layers"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, tp=8, pp=8, chunks=16)
    with pytest.raises(ValueError, match=r"baseline: tp is given twice \(tp=4 and tp=8\)"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, baseline="tp=4,tp=8")
    with pytest.raises(ValueError, match=r"baseline: give key=value choices"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, baseline="")
    with pytest.raises(ValueError, match=r"baseline: give at least one choice"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, baseline={})
    with pytest.raises(ValueError, match=r"plan: baseline: no layout can run this job: "
                                         r"schedule=1f1b does not take v=3"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST,
                baseline={"tp": 4, "pp": 4, "v": 3, "schedule": "1f1b"})


def test_plan_baseline_that_does_not_fit_is_shown():
    d = ps.plan("llama3-70b", "h100-sxm-80gb", gpus=64, seq=8192, global_batch=64, top=1,
                baseline={"tp": 1, "pp": 1, "recompute": "none"})
    assert d["baseline"]["fits"] is False
    assert d["baseline"]["layout"]["dp"] == 64


def test_plan_nothing_fits_is_an_answer():
    d = ps.plan("llama3-405b", "h100-sxm-80gb", gpus=8, seq=8192, global_batch=16)
    assert d["plans"] == []
    assert d["smallest_need_bytes"] > 80 * 2**30


def test_plan_errors():
    with pytest.raises(ValueError, match=r"--tp 3 must divide the heads \(32\)"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, tp=3)
    with pytest.raises(ValueError, match=r"global_batch_tokens \(1000\) must be a positive"):
        ps.plan("llama3-8b", "h100-sxm-80gb", gpus=8, seq=8192, global_batch_tokens=1000)
    with pytest.raises(ValueError, match=r"recompute must be none, selective or full"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, recompute="some")
    with pytest.raises(ValueError, match=r"baseline: unknown key \"tensor\""):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, baseline={"tensor": 8})
    with pytest.raises(ValueError, match=r"unknown model \"llama4\""):
        ps.plan("llama4", "h100-sxm-80gb", **REQUEST)
    with pytest.raises(ValueError, match=r"format: must be 'json', 'text' or 'svg'"):
        ps.plan("llama3-8b", "h100-sxm-80gb", **REQUEST, format="xml")


@pytest.mark.skipif(CLI is None, reason="no pipesched CLI built (set PIPESCHED_CLI)")
def test_exported_compute_comms_csv_times_close_to_the_plan(tmp_path):
    prefix = str(tmp_path / "best")
    out = subprocess.run([CLI, "plan", "--model", "llama3-70b", "--gpu", "h100-sxm-80gb",
                          "--gpus", "1024", "--seq", "8192", "--global-batch-tokens", "4194304",
                          "--pp", "4", "--json", "--export", prefix],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    predicted = json.loads(out.stdout)["plans"][0]["makespan_s"]
    sim = subprocess.run([CLI, "simulate", "-i", prefix + ".csv", "--costs",
                          prefix + ".costs.json", "--transfers", "posted", "--json"],
                         capture_output=True, text=True)
    assert sim.returncode == 0, sim.stderr
    posted = json.loads(sim.stdout)["makespan"]
    # Receives posted after their sends delay the data (NCCL needs both sides): a little.
    assert predicted <= posted <= predicted * 1.001


def test_plan_expert_parallelism_and_several_baselines():
    moe = dict(gpus=32, seq=4096, global_batch=64, tp=2, pp=4, schedule="1f1b", micro_batch=1,
               recompute="full")
    r = ps.plan("mixtral-8x7b", "h100-sxm-80gb", ep=4, **moe,
                baseline=[{"tp": 2, "pp": 4, "ep": 2, "schedule": "1f1b"},
                          "tp=2,pp=4,ep=1,schedule=dualpipe"])
    assert r["plans"][0]["layout"]["ep"] == 4
    assert r["baseline"]["layout"]["ep"] == 2
    assert [(b["layout"]["ep"], b["schedule"]) for b in r["other_baselines"]] == [(1, "dualpipe")]
    args = ["plan", "--model", "mixtral-8x7b", "--gpu", "h100-sxm-80gb", "--gpus", "32", "--seq",
            "4096", "--global-batch", "64", "--tp", "2", "--pp", "4", "--schedule", "1f1b",
            "--micro-batch", "1", "--recompute", "full", "--ep", "4", "--json"]
    cli = json.loads(subprocess.run([CLI] + args, capture_output=True, text=True,
                                    check=True).stdout)
    assert without_timing(cli)["plans"] == without_timing(
        ps.plan("mixtral-8x7b", "h100-sxm-80gb", ep=4, **moe))["plans"]
    with pytest.raises(ValueError, match="EP 3 must divide the routed experts"):
        ps.plan("mixtral-8x7b", "h100-sxm-80gb", ep=3, **moe)
    with pytest.raises(ValueError, match="moe_imbalance"):
        ps.plan("llama3-8b", "h100-sxm-80gb", gpus=16, seq=4096, global_batch=64,
                moe_imbalance=2.0)


def test_plan_memory_efficient_norm_keeps_less():
    """Norms that keep no input: the same layout keeps fewer activation bytes, and as much of
    everything else."""
    kw = dict(REQUEST, tp=8, pp=2, schedule="1f1b", micro_batch=1, recompute="none",
              sequence_parallel=True, top=1)
    kept = ps.plan("llama3-8b", "h100-sxm-80gb", **kw)
    efficient = ps.plan("llama3-8b", "h100-sxm-80gb", memory_efficient_norm=True, **kw)
    for less, more in zip(efficient["plans"][0]["stages"], kept["plans"][0]["stages"]):
        assert less["memory_bytes"]["activations"] < more["memory_bytes"]["activations"]
        for key in ("weights", "gradients", "optimizer"):
            assert less["memory_bytes"][key] == more["memory_bytes"][key]
