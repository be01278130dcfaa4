// DualPipe (gen/dualpipe.hpp): DeepSeek's order op for op, overlap marks included, on every
// (p, m) of tests/data/dualpipe_reference.json; validity, simulation and the memory checker;
// DeepSeek-V3 Table 2 at equal costs (parameters, activations, bubble); the rejected shapes.
//
// tests/data/dualpipe_reference.json holds the orders deepseek-ai/DualPipe's DualPipe.step()
// (commit recorded in the file) runs on each rank, recorded by scripts/dualpipe_reference.py,
// which runs their code unchanged with recording stand-ins for torch and its communication.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/dualpipe.hpp>

using namespace pipesched;

static_assert(schedule_generator<dualpipe>);

namespace {

nlohmann::json dualpipe_reference() {
  std::ifstream in(PIPESCHED_TEST_DATA_DIR "/dualpipe_reference.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Their order as a schedule: [kind, module, micro-batch within its direction, overlap]; module
// c is local chunk c (route c), whose micro-batch i is pipesched's c*m/2 + i.
schedule dualpipe_from_reference(const nlohmann::json& order) {
  const auto p = order.at("p").get<std::uint32_t>();
  const auto m = order.at("m").get<std::uint32_t>();
  schedule out = schedule::on("deepseek", placement::dual(p), m);
  const auto& ranks = order.at("ranks");
  REQUIRE(ranks.size() == p);
  for (stage_index s = 0; s < p; ++s) {
    for (const auto& e : ranks[s]) {
      const auto kind = parse_op_kind(e.at(0).get<std::string>());
      REQUIRE(kind.has_value());
      const auto c = e.at(1).get<std::uint32_t>();
      const auto mb = e.at(2).get<std::uint32_t>() + c * (m / 2);
      op o = make_op(*kind, mb, static_cast<chunk_index>(c));
      if (e.at(3).get<int>() != 0) {
        o = overlapping_next(o);
      }
      out.stage_ops(s).push_back(o);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("dualpipe: equals DeepSeek's DualPipe.step() op for op on every recorded (p, m)",
          "[gen][dualpipe]") {
  const nlohmann::json ref = dualpipe_reference();
  REQUIRE(ref.at("orders").size() == 12);
  for (const auto& order : ref.at("orders")) {
    const auto p = order.at("p").get<std::uint32_t>();
    const auto m = order.at("m").get<std::uint32_t>();
    INFO("p=" << p << " m=" << m);
    const schedule theirs = dualpipe_from_reference(order);
    const schedule ours = generate(dualpipe{}, p, m);
    for (stage_index s = 0; s < p; ++s) {
      INFO("stage " << s);
      REQUIRE(ours.ops(s).size() == theirs.ops(s).size());
      for (std::size_t i = 0; i < ours.ops(s).size(); ++i) {
        INFO("op " << i << ": ours " << to_string(ours.ops(s)[i], true) << ", theirs "
                   << to_string(theirs.ops(s)[i], true));
        CHECK(ours.ops(s)[i] == theirs.ops(s)[i]);  // flags included: the overlapped pairs
      }
    }
    CHECK(ours == theirs);
  }
}

TEST_CASE("dualpipe: the dual placement and the routes", "[gen][dualpipe]") {
  const schedule s = generate(dualpipe{}, 4, 8);
  const placement& pl = s.layout();
  CHECK(pl.kind() == placement_kind::dual);
  CHECK(pl.routes() == 2);
  CHECK(pl.route_length() == 4);
  // Stage 1 holds stage 1 of route 0 and stage 2 of route 1 (global chunk 4 + 2).
  CHECK(pl.global(1, 0) == 1);
  CHECK(pl.global(1, 1) == 6);
  CHECK(pl.is_first(4));
  CHECK(pl.stage_of(4) == 3);  // route 1 enters at the last stage
  CHECK(pl.is_last(7));
  CHECK(pl.stage_of(7) == 0);  // and computes its loss on the first
  CHECK(s.route_of(3) == 0);
  CHECK(s.route_of(4) == 1);
  CHECK(s.on_route(5, 6));
  CHECK_FALSE(s.on_route(5, 1));
}

TEST_CASE("dualpipe: valid, simulates and passes the memory checker", "[gen][dualpipe]") {
  for (std::uint32_t p : {2U, 4U, 6U, 8U, 16U}) {
    for (std::uint32_t m : {2 * p, 2 * p + 2, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const schedule s = generate(dualpipe{}, p, m);
      const validation_report rep = validate(s);
      CHECK(rep.ok());
      const simulation_result r = simulate(s, cost_model::unit());
      CHECK(r.completed());
      const memory_report mem = check_memory(s, memory_model::uniform(2.0, 0.0));
      CHECK(mem.errors.empty());
      for (const stage_memory& st : mem.stages) {
        CHECK(st.final_value == Approx(0.0));
      }
    }
  }
}

TEST_CASE("dualpipe: DeepSeek-V3 Table 2 at equal costs: parameters 2x, activations PP+1",
          "[gen][dualpipe]") {
  // Each chunk is one PP stage's layers (1/p of the model) with its own parameters: two per
  // rank, twice a 1F1B rank's.
  for (std::uint32_t p : {4U, 6U, 8U}) {
    const schedule s = generate(dualpipe{}, p, 4 * p);
    std::vector<std::uint32_t> copies(p, 0);  // ranks holding each model stage
    for (stage_index st = 0; st < p; ++st) {
      for (chunk_index c = 0; c < 2; ++c) {
        const global_chunk g = s.layout().global(st, c);
        ++copies[g % s.layout().route_length()];
      }
    }
    CHECK(std::all_of(copies.begin(), copies.end(), [](std::uint32_t n) { return n == 2; }));
  }
  // Activations in units of one micro-batch's activations of one PP stage (a chunk: M_B = 1 per
  // chunk, 2 per rank; B frees them, M_W = 0). The busiest rank holds PP + 1.
  for (std::uint32_t p : {4U, 6U, 8U}) {
    for (std::uint32_t m : {2 * p, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const memory_report mem =
          check_memory(generate(dualpipe{}, p, m), memory_model::uniform(2.0, 0.0));
      double most = 0.0;
      for (const stage_memory& st : mem.stages) {
        most = std::max(most, st.peak);
      }
      CHECK(most == Approx(p + 1.0));
    }
  }
}

TEST_CASE("dualpipe: DeepSeek-V3 Table 2 at equal costs: the bubble", "[gen][dualpipe]") {
  // Per-stage unit costs split over the two chunks: a chunk has F = B_input = W = 1/2, the full
  // backward B = 1, F&B = 3/2 (no overlap gain). Table 2: (PP/2 − 1)(F&B + B − 3W) = PP/2 − 1.
  // Measured as the longest span minus the largest busy time, as for DualPipeV.
  for (std::uint32_t p : {4U, 6U, 8U}) {
    for (std::uint32_t m : {2 * p, 3 * p + (p % 2 == 0 ? 0U : 1U), 4 * p}) {
      if (m % 2 != 0) {
        continue;
      }
      INFO("p=" << p << " m=" << m);
      const simulation_result r = simulate(generate(dualpipe{}, p, m), cost_model::unit());
      double span = 0.0;
      double busy = 0.0;
      for (const auto& st : r.stages) {
        span = std::max(span, st.span);
        busy = std::max(busy, st.busy);
      }
      CHECK(busy == Approx(3.0 * m / 2.0));
      CHECK(span - busy == Approx(p / 2.0 - 1.0));
    }
  }
}

TEST_CASE("dualpipe: odd p, odd m, m < 2p and v != 2 are rejected, naming the field and the rule",
          "[gen][dualpipe]") {
  CHECK_THROWS_WITH(generate(dualpipe{}, 5, 10),
                    "dualpipe: stages (p=5) must be even: each stage holds stage s of one "
                    "direction and p-1-s of the other, as in DeepSeek's DualPipe");
  CHECK_THROWS_WITH(generate(dualpipe{}, 4, 6),
                    "dualpipe: microbatches (m=6) must be even and at least 2*stages (2p=8): "
                    "half enter at each end, as in DeepSeek's DualPipe");
  CHECK_THROWS_WITH(generate(dualpipe{}, 4, 9),
                    "dualpipe: microbatches (m=9) must be even and at least 2*stages (2p=8): "
                    "half enter at each end, as in DeepSeek's DualPipe");
  CHECK_THROWS_AS(generate(dualpipe{}, 4, 8, 3), invalid_argument);
  CHECK_NOTHROW(generate(dualpipe{}, 4, 8));
}
