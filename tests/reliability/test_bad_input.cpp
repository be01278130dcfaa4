// The bad-input matrix of the public API: every invalid value gives one
// pipesched::invalid_argument whose message names the function or path, the field and the rule
// (docs/errors.md); analyses of invalid schedules report instead of throwing; nothing crashes,
// hangs or allocates in proportion to a declared size the input does not back with ops.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/transform/comm_lowering.hpp>

using namespace pipesched;
using Catch::Contains;
using Catch::StartsWith;

namespace {
constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

generator_params shape(std::uint32_t p, std::uint32_t m, std::uint32_t v = 0) {
  generator_params g;
  g.stages = p;
  g.microbatches = m;
  g.chunks = v;
  return g;
}
}  // namespace

TEST_CASE("generators reject p, m, v out of range for every registered name",
          "[reliability][gen]") {
  for (const auto& e : default_registry().entries()) {
    INFO(e.name);
    CHECK_THROWS_WITH(e.generate(shape(0, 4)), e.name + ": stages (p=0) must be at least 1");
    CHECK_THROWS_WITH(e.generate(shape(4, 0)), e.name + ": microbatches (m=0) must be at least 1");
    CHECK_THROWS_WITH(e.generate(shape(max_stages + 1, 4)),
                      StartsWith(e.name + ": stages (p=65537) must be at most 65536"));
    CHECK_THROWS_WITH(e.generate(shape(4, max_microbatches + 1)),
                      StartsWith(e.name + ": microbatches (m=16777217) must be at most"));
    // p*m beyond 32 bits: refused by the op budget before anything is allocated.
    CHECK_THROWS_WITH(e.generate(shape(max_stages, max_microbatches)),
                      Contains(") is too large: the schedule would have"));
    if (e.name != "interleaved-1f1b") {  // the one generator that takes any v
      CHECK_THROWS_AS(e.generate(shape(4, 4, 7)), invalid_argument);
    }
    // Memory-aware generators must refuse a non-finite or non-positive limit; the others
    // ignore it. Either way: an invalid_argument or a valid schedule, nothing else.
    for (double bad : {nan_v, inf_v, -1.0, 0.0}) {
      generator_params g = shape(4, 8, e.default_chunks);
      g.memory_limit = bad;
      try {
        const schedule s = e.generate(g);
        CHECK(validate(s).ok());
      } catch (const invalid_argument& err) {
        CHECK_THAT(err.what(), StartsWith(e.name + ": "));
      }
    }
  }
  CHECK_THROWS_WITH(default_registry().at("nope"), StartsWith("unknown schedule \"nope\""));
}

TEST_CASE("cost_model and memory_model reject NaN, inf and negative values",
          "[reliability][sim][memory]") {
  for (double bad : {nan_v, inf_v, -inf_v, -1.0}) {
    INFO(bad);
    CHECK_THROWS_AS(cost_model::uniform(bad, 1, 1), invalid_argument);
    CHECK_THROWS_AS(cost_model::uniform(1, bad, 1), invalid_argument);
    CHECK_THROWS_AS(cost_model::uniform(1, 1, bad), invalid_argument);
    CHECK_THROWS_WITH(
        cost_model::uniform(1, 1, 1, bad),
        StartsWith("cost_model: comm (T_comm) (") && Contains("must be finite and >= 0"));
    CHECK_THROWS_AS(cost_model{}.set_stage_costs({{1, 1, 1}, {1, bad, 1}}), invalid_argument);
    CHECK_THROWS_AS(cost_model{}.set_link_comm(2, {0, bad, 0, 0}), invalid_argument);
    CHECK_THROWS_AS(memory_model::uniform(bad, 0), invalid_argument);
    CHECK_THROWS_AS(memory_model{}.set_static_memory({bad}), invalid_argument);
  }
  CHECK_THROWS_WITH(cost_model::uniform(-1, 1, 1),
                    "cost_model: forward cost (T_F) (-1) must be finite and >= 0");
  CHECK_THROWS_WITH(memory_model::uniform(1, 2),
                    "memory_model: weight-gradient memory (M_W=2) must be <= activation memory "
                    "(M_B=1)");
  CHECK_THROWS_WITH(cost_model{}.set_link_comm(2, {0, 1, 0}),
                    "cost_model::set_link_comm: size (3) must be stages*stages (4)");
  CHECK_THROWS_AS(cost_model{}.set_chunk_costs(0, {}), invalid_argument);
  CHECK_THROWS_AS(memory_model{}.set_chunk_memory(2, {{}, {}, {}}), invalid_argument);
}

TEST_CASE("placements and schedules reject impossible shapes", "[reliability][ir]") {
  CHECK_THROWS_WITH(placement::sequential(0), "placement: stages (p=0) must be at least 1");
  CHECK_THROWS_AS(placement::loop(4, 0), invalid_argument);
  CHECK_THROWS_AS(placement::loop(4, 70000), invalid_argument);
  // 16384 * 65535 chunks would be 10 GB of tables: refused up front.
  CHECK_THROWS_WITH(placement::loop(16384, 65535),
                    "placement: stages*chunks (1073725440) must be at most 16777216");
  CHECK_THROWS_WITH(placement::custom(2, 1, {0, 0}),
                    StartsWith("placement: table entry 1 (global chunk 0) must be a permutation"));
  CHECK_THROWS_WITH(placement::custom(2, 1, {0, 7}),
                    StartsWith("placement: table entry 1 (global chunk 7) must be a permutation"));
  CHECK_THROWS_WITH(placement::custom(2, 2, {0, 1, 2}),
                    "placement: table size (3) must equal stages*chunks (4)");
  CHECK_THROWS_WITH(schedule::on("x", placement::sequential(2), 0),
                    StartsWith("schedule: microbatches (m=0) must be between 1 and"));
  CHECK_THROWS_AS(schedule::on("x", placement::sequential(2), max_microbatches + 1),
                  invalid_argument);
  CHECK_THROWS_AS(schedule::on("x", placement::sequential(max_stages + 1), 4), invalid_argument);
}

TEST_CASE("a huge declared spec with few ops is reported without a p*v*m allocation",
          "[reliability][validate]") {
  // 65536 stages * 16777216 micro-batches = 2^40 (chunk, micro-batch) pairs: dense per-pair
  // tables would take terabytes; the analyses must stay proportional to the 3 ops.
  schedule s = schedule::on("huge", placement::sequential(max_stages), max_microbatches);
  s.stage_ops(0) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  s.stage_ops(1) = {make_op(op_kind::backward_full, 7)};
  const auto r = validate(s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.count(violation_kind::missing) == 1);
  REQUIRE(r.violations.size() >= 2);
  CHECK(r.violations[0].kind == violation_kind::local_order);  // BW7 before F7 on stage 1
  CHECK(r.violations[1].message ==
        "schedule: stages*chunks*microbatches (1099511627776) (chunk, micro-batch) pairs need at "
        "least 2199023255552 ops (F and BW, or F, B and W each), the schedule has 3");
  // Nothing to run: no feasibility check; traverse and simulate refuse instead of allocating.
  CHECK_FALSE(r.deadlock.has_value());
  CHECK_THROWS_WITH(simulate(s), StartsWith("simulate: stages*chunks*microbatches (1099511627776) "
                                            "is far beyond the op count (3)"));
  CHECK_THROWS_AS(traverse(s, [](stage_index, std::size_t, const op&) {}), invalid_argument);
  const auto mem = check_memory(s, {}, memory_options::with_limit(0.5));
  CHECK(mem.peak_memory(0) == 1.0);
  CHECK(mem.count(lifetime_error_kind::use_before_create) == 1);
  REQUIRE(mem.violations.size() == 1);
  CHECK(mem.violations[0].stage == 0);

  // Same through the JSON reader: a 200-byte file.
  std::string text = R"({"version":1,"stages":2,"microbatches":16777216,"chunks":65535,)"
                     R"("ops":[[{"kind":"F","mb":0}],[{"kind":"F","mb":16777215,"chunk":3}]]})";
  const schedule j = read_schedule_json(text);
  CHECK(j.chunks() == 65535);
  CHECK(validate(j).count(violation_kind::missing) == 1);
}

TEST_CASE("simulate and check_memory on invalid schedules report or refuse, never hang",
          "[reliability][sim][memory]") {
  schedule s = schedule::sequential("broken", 2, 2);
  s.stage_ops(0) = {make_op(op_kind::backward_weight, 0), make_op(op_kind::forward, 9),
                    make_op(op_kind::send_forward, 0, 5), make_op(op_kind::recv_forward, 0),
                    make_op(op_kind::forward, 0)};
  s.stage_ops(1) = {make_op(op_kind::recv_backward, 1), make_op(op_kind::backward_full, 0)};
  const auto r = validate(s);
  CHECK_FALSE(r.ok());
  CHECK(r.count(violation_kind::out_of_range) == 2);
  CHECK(r.count(violation_kind::comm_mismatch) >= 2);
  // simulate refuses it, naming its first violation; told not to validate, it reports.
  CHECK_THROWS_WITH(simulate(s, cost_model::uniform(1, 2, 3, 1)),
                    Catch::StartsWith("simulate: schedule \"broken\" is invalid: "));
  const auto sim =
      simulate(s, cost_model::uniform(1, 2, 3, 1), simulate_options{true, true, false});
  CHECK(sim.completed() == !r.deadlock.has_value());
  const auto mem = check_memory(s);
  CHECK_FALSE(mem.lifetimes_ok());
}

TEST_CASE("check_memory rejects malformed options", "[reliability][memory]") {
  const auto s = generate(zb_h1{}, 4, 8);
  CHECK_THROWS_WITH(
      check_memory(s, {}, memory_options::with_limit({1, 2})),
      "check_memory: memory_limit: must hold one value or one per stage (p=4), got 2");
  CHECK_THROWS_WITH(check_memory(s, {}, memory_options::with_limit(nan_v)),
                    Catch::StartsWith("check_memory: memory_limit: must be finite and >= 0, got "));
  CHECK_THROWS_WITH(check_memory(s, {}, memory_options::with_limit({1, 2, -3, 4})),
                    "check_memory: memory_limit[2]: must be finite and >= 0, got -3");
  CHECK_THROWS_AS(check_memory(s, {}, memory_options::with_limit(-1)), invalid_argument);
  CHECK_THROWS_AS(check_memory(s, {}, memory_options::with_limit(inf_v)), invalid_argument);
  memory_options tol;
  tol.tolerance = -1;
  CHECK_THROWS_AS(check_memory(s, {}, tol), invalid_argument);
  simulate_options no_ops;
  no_ops.record_ops = false;
  CHECK_THROWS_WITH(check_memory(s, {}, {}, simulate(s, {}, no_ops)),
                    Contains("(simulate with record_ops = true)"));
  CHECK_THROWS_AS(check_memory(s, {}, {}, simulate(generate(zb_h1{}, 2, 8))), invalid_argument);
}

TEST_CASE("schedule JSON: empty, truncated, garbage, wrong types, huge numbers",
          "[reliability][io]") {
  const std::string ok = write_schedule_json(generate(one_f_one_b{}, 2, 2));
  CHECK_THROWS_WITH(read_schedule_json(""), StartsWith("schedule JSON: malformed JSON"));
  for (std::size_t cut = 0; cut < ok.size(); cut += 7) {
    INFO(cut);
    CHECK_THROWS_AS(read_schedule_json(ok.substr(0, cut)), invalid_argument);
  }
  CHECK_THROWS_AS(read_schedule_json(std::string("\x00\xff\xfe{\x01", 5)), invalid_argument);
  // A number beyond double range: nlohmann throws out_of_range, not parse_error (fuzz finding).
  CHECK_THROWS_WITH(read_schedule_json(R"({"version":1,"stages":1E400})"),
                    StartsWith("schedule JSON: malformed JSON") && Contains("number overflow"));
  CHECK_THROWS_WITH(read_schedule_json("[]"), "/: must be an object, not array");
  CHECK_THROWS_WITH(read_schedule_json(R"({"version":2})"),
                    StartsWith("/version: unsupported schedule format version 2"));
  const std::string head = R"({"version":1,)";
  CHECK_THROWS_WITH(read_schedule_json(head + R"("stages":"4","microbatches":1,"ops":[[]]})"),
                    "/stages: must be an integer, not string");
  CHECK_THROWS_WITH(read_schedule_json(head + R"("stages":-1,"microbatches":1,"ops":[[]]})"),
                    "/stages: must be an integer >= 1, not -1");
  CHECK_THROWS_WITH(read_schedule_json(head + R"("stages":1.5,"microbatches":1,"ops":[[]]})"),
                    "/stages: must be an integer, not 1.5");
  CHECK_THROWS_WITH(read_schedule_json(head + R"("stages":true,"microbatches":1,"ops":[[]]})"),
                    "/stages: must be an integer, not boolean");
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":4294967296,"ops":[[]]})"),
      "/microbatches: must be between 1 and 16777216, not 4294967296");
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":16384,"chunks":65535,"microbatches":1,"ops":[]})"),
      "/chunks: stages*chunks (1073725440) must be at most 16777216");
  CHECK_THROWS_WITH(read_schedule_json(head + R"("stages":2,"microbatches":1,"ops":[[]]})"),
                    "/ops: must hold one list per stage (stages=2), not 1");
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":1,"ops":[[{"kind":"F","mb":null}]]})"),
      "/ops/0/0/mb: must be an integer, not null");
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":1,"ops":[[{"kind":"F","mb":0,)"
                                R"("chunk":65536}]]})"),
      "/ops/0/0/chunk: must be between 0 and 65535, not 65536");
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":1,"placement":"zigzag","ops":[[]]})"),
      StartsWith("/placement: unknown placement \"zigzag\" (known: sequential"));
  // Quoted input stays on one line and short: control characters escaped, long strings cut.
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":1,"ops":[[{"kind":"F\nX","mb":0}]]})"),
      StartsWith(R"(/ops/0/0/kind: unknown op kind "F\nX" (known: F B)"));
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":1,"microbatches":1,"ops":[[{"kind":")" +
                         std::string(5000, 'Q') + R"(","mb":0}]]})"),
      StartsWith("/ops/0/0/kind: unknown op kind \"" + std::string(60, 'Q') + "...\" (known:"));
  CHECK_THROWS_WITH(
      read_schedule_json(head + R"("stages":2,"microbatches":1,"placement":{"kind":"custom",)"
                                R"("table":[1,1]},"ops":[[],[]]})"),
      StartsWith("/placement/table: placement: table entry 1 (global chunk 1) must be a "
                 "permutation"));
}

TEST_CASE("read_text_file: missing files, directories and size limits", "[reliability][io]") {
  CHECK_THROWS_WITH(read_text_file("/nonexistent/x.json"), "/nonexistent/x.json: cannot open file");
  CHECK_THROWS_WITH(read_text_file("/"), "/: is a directory, not a file");
  CHECK_THROWS_WITH(read_text_file("/dev/zero", 1000),
                    "/dev/zero: file size must be at most 1000 bytes");
  CHECK(read_text_file("/dev/null").empty());
}

TEST_CASE("PyTorch CSV: empty, garbage, overflow, and a huge stage index stay cheap",
          "[reliability][io]") {
  CHECK_THROWS_WITH(from_torch_csv(""),
                    "from_torch_csv: no rows (a PyTorch CSV has one row per rank)");
  CHECK_THROWS_WITH(from_torch_csv(",,\n"), "from_torch_csv: no actions (every cell is empty)");
  CHECK_THROWS_WITH(from_torch_csv("0F4294967296\n"),
                    StartsWith("from_torch_csv: row 1, column 1: malformed cell \"0F4294967296\""));
  CHECK_THROWS_WITH(from_torch_csv("0X1\n"),
                    StartsWith("from_torch_csv: row 1, column 1: unknown action \"X\""));
  CHECK_THROWS_AS(from_torch_csv(std::string("\x00\xff,\x01", 4)), invalid_argument);
  CHECK_THROWS_WITH(from_torch_csv("0F16777216\n"),
                    StartsWith("from_torch_csv: microbatches (m=16777217) must be at most"));
  // 4096 ranks (rows of idle cells), rank 0 naming stage 2^24 - 1: v = 4096. Neither loop nor
  // V, so a custom table is attempted; that used to scan all 2^24 stages once per rank (7e10
  // steps).
  std::string many = "16777215F0\n";
  for (int r = 1; r < 4096; ++r) {
    many += ",\n";
  }
  CHECK_THROWS_WITH(from_torch_csv(many),
                    StartsWith("from_torch_csv: rank 0 (row 1) holds 1 stages, expected 4096"));
}

TEST_CASE("lower_communication refuses invalid and already lowered input", "[reliability][gen]") {
  schedule s = schedule::sequential("bad", 2, 1);
  s.stage_ops(0) = {make_op(op_kind::forward, 0)};
  CHECK_THROWS_WITH(lower_communication(s),
                    StartsWith("lower_communication: input schedule \"bad\" is invalid"));
  const schedule lowered = lower_communication(generate(one_f_one_b{}, 2, 2));
  CHECK_THROWS_WITH(lower_communication(lowered), Contains("is already lowered"));
}
