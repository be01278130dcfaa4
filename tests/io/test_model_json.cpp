#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/model_json.hpp>

using namespace pipesched;
using nlohmann::json;

namespace {
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const invalid_argument& e) {
    return e.what();
  }
  return "no error";
}
std::string cost_error(const std::string& text) {
  return error_of([&] { (void)read_cost_model(text); });
}
std::string memory_error(const std::string& text) {
  return error_of([&] { (void)read_memory_model(text); });
}
bool same(const cost_model& a, const cost_model& b) {
  return a.uniform_costs() == b.uniform_costs() && a.uniform_comm() == b.uniform_comm() &&
         a.stage_costs() == b.stage_costs() && a.chunk_costs() == b.chunk_costs() &&
         (a.chunk_costs().empty() || a.chunk_costs_chunks() == b.chunk_costs_chunks()) &&
         a.link_comm() == b.link_comm();
}
bool same(const memory_model& a, const memory_model& b) {
  return a.uniform_memory() == b.uniform_memory() && a.stage_memory() == b.stage_memory() &&
         a.chunk_memories() == b.chunk_memories() &&
         (a.chunk_memories().empty() || a.chunk_memory_chunks() == b.chunk_memory_chunks()) &&
         a.static_memories() == b.static_memories();
}
}  // namespace

TEST_CASE("model json: cost model golden and round trips", "[io][model_json]") {
  CHECK(cost_model_to_json(cost_model::uniform(3, 4, 2, 0.5)) ==
        json::parse(
            R"({"version":1,"forward":3,"backward_input":4,"backward_weight":2,"comm":0.5})"));
  cost_model per_stage = cost_model::uniform(1, 2, 3);
  per_stage.set_stage_costs({{1, 1, 1}, {2, 2.5, 0}}).set_link_comm(2, {0, 1.5, 2, 0});
  cost_model per_chunk;
  per_chunk.set_chunk_costs(2, {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {0, 0, 0}});
  for (const cost_model& m :
       {cost_model{}, cost_model::uniform(3, 4, 2, 1), per_stage, per_chunk}) {
    CHECK(same(read_cost_model(write_cost_model(m)), m));
  }
  const json j = cost_model_to_json(per_chunk);
  CHECK(j["chunks"].size() == 2);
  CHECK(j["chunks"][1][0]["forward"] == 7);
  CHECK(cost_model_to_json(per_stage)["links"] == json::parse("[[0,1.5],[2,0]]"));
  // Defaults: unit triple, no comm.
  const cost_model d = read_cost_model(R"({"version":1})");
  CHECK(d.uniform_costs() == op_costs{1, 1, 1});
  CHECK(d.uniform_comm() == 0);
}

TEST_CASE("model json: cost model errors name the JSON path", "[io][model_json]") {
  CHECK(cost_error(R"({"version":1,"stages":[{"forward":1,"backward_input":1,"backward_weight":1},
        {"forward":1,"backward_input":1,"backward_weight":1},{"forward":-1,"backward_input":1,
        "backward_weight":1}]})") == "/stages/2/forward: must be a finite number >= 0, not -1");
  CHECK(cost_error(R"({"version":1,"forward":"3"})") ==
        "/forward: must be a number >= 0, not string");
  CHECK(cost_error(R"({"version":2})") ==
        "/version: unsupported cost model format version 2 (this library reads version 1)");
  CHECK(cost_error(R"({"forward":1})") == "/version: missing required key");
  CHECK(cost_error(R"({"version":1,"fwd":1})") ==
        "/fwd: unknown key (expected one of: version, forward, backward_input, "
        "backward_weight, comm, stages, chunks, links)");
  CHECK(cost_error(R"({"version":1,"stages":[{"forward":1,"backward_input":1}]})") ==
        "/stages/0/backward_weight: missing required key");
  CHECK(cost_error(R"({"version":1,"links":[[0,1],[1]]})") ==
        "/links/1: must hold 2 latencies (a square matrix, one row per stage)");
  CHECK(
      cost_error(
          R"({"version":1,"chunks":[[{"forward":1,"backward_input":1,"backward_weight":1}],[]]})") ==
      "/chunks/1: must hold 1 chunks, like /chunks/0");
  CHECK(cost_error(R"({"version":1,"stages":[],"chunks":[]})") ==
        "/chunks: cannot be combined with /stages (give one of them)");
  CHECK(cost_error("[1,2]") == "/: must be an object, not array");
  CHECK(cost_error(R"({"version":1,)") ==
        std::string(
            "read_cost_model: malformed JSON: [json.exception.parse_error.101] parse error at "
            "line 1, column 14: syntax error while parsing object key - unexpected end of "
            "input; expected string literal"));
}

TEST_CASE("model json: memory model round trips and errors", "[io][model_json]") {
  memory_model per_stage = memory_model::uniform(4, 1);
  per_stage.set_stage_memory({{2, 1, 0}, {3, 0.5, 0.25}}).set_static_memory({10, 20});
  memory_model per_chunk;
  per_chunk.set_chunk_memory(2, {{1, 0.5, 0}, {2, 1, 0}});
  for (const memory_model& m : {memory_model{}, per_stage, per_chunk}) {
    CHECK(same(read_memory_model(write_memory_model(m)), m));
  }
  CHECK(memory_model_to_json(memory_model{}) ==
        json::parse(R"({"version":1,"activation":1,"weight_grad_input":0.5,"received":0})"));
  CHECK(memory_error(R"({"version":1,"stages":[{"activation":1,"weight_grad_input":2}]})") ==
        "/stages/0/weight_grad_input: must be <= activation (1)");
  CHECK(memory_error(R"({"version":1,"static":[1,-2]})") ==
        "/static/1: must be a finite number >= 0, not -2");
  CHECK(memory_error(R"({"version":1,"activation":0.25})") ==
        "/activation: must be >= weight_grad_input (0.5, the default)");
}

TEST_CASE("model json: simulation result", "[io][model_json]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const timeline tl = cost_timeline(s);
  const auto mem = memory_curves(s, tl, memory_model::uniform(1, 0.5));
  const json j = simulation_to_json(s, tl, &mem);
  CHECK(j["makespan"] == 9.0);
  CHECK(j["bubble_rate"].get<double>() == Approx(1.0 / 3.0));
  CHECK(j["stages"][0]["span"] == 9.0);
  CHECK(j["stages"][0]["idle"] == 3.0);
  CHECK(j["stages"][0]["peak_memory"] == 2.0);  // 1F1B stage 0 of p=2: p*M_B
  CHECK(j["stages"][1]["peak_memory"] == 1.0);
  CHECK(j["stages"][1]["ops"][1] ==
        json::parse(R"({"kind":"BW","mb":0,"chunk":0,"start":2.0,"end":4.0})"));

  const simulation_record r = simulation_from_json(j);
  CHECK(r.name == "1f1b");
  CHECK(r.stages == 2);
  CHECK(r.makespan == 9.0);
  CHECK(r.peak_memory[0] == 2.0);
  REQUIRE(r.ops);
  CHECK(r.ops->stages == tl.stages);
  CHECK(simulation_to_json(s, *r.ops, &mem) == j);
  json other = j;
  other["bubble_rate"] = 0.25;  // the simulator's own number is kept, not re-derived
  CHECK(simulation_from_json(other).ops->bubble_rate() == 0.25);

  const json no_ops = simulation_to_json(s, tl, nullptr, false);
  CHECK(no_ops["stages"][0]["peak_memory"].is_null());
  const simulation_record r2 = read_simulation(no_ops.dump());
  CHECK(!r2.ops);
  CHECK(!r2.peak_memory[0]);

  // utilization is written (Σ busy / (p·makespan) = 12 / 18); lower_bound, memory_limit and
  // violations are optional keys the CLI sets, and they read back.
  CHECK(j["utilization"].get<double>() == Approx(12.0 / 18.0));
  CHECK(*r.utilization == Approx(12.0 / 18.0));
  CHECK(!r.lower_bound);
  CHECK(!r.memory_limit);
  CHECK(r.violations.empty());
  json extra = j;
  extra["lower_bound"] = 8.0;
  extra["memory_limit"] = 1.5;
  extra["violations"] = {"memory_budget: stage 0 exceeds its memory limit 1.5"};
  const simulation_record re = simulation_from_json(extra);
  CHECK(*re.lower_bound == 8.0);
  CHECK(*re.memory_limit == 1.5);
  CHECK(re.violations ==
        std::vector<std::string>{"memory_budget: stage 0 exceeds its memory limit 1.5"});
  json old = j;
  old.erase("utilization");  // files written before utilization existed still read
  CHECK(!simulation_from_json(old).utilization);

  // From the simulator with a memory report over budget: the violations are in the JSON.
  const simulation_result sim = simulate(s);
  const memory_report over =
      check_memory(s, memory_model::uniform(1, 0.5), memory_options::with_limit(1.5), sim);
  const json jo = simulation_to_json(s, sim, &over, false);
  REQUIRE(jo.contains("violations"));
  CHECK(jo["violations"].size() == 1);
  CHECK(jo["violations"][0].get<std::string>().rfind("memory_budget: stage 0 exceeds", 0) == 0);
  CHECK(simulation_from_json(jo).violations.size() == 1);
  CHECK(jo["utilization"].get<double>() == Approx(sim.utilization));

  json bad = j;
  bad["stages"][1]["ops"][3]["kind"] = "X";
  CHECK(error_of([&] { (void)simulation_from_json(bad); }) ==
        "/stages/1/ops/3/kind: unknown op kind \"X\"");
  bad = j;
  bad["stages"][0]["ops"][0]["mb"] = 2;
  CHECK(error_of([&] { (void)simulation_from_json(bad); }) ==
        "/stages/0/ops/0/mb: must be between 0 and 1, not 2");
}
