#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/fmt.hpp>

using namespace pipesched;

TEST_CASE("fmt: op_kind, placement_kind and op", "[io][fmt]") {
  CHECK(fmt::format("{}", op_kind::backward_full) == "BW");
  CHECK(fmt::format("{:>3}|", op_kind::forward) == "  F|");
  CHECK(fmt::format("{}", op_kind::recv_backward) == "RECV_B");
  CHECK(fmt::format("{}", placement_kind::v_shape) == "v");
  CHECK(fmt::format("{}", make_op(op_kind::backward_weight, 12, 1)) == "W12");
  CHECK(fmt::format("{:c}", make_op(op_kind::forward, 3, 1)) == "F3.1");
}

TEST_CASE("fmt: schedule", "[io][fmt]") {
  CHECK(fmt::format("{}", generate(one_f_one_b{}, 2, 2)) ==
        "1f1b: p=2 m=2 v=1 (sequential)\nstage 0: F0 F1 BW0 BW1\nstage 1: F0 BW0 F1 BW1");
  schedule s = schedule::on("two", placement::loop(1, 2), 1);
  s.stage_ops(0) = {make_op(op_kind::forward, 0, 0), make_op(op_kind::forward, 0, 1)};
  CHECK(fmt::format("{}", s) == "two: p=1 m=1 v=2 (loop)\nstage 0: F0.0 F0.1");
}

TEST_CASE("fmt: an overlapped pair is one entry, as PyTorch lists it", "[io][fmt][overlap]") {
  // Stage 0 of a 1-stage, 2-chunk schedule: F1 of chunk 0 runs overlapped with BW0 of chunk 1.
  schedule s = schedule::on("pair", placement::loop(1, 2), 2);
  s.stage_ops(0) = {make_op(op_kind::forward, 0, 0),
                    make_op(op_kind::forward, 0, 1),
                    overlapping_next(make_op(op_kind::forward, 1, 0)),
                    make_op(op_kind::backward_full, 0, 1),
                    make_op(op_kind::forward, 1, 1),
                    make_op(op_kind::backward_full, 1, 1),
                    make_op(op_kind::backward_full, 0, 0),
                    make_op(op_kind::backward_full, 1, 0)};
  CHECK(fmt::format("{}", s) ==
        "pair: p=1 m=2 v=2 (loop)\nstage 0: F0.0 F0.1 (F1.0;BW0.1) F1.1 BW1.1 BW0.0 BW1.0");
  // The same listing as the text format's.
  CHECK(fmt::format("{}", s).substr(fmt::format("{}", s).find('\n') + 1) + "\n" ==
        format_schedule_text(s));
}

TEST_CASE("fmt: validation report", "[io][fmt]") {
  CHECK(fmt::format("{}", validate(generate(zb_h1{}, 2, 2))) == "ok");
  schedule s = schedule::sequential("bad", 1, 1);
  s.stage_ops(0) = {make_op(op_kind::forward, 0)};
  const auto r = validate(s);
  REQUIRE(r.total == 1);
  CHECK(fmt::format("{}", r) == "1 violation\n  [missing] " + r.violations[0].message);
}

TEST_CASE("fmt: timeline", "[io][fmt]") {
  const timeline t = cost_timeline(generate(one_f_one_b{}, 2, 2));
  // Unit costs: stage 0 F0 0-1, F1 1-2, BW0 4-6, BW1 7-9; stage 1 F0 1-2, BW0 2-4, F1 4-5,
  // BW1 5-7. Span 9 = (m+p-1)(T_F+T_B+T_W) on stage 0, busy 6.
  CHECK(fmt::format("{}", t) ==
        "makespan 9 cost units, bubble rate 33.3%\nstage 0: span 9 cost units, busy 6 cost "
        "units, idle 3 cost units\nstage 1: span 6 cost units, busy 6 cost units, idle 0 cost "
        "units");
}
