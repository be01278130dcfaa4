#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/cost_model_json.hpp>

#include "support/error_of.hpp"

using namespace pipesched;
using nlohmann::json;

namespace {
using test_support::error_of;
std::string cost_error(const std::string& text) {
  return error_of([&] { (void)read_cost_model(text); });
}
bool same(const cost_model& a, const cost_model& b) {
  return a.uniform_costs() == b.uniform_costs() && a.uniform_comm() == b.uniform_comm() &&
         a.stage_costs() == b.stage_costs() && a.chunk_costs() == b.chunk_costs() &&
         (a.chunk_costs().empty() || a.chunk_costs_chunks() == b.chunk_costs_chunks()) &&
         a.link_comm() == b.link_comm();
}
}  // namespace

TEST_CASE("cost model json: golden and round trips", "[io][cost_model_json][model_json]") {
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

TEST_CASE("cost model json: errors name the JSON path", "[io][cost_model_json][model_json]") {
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
        "backward_weight, comm, stages, chunks, links, overlapped, recompute, microbatches)");
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

TEST_CASE("cost model json: T_FB of overlapped pairs, optional", "[io][cost_model_json][overlap]") {
  cost_model m = cost_model::uniform(1, 2, 1);
  m.set_overlapped(2.5);
  CHECK(cost_model_to_json(m) ==
        json::parse(R"({"version":1,"forward":1,"backward_input":2,"backward_weight":1,
                        "comm":0,"overlapped":2.5})"));
  const cost_model back = read_cost_model(write_cost_model(m));
  CHECK(back.uniform_costs().overlapped == 2.5);
  CHECK(back.uniform_costs() == m.uniform_costs());
  op_costs with{1, 2, 1};
  with.overlapped = 2;
  cost_model per_stage;
  per_stage.set_stage_costs({with, op_costs{1, 1, 1}});
  const json j = cost_model_to_json(per_stage);
  CHECK(j["stages"][0]["overlapped"] == 2);
  CHECK_FALSE(j["stages"][1].contains("overlapped"));
  CHECK_FALSE(j.contains("overlapped"));  // unset: not written
  const cost_model ps = read_cost_model(write_cost_model(per_stage));
  CHECK(ps.stage_costs() == per_stage.stage_costs());
  CHECK_FALSE(read_cost_model(R"({"version":1})").uniform_costs().overlapped.has_value());
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"overlapped":-1})"),
                    "/overlapped: must be a finite number >= 0, not -1");
}

TEST_CASE("cost model json: per-micro-batch factors in every form",
          "[io][cost_model_json][microbatch]") {
  const cost_model a = read_cost_model(R"({"version":1,"microbatches":[1, 2.5, {"forward":3}]})");
  REQUIRE(a.has_microbatch_factors());
  CHECK(a.microbatch_factors().microbatches() == 3);
  CHECK(a.microbatch_factors().at(0, 0, 1) == cost_factors::all(2.5));
  CHECK(a.microbatch_factors().at(0, 0, 2) == cost_factors{3, 1, 1});
  // Per stage, and per (stage, chunk); numbers written short, objects whole; round trips.
  const cost_model b = read_cost_model(
      R"({"version":1,"microbatches":[[[1,2]],[[3,{"forward":2,"recompute":0.5}]]]})");
  CHECK(b.microbatch_factors().stages() == 1);
  CHECK(b.microbatch_factors().chunks() == 2);
  CHECK(b.microbatch_factors().at(0, 1, 1).recompute == 0.5);
  CHECK(read_cost_model(write_cost_model(b)).microbatch_factors() == b.microbatch_factors());
  CHECK(cost_model_to_json(a)["microbatches"] ==
        json::parse(R"([1.0, 2.5, {"forward":3.0,"backward_input":1.0,"backward_weight":1.0}])"));
  const cost_model c = read_cost_model(R"({"version":1,"microbatches":[[1,2,3],[4,5,6]]})");
  CHECK(c.microbatch_factors().stages() == 3);
  CHECK(c.microbatch_factors().at(2, 0, 1).forward == 6);
  CHECK_FALSE(cost_model_to_json(cost_model{}).contains("microbatches"));
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"microbatches":[1,[2]]})"),
                    "/microbatches/1: must have the form of /microbatches/0 (one factor), not 1 "
                    "factor, one per stage");
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"microbatches":[]})"),
                    "/microbatches: must not be empty (one entry per micro-batch)");
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"microbatches":[-1]})"),
                    "/microbatches/0: must be a finite number >= 0, not -1");
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"microbatches":[{"fwd":1}]})"),
                    "/microbatches/0/fwd: unknown key (expected one of: forward, backward_input, "
                    "backward_weight, recompute)");
  CHECK_THROWS_WITH(read_cost_model(R"({"version":1,"microbatches":[[[1],[2]],[[1],[2,3]]]})"),
                    "/microbatches/1/1: must hold 1 chunks, like /microbatches/1/0");
}
