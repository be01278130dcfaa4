#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/runs_json.hpp>

using namespace pipesched;

namespace {

const char* runs_text = R"({"about": "two runs", "runs": [
  {"id": "kor-x", "gpu": "a100-sxm-80gb", "source": "a paper",
   "model": {"layers": 4, "hidden": 1024, "heads": 16, "ffn": 4096, "vocab": 51200},
   "attention": "materialized", "dropout": true, "seq": 2048, "gpus": 8, "tp": 8, "pp": 1,
   "micro_batch": 1, "global_batch": 4, "sequence_parallel": false, "recompute": "full",
   "p2p": "blocking", "optimizer_sharding": "none", "overlap_grad_reduce": false,
   "gradient_accumulation_fusion": false, "step_time_s": 1.5, "memory_gib": {"activations": 3}},
  {"id": "meg-y", "gpu": "h100-sxm-80gb",
   "model": {"layers": 4, "hidden": 1024, "heads": 16, "ffn": 4096, "vocab": 51200},
   "seq": 4096, "gpus": 8, "tp": 1, "pp": 1, "global_batch": 8, "model_tflops_per_gpu": 400}
]})";

std::string error_of(const std::string& text, const cluster_spec& c) {
  try {
    read_reference_runs(text, c);
  } catch (const invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("runs file: the runs of the cluster, set up as they ran", "[io][runs]") {
  const std::vector<reference_run> a100 =
      read_reference_runs(runs_text, cluster_preset("a100-sxm-80gb"));
  REQUIRE(a100.size() == 1);
  const reference_run& r = a100.front();
  CHECK(r.id == "kor-x");
  CHECK(r.metric == run_metric::step_time);
  CHECK(r.measured == 1.5);
  CHECK(r.request.model.attention == attention_kind::materialized);
  CHECK(r.request.model.dropout);
  CHECK(r.request.model.tied_embeddings);  // GPT-style by the file's convention
  CHECK(r.request.model.kv() == 16);
  CHECK(r.request.blocking_p2p);
  CHECK_FALSE(r.request.overlap_grad_reduce);
  CHECK_FALSE(r.request.gradient_accumulation_fusion);
  CHECK(r.request.sharding == optimizer_sharding::none);
  CHECK(*r.request.options.fixed.tp == 8);
  CHECK(*r.request.options.fixed.recompute == recompute_kind::full);
  CHECK_FALSE(r.request.options.fixed.chunks);  // not given: searched
  const std::vector<reference_run> h100 =
      read_reference_runs(runs_text, cluster_preset("h100-sxm-80gb"));
  REQUIRE(h100.size() == 1);
  CHECK(h100.front().metric == run_metric::model_tflops);
  CHECK(h100.front().request.model.attention == attention_kind::flash);
  CHECK(h100.front().request.gradient_accumulation_fusion);  // the default
  CHECK(read_reference_runs(runs_text, cluster_preset("a100-sxm-80gb"), "meg").empty());
}

TEST_CASE("runs file: bad runs are named by their pointer", "[io][runs]") {
  const cluster_spec c = cluster_preset("a100-sxm-80gb");
  const std::string base = R"({"runs": [{"id": "r", "model": {"layers": 4, "hidden": 1024,
    "heads": 16, "ffn": 4096, "vocab": 51200}, "seq": 2048, "gpus": 8, "global_batch": 8)";
  CHECK(read_reference_runs(base + "}]}", c).empty());  // memory only: left out
  CHECK(error_of(base + R"(, "step_time_s": 1, "model_tflops_per_gpu": 2}]})", c)
            .find("/runs/0: give one measurement") == 0);
  CHECK(error_of(base + R"(, "step_time_s": -1}]})", c).find("/runs/0/step_time_s: must be > 0") ==
        0);
  CHECK(error_of(base + R"(, "step_time_s": 1, "recompute": "most"}]})", c)
            .find("/runs/0/recompute: must be none, selective or full") == 0);
  CHECK(error_of(base + R"(, "step_time_s": 1, "p2p": "fast"}]})", c)
            .find("/runs/0/p2p: must be blocking or overlapped") == 0);
  CHECK(error_of(base + R"(, "step_time_s": 1, "tp": 3}]})", c).find("/runs/0") == 0);
  CHECK(error_of(R"({"runs": 3})", c).find("/runs: must be an array") == 0);
  CHECK(error_of("not json", c).find("runs") != std::string::npos);
}

// The published runs themselves (tests/data/measured_runs.json, a copy of the shared file with
// every number's source): each reads, those with a measured time or throughput by their GPU,
// and one of Korthikanti et al.'s iterations, set up as Megatron-LM of 2022 ran it
// (docs/validation.md), is predicted within the 5 % the validation holds every such row to.
TEST_CASE("runs file: the published measured runs, one predicted against its measurement",
          "[io][runs]") {
  std::ifstream in(PIPESCHED_TEST_DATA_DIR "/measured_runs.json");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const cluster_spec a100 = cluster_preset("a100-sxm-80gb");
  const std::vector<reference_run> runs = read_reference_runs(text.str(), a100);
  int kor = 0;
  int nar = 0;
  for (const reference_run& r : runs) {
    kor += r.id.rfind("kor-", 0) == 0 ? 1 : 0;
    nar += r.id.rfind("nar-", 0) == 0 ? 1 : 0;
  }
  CHECK(kor == 9);  // the other four kor rows measured memory only
  CHECK(nar == 10);
  CHECK(read_reference_runs(text.str(), cluster_preset("h100-sxm-80gb")).size() == 9);
  std::vector<reference_run> one = read_reference_runs(text.str(), a100, "kor-22b-selective");
  REQUIRE(one.size() == 1);
  reference_run& r = one.front();
  CHECK(r.measured == 1.1);
  r.request.blocking_p2p = true;
  r.request.sharding = optimizer_sharding::none;
  r.request.overlap_grad_reduce = false;
  const run_prediction p = detail::predict(r, a100).first;
  INFO("predicted " << p.predicted << " s, measured 1.1 s, plan " << p.plan);
  CHECK(std::abs(p.predicted / 1.1 - 1.0) < 0.05);
}
