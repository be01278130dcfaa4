#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/schedule_input.hpp>
#include <pipesched/io/torch_csv.hpp>

#include "support/error_of.hpp"

using namespace pipesched;

namespace {
using test_support::error_of;
}  // namespace

TEST_CASE("schedule input: format names", "[io][schedule_input]") {
  CHECK(parse_input_format("json") == input_format::json);
  CHECK(parse_input_format("torch-csv") == input_format::torch_csv);
  CHECK(!parse_input_format("auto"));  // automatic is the absence of a choice
  CHECK(!parse_input_format("JSON"));
  CHECK(!parse_input_format(""));
  for (input_format f : {input_format::json, input_format::torch_csv}) {
    CHECK(parse_input_format(to_string(f)) == f);
  }
  CHECK(to_string(input_format::automatic) == "auto");
}

TEST_CASE("schedule input: detected by content, not by name", "[io][schedule_input]") {
  // A PyTorch CSV row starts with a cell or with an idle step.
  CHECK(detect_input_format("0F0,0F1\n") == input_format::torch_csv);
  CHECK(detect_input_format(",1F0\n") == input_format::torch_csv);
  CHECK(detect_input_format(" \t\r\n 1F0\n") == input_format::torch_csv);
  // Anything else is JSON, so empty or binary text reads as malformed JSON.
  CHECK(detect_input_format("{\"version\": 1}") == input_format::json);
  CHECK(detect_input_format("  [1, 2]") == input_format::json);
  CHECK(detect_input_format("") == input_format::json);
  CHECK(detect_input_format(" \n") == input_format::json);
  CHECK(detect_input_format(std::string("\0\x01", 2)) == input_format::json);
  CHECK(detect_input_format("F0,B0") == input_format::json);
}

TEST_CASE("schedule input: read_schedule reads either format", "[io][schedule_input]") {
  const schedule s = generate(zb_h1{}, 2, 3);
  const std::string text = write_schedule_json(s);
  const std::string csv = to_torch_csv(s);
  CHECK(read_schedule(text) == s);
  CHECK(read_schedule(text).name() == "zb-h1");
  CHECK(read_schedule(text, input_format::json) == s);
  CHECK(read_schedule(csv) == s);
  CHECK(read_schedule(csv, input_format::torch_csv) == s);
  // A CSV has no name of its own: the caller's, by default from_torch_csv's.
  CHECK(read_schedule(csv, input_format::automatic, "run7").name() == "run7");
  CHECK(read_schedule(csv).name() == from_torch_csv(csv).name());
  CHECK(read_schedule(text, input_format::automatic, "ignored").name() == "zb-h1");

  // An explicit format is obeyed; the error is the reader's own.
  CHECK_THAT(error_of([&] { (void)read_schedule(csv, input_format::json); }),
             Catch::StartsWith("schedule JSON: malformed JSON:"));
  CHECK_THAT(error_of([&] { (void)read_schedule(text, input_format::torch_csv); }),
             Catch::StartsWith("from_torch_csv: row 1, column 1: malformed cell"));
  CHECK(error_of([] { (void)read_schedule("[1]"); }) == "/: must be an object, not array");
  CHECK(read_schedule(to_torch_csv(generate(one_f_one_b{}, 3, 4))) ==
        generate(one_f_one_b{}, 3, 4));
}
