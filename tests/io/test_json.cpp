#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/io/json.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

TEST_CASE("schedule JSON round-trips for every registered generator", "[io][json]") {
  for (const auto& e : default_registry().entries()) {
    for (std::uint32_t m : {5u, 6u}) {  // 6: dualpipev needs m >= 2p
      generator_params p;
      p.stages = 3;
      p.microbatches = m;
      const auto s = test_support::generate_if_served(e, p);
      if (!s) {
        continue;
      }
      const schedule back = read_schedule_json(write_schedule_json(*s));
      INFO(e.name << " m=" << m);
      CHECK(back == *s);
      CHECK(back.name() == s->name());
    }
  }
}

TEST_CASE("schedule JSON has the version 1 shape", "[io][json]") {
  const auto j = schedule_to_json(generate(one_f_one_b{}, 2, 1));
  CHECK(j["version"] == 1);
  CHECK(j["name"] == "1f1b");
  CHECK(j["stages"] == 2);
  CHECK(j["microbatches"] == 1);
  CHECK(j["chunks"] == 1);
  CHECK(j["ops"][0][0] == nlohmann::json{{"kind", "F"}, {"mb", 0}});
  CHECK(j["ops"][1][1] == nlohmann::json{{"kind", "BW"}, {"mb", 0}});
  CHECK(write_schedule_json(generate(one_f_one_b{}, 1, 1)) ==
        "{\"chunks\":1,\"microbatches\":1,\"name\":\"1f1b\",\"placement\":\"sequential\","
        "\"stages\":1,\"version\":1,\"ops\":[\n  [{\"kind\":\"F\",\"mb\":0},{\"kind\":\"BW\","
        "\"mb\":0}]\n]}\n");
}

TEST_CASE("placements and comm peers round-trip", "[io][json]") {
  schedule v = schedule::on("v", placement::v_shape(2), 2);
  v.stage_ops(0) = {make_op(op_kind::forward, 0, 0), make_op(op_kind::send_forward, 0, 0)};
  const auto j = schedule_to_json(v);
  CHECK(j["placement"] == "v");
  CHECK(j["ops"][0][1]["peer"] == 1);
  CHECK(read_schedule_json(j.dump()) == v);

  schedule c = schedule::on("c", placement::custom(2, 2, {3, 0, 1, 2}), 1);
  c.stage_ops(1) = {make_op(op_kind::forward, 0, 1)};
  CHECK(read_schedule_json(write_schedule_json(c)) == c);
}

TEST_CASE("schedule JSON errors name the path and the rule", "[io][json][errors]") {
  auto err = [](const std::string& text) {
    try {
      read_schedule_json(text);
    } catch (const pipesched::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"version": 1, "stages": 2, "microbatches": 2, )";
  CHECK(err(head + R"("ops": [[], [{"kind": "F", "mb": 0}, {"kind": "X", "mb": 0}]]})") ==
        "/ops/1/1/kind: unknown op kind \"X\" (known: F B W BW R SEND_F RECV_F SEND_B RECV_B)");
  CHECK(err(head + R"("ops": [[]]})") == "/ops: must hold one list per stage (stages=2), not 1");
  CHECK(err(head + R"("ops": [[{"kind": "F"}], []]})") == "/ops/0/0/mb: missing required key");
  CHECK(err(head + R"("ops": [[{"kind": "F", "mb": -1}], []]})") ==
        "/ops/0/0/mb: must be an integer >= 0, not -1");
  CHECK(err(head + R"("ops": [[{"kind": "F", "mb": 1.5}], []]})") ==
        "/ops/0/0/mb: must be an integer, not 1.5");
  CHECK(err(head + R"("ops": [[{"kind": 3, "mb": 0}], []]})") ==
        "/ops/0/0/kind: must be a string, not number");
  CHECK(err(head + R"("ops": [[{"kind": "F", "mb": 0, "chunk": 70000}], []]})") ==
        "/ops/0/0/chunk: must be between 0 and 65535, not 70000");
  CHECK(err(head + R"("ops": {}})") == "/ops: must be an array, not object");
  CHECK(err(R"({"version": 2, "stages": 1, "microbatches": 1, "ops": [[]]})") ==
        "/version: unsupported schedule format version 2 (this library reads version 1)");
  CHECK(err(R"({"version": 1, "stages": 0, "microbatches": 1, "ops": []})") ==
        "/stages: must be between 1 and 65536, not 0");
  CHECK(err(R"({"stages": 1})") == "/version: missing required key");
  CHECK(err(R"([1, 2])") == "/: must be an object, not array");
  CHECK(
      err(R"({"version": 1, "stages": 1, "microbatches": 1, "placement": "zigzag", "ops": [[]]})") ==
      "/placement: unknown placement \"zigzag\" (known: sequential, loop, v, dual, or {\"kind\": "
      "\"custom\", \"table\": [...]})");
  CHECK_THAT(err(R"({"version": 1,)"), Catch::StartsWith("schedule JSON: malformed JSON:"));
}

TEST_CASE("out-of-range micro-batches are read and left to the validator", "[io][json]") {
  const auto s = read_schedule_json(
      R"({"version": 1, "stages": 1, "microbatches": 1, "ops": [[{"kind": "F", "mb": 7}]]})");
  CHECK(s.ops(0)[0].mb == 7);
}

TEST_CASE("schedule JSON carries the overlap flag; absent means not overlapped",
          "[io][json][overlap]") {
  schedule s = schedule::sequential("pairs", 2, 3);
  const auto F = [](microbatch_index j) { return make_op(op_kind::forward, j); };
  const auto BW = [](microbatch_index j) { return make_op(op_kind::backward_full, j); };
  s.stage_ops(0) = {F(0), F(1), overlapping_next(F(2)), BW(0), BW(1), BW(2)};
  s.stage_ops(1) = {F(0), overlapping_next(F(1)), BW(0), F(2), BW(1), BW(2)};
  const auto j = schedule_to_json(s);
  CHECK(j["ops"][0][2] == nlohmann::json{{"kind", "F"}, {"mb", 2}, {"overlap_next", true}});
  CHECK(j["ops"][0][3] == nlohmann::json{{"kind", "BW"}, {"mb", 0}});  // no key when unmarked
  const schedule back = read_schedule_json(write_schedule_json(s));
  CHECK(back == s);  // op equality compares the flags
  CHECK(overlaps_next(back.ops(1)[1]));
  CHECK_FALSE(overlaps_next(back.ops(1)[2]));
  // Written before the flag existed, or false: not overlapped.
  const auto old = read_schedule_json(
      R"({"version": 1, "stages": 1, "microbatches": 1, "ops": [[{"kind": "F", "mb": 0},
          {"kind": "BW", "mb": 0, "overlap_next": false}]]})");
  CHECK(old.ops(0)[0].flags == 0);
  CHECK(old.ops(0)[1].flags == 0);
  CHECK_THROWS_WITH(read_schedule_json(R"({"version": 1, "stages": 1, "microbatches": 1,
          "ops": [[{"kind": "F", "mb": 0, "overlap_next": 1}]]})"),
                    "/ops/0/0/overlap_next: must be true or false, not number");
}

TEST_CASE("the dual placement round-trips, routes and peers included", "[io][json][routes]") {
  schedule d = schedule::on("d", placement::dual(2), 2);
  d.stage_ops(1) = {make_op(op_kind::forward, 1, 1), make_op(op_kind::send_forward, 1, 1)};
  const auto j = schedule_to_json(d);
  CHECK(j["placement"] == "dual");
  CHECK(j["ops"][1][1]["peer"] == 0);  // route 1 runs from stage 1 to stage 0
  const schedule back = read_schedule_json(j.dump());
  CHECK(back == d);
  CHECK(back.layout().routes() == 2);
  const auto err = [](const std::string& text) {
    try {
      (void)read_schedule_json(text);
    } catch (const invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(err(R"({"version": 1, "stages": 2, "microbatches": 3, "chunks": 2, "placement": "dual",
               "ops": [[], []]})") ==
        "/placement: \"dual\" needs an even microbatches (two routes of m/2 each), not 3");
  CHECK(err(R"({"version": 1, "stages": 2, "microbatches": 2, "placement": "dual",
               "ops": [[], []]})") == "/placement: \"dual\" needs chunks = 2, not 1");
}
