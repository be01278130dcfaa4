#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/detail/json_reader.hpp>

#include "support/error_of.hpp"

using nlohmann::json;
using pipesched::detail::json_reader;

namespace {
using test_support::error_of;
}  // namespace

// The one reader of every JSON format: each rule's message, with the JSON pointer in front.
TEST_CASE("json reader: paths and rules", "[io][json_reader]") {
  const json j = json::parse(R"({"a": {"b": [1, -2, 1.5, "x", true]}, "n": null, "s": "t"})");
  const json_reader r{j, ""};
  CHECK(r["a"]["b"][2].path == "/a/b/2");
  CHECK(r["a"]["b"].array() == 5);
  CHECK(r["a"]["b"][0].integer(0, 5) == 1);
  CHECK(error_of([&] { (void)r["a"]["b"][0].integer(2, 5); }) ==
        "/a/b/0: must be between 2 and 5, not 1");
  CHECK(error_of([&] { (void)r["a"]["b"][1].integer(0, 5); }) ==
        "/a/b/1: must be an integer >= 0, not -2");
  CHECK(error_of([&] { (void)r["a"]["b"][2].integer(0, 5); }) ==
        "/a/b/2: must be an integer, not 1.5");
  CHECK(error_of([&] { (void)r["a"]["b"][4].integer(0, 5); }) ==
        "/a/b/4: must be an integer, not boolean");
  CHECK(r["a"]["b"][2].non_negative() == 1.5);
  CHECK(error_of([&] { (void)r["a"]["b"][1].non_negative(); }) ==
        "/a/b/1: must be a finite number >= 0, not -2");
  CHECK(error_of([&] { (void)r["a"]["b"][3].non_negative(); }) ==
        "/a/b/3: must be a number >= 0, not string");
  CHECK(r["a"]["b"][1].number() == -2.0);
  CHECK(error_of([&] { (void)r["n"].number(); }) == "/n: must be a finite number, not null");
  CHECK(r["s"].string() == "t");
  CHECK(error_of([&] { (void)r["n"].string(); }) == "/n: must be a string, not null");
  CHECK(error_of([&] { (void)r["zz"]; }) == "/zz: missing required key");
  CHECK(r.has("a"));
  CHECK(!r.has("zz"));
  CHECK(!r["s"].has("a"));  // not an object: nothing to have
  CHECK(r.non_negative_or("zz", 7.0) == 7.0);
  CHECK(error_of([&] { (void)r["a"].array(); }) == "/a: must be an array, not object");
  CHECK(error_of([&] { (void)r["a"]["b"].object(); }) == "/a/b: must be an object, not array");
  CHECK(error_of([&] { r.error("rule ", 3); }) == "/: rule 3");
}

TEST_CASE("json reader: strict objects, versions, kinds, quoting, parsing", "[io][json_reader]") {
  const json j = json::parse(R"({"version": 2, "kind": "Q", "fwd": 1})");
  const json_reader r{j, ""};
  CHECK(error_of([&] {
          r.object({"version", "kind"});
        }) == "/fwd: unknown key (expected one of: version, kind)");
  CHECK(error_of([&] { r.object(); }) == "no error");  // any keys
  CHECK(error_of([&] { r.version(1, "thing"); }) ==
        "/version: unsupported thing format version 2 (this library reads version 1)");
  CHECK(error_of([&] { (void)r["kind"].kind(" (known: F)"); }) ==
        "/kind: unknown op kind \"Q\" (known: F)");
  const json f = "BW";
  CHECK(json_reader{f, "/k"}.kind() == pipesched::op_kind::backward_full);
  CHECK(json_reader::quote("a\nb") == "\"a\\nb\"");
  CHECK(json_reader::quote(std::string(100, 'x')) == "\"" + std::string(60, 'x') + "...\"");
  CHECK_THAT(error_of([] { (void)json_reader::parse("{", "thing"); }),
             Catch::StartsWith("thing: malformed JSON: [json.exception.parse_error.101]"));
  CHECK_THAT(error_of([] { (void)json_reader::parse("1E400", "thing"); }),
             Catch::StartsWith("thing: malformed JSON: [json.exception.out_of_range.406]"));
}

TEST_CASE("json reader: a key given twice is refused, naming its pointer", "[io][json_reader]") {
  const auto parse_error = [](const char* text) {
    return error_of([&] { (void)json_reader::parse(text, "model"); });
  };
  CHECK(parse_error(R"({"layers": 24, "hidden": 8, "layers": 2})") ==
        "model: /layers: the key is given twice (each key once per object)");
  CHECK(parse_error(R"({"stages": [{"a": 1}, {"b": 1, "a": 2, "b": 3}]})") ==
        "model: /stages/1/b: the key is given twice (each key once per object)");
  CHECK(parse_error(R"({"x": [[1, 2], [3, {"k/~": 1, "k/~": 2}]]})") ==
        "model: /x/1/1/k~1~0: the key is given twice (each key once per object)");
  // The same key in sibling or nested objects is no repeat; many keys in one object are
  // searched in order past the small case.
  CHECK(parse_error(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}]})") == "no error");
  std::string many = "{";
  for (int i = 0; i < 40; ++i) {
    many += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  }
  CHECK(parse_error((many + "\"z\": 0}").c_str()) == "no error");
  CHECK(parse_error((many + "\"k7\": 0}").c_str()) ==
        "model: /k7: the key is given twice (each key once per object)");
  CHECK(json_reader::parse(R"({"a": [1, {"b": 2}], "c": 3})", "m") ==
        json::parse(R"({"a": [1, {"b": 2}], "c": 3})"));
}

TEST_CASE("json reader: per-chunk tables", "[io][json_reader]") {
  const auto read = [](const json_reader& e) { return e.integer(0, 9); };
  const json good = json::parse("[[1, 2], [3, 4], [5, 6]]");
  const auto [chunks, flat] = read_per_chunk(json_reader{good, "/t"}, read);
  CHECK(chunks == 2);
  CHECK(flat == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});
  const json ragged = json::parse("[[1, 2], [3]]");
  CHECK(error_of([&] {
          (void)read_per_chunk(json_reader{ragged, "/t"}, read);
        }) == "/t/1: must hold 2 chunks, like /t/0");
  const json empty = json::parse("[]");
  CHECK(error_of([&] {
          (void)read_per_chunk(json_reader{empty, "/t"}, read);
        }) == "/t: must not be empty");
}
