#include <cstddef>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/dualpipev.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/text.hpp>

using namespace pipesched;

TEST_CASE("text listing is one line per stage with 0-based micro-batches", "[io][text]") {
  CHECK(format_schedule_text(generate(zb_h1{}, 2, 2)) ==
        "stage 0: F0 F1 B0 W0 B1 W1\n"
        "stage 1: F0 B0 F1 B1 W0 W1\n");
  schedule s = schedule::on("x", placement::loop(1, 2), 1);
  s.stage_ops(0) = {make_op(op_kind::forward, 0, 1)};
  CHECK(format_schedule_text(s) == "stage 0: F0.1\n");
}

TEST_CASE("text listing: an overlapped pair is one entry in parentheses", "[io][text][overlap]") {
  const schedule s = generate(dualpipev{}, 2, 4);
  // The first pair of stage 0 (docs/model.md §6, DualPipeV, step 4: F of chunk 0 of micro-batch
  // 3 with the full backward of chunk 1 of micro-batch 1), then the next one.
  const std::string text = format_schedule_text(s);
  CHECK(text.find("stage 0: F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 (F3.0;BW1.1) (F2.1;BW0.0)") == 0);
  std::size_t pairs = 0;
  std::size_t parens = 0;
  for (stage_index st = 0; st < s.stages(); ++st) {
    for (const op& o : s.ops(st)) {
      pairs += overlaps_next(o) ? 1U : 0U;
    }
  }
  for (const char c : text) {
    parens += c == '(' ? 1U : 0U;
  }
  CHECK(pairs > 0);
  CHECK(parens == pairs);
  // A mark on the last op (no next op; the validator reports it) lists the op alone.
  schedule lone = schedule::sequential("lone", 1, 1);
  lone.stage_ops(0) = {make_op(op_kind::forward, 0),
                       overlapping_next(make_op(op_kind::backward_full, 0))};
  CHECK(format_schedule_text(lone) == "stage 0: F0 BW0\n");
}
