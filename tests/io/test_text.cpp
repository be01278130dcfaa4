#include <catch2/catch.hpp>

#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/text.hpp>

using namespace pipesched;

TEST_CASE("text listing is one line per stage with 0-based micro-batches", "[io][text]") {
  CHECK(format_schedule_text(generate(zb_h1{}, 2, 2)) ==
        "stage 0: F0 F1 B0 W0 B1 W1\n"
        "stage 1: F0 B0 F1 B1 W0 W1\n");
  schedule s("x", 1, placement::loop(1, 2));
  s.stage_ops(0) = {make_op(op_kind::forward, 0, 1)};
  CHECK(format_schedule_text(s) == "stage 0: F0.1\n");
}
