#include <memory>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/exec/executor.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "exec/exec_helpers.hpp"

using namespace pipesched;

namespace {

struct good_executor {
  using message = std::string;
  message run(stage_index, const op&, message&& in) { return in + "x"; }
};

struct move_only_message_executor {
  using message = std::unique_ptr<int>;
  message run(stage_index, const op&, message&& in) { return std::move(in); }
};

struct wrong_return_type {
  using message = int;
  void run(stage_index, const op&, message&&) {}
};

struct returns_other_type {
  using message = int;
  long run(stage_index, const op&, message&&) { return 0; }
};

struct no_message_type {
  int run(stage_index, const op&, int&&) { return 0; }
};

struct old_shape {  // the message-less run(s, o) of an earlier draft
  struct message {};
  void run(stage_index, const op&) {}
};

struct message_not_default_constructible {
  struct message {
    explicit message(int) {}
  };
  message run(stage_index, const op&, message&& in) { return std::move(in); }
};

struct const_only_run {  // the concept asks for run() on a non-const lvalue; const is fine too
  struct message {};
  message run(stage_index, const op&, message&&) const { return {}; }
};

struct context_only {
  struct message {};
  message run(const op_context&, message&&) { return {}; }
};

struct both_forms {  // the context form is the one drivers call
  using message = std::string;
  message run(const op_context& c, message&&) { return "context " + std::to_string(c.chunk); }
  message run(stage_index, const op&, message&&) { throw std::logic_error("short form called"); }
};

struct context_wrong_return {
  struct message {};
  void run(const op_context&, message&&) {}
};

struct context_wrong_return_good_short {  // drivers would call the broken context form
  struct message {};
  int run(const op_context&, message&&) { return 0; }
  message run(stage_index, const op&, message&&) { return {}; }
};

}  // namespace

// The cases of the concept's documentation.
static_assert(executor<null_executor>);
static_assert(!executor<int>);
// More models.
static_assert(executor<good_executor>);
static_assert(executor<move_only_message_executor>);
static_assert(executor<const_only_run>);
// Near misses.
static_assert(!executor<wrong_return_type>, "run() must return message");
static_assert(!executor<returns_other_type>, "run() must return exactly message");
static_assert(!executor<no_message_type>, "a nested message type is required");
static_assert(!executor<old_shape>, "run() takes the input message");
static_assert(!executor<message_not_default_constructible>, "empty inputs are default messages");
static_assert(!executor<const null_executor>, "run() on a const executor is not required");
// The context form.
static_assert(executor<context_only>);
static_assert(executor<both_forms>);
static_assert(!executor<context_wrong_return>, "run(const op_context&, message&&) returns message");
static_assert(!executor<context_wrong_return_good_short>, "the context form is the one called");
static_assert(detail::takes_op_context<both_forms> && detail::takes_stage_and_op<both_forms>);
static_assert(!detail::takes_op_context<good_executor>);

TEST_CASE("null_executor runs any op", "[exec][executor]") {
  null_executor e;
  null_executor::message in;
  (void)e.run(0, make_op(op_kind::forward, 0), std::move(in));
  CHECK(detail::check_executor<null_executor>());
  good_executor g;
  CHECK(g.run(1, make_op(op_kind::backward_input, 2), std::string("a")) == "ax");
}

TEST_CASE("make_op_context: global chunk, first / last chunk and m from the schedule",
          "[exec][executor]") {
  const auto s = generate(interleaved_1f1b{}, 2, 4, 2);  // loop placement: g = c*p + s
  for (stage_index st = 0; st < 2; ++st) {
    for (std::size_t i = 0; i < s.ops(st).size(); ++i) {
      const op_context c = make_op_context(s, st, i);
      const op o = s.ops(st)[i];
      CHECK(c == op_context{st, i, o, o.chunk * 2u + st, o.chunk == 0 && st == 0,
                            o.chunk == 1 && st == 1, 4});
    }
  }
  CHECK_THROWS_WITH(make_op_context(s, 2, 0),
                    "make_op_context: stage 2, op 0 is outside schedule \"" + s.name() + "\"");
  CHECK_THROWS_AS(make_op_context(s, 0, s.ops(0).size()), invalid_argument);
  schedule bad = schedule::sequential("bad", 2, 2);
  bad.stage_ops(0) = {make_op(op_kind::forward, 0, 1)};
  CHECK_THROWS_WITH(make_op_context(bad, 0, 0),
                    "make_op_context: F0.1 (stage 0, op 0) is out of range: chunks v=1, "
                    "microbatches m=2");
}

TEST_CASE("detail::run_op calls the context form when there is one, else the short form",
          "[exec][executor]") {
  const op_context c{1, 0, make_op(op_kind::forward, 0, 1), 3, false, true, 2};
  both_forms both;
  CHECK(detail::run_op(both, c, std::string()) == "context 3");
  good_executor short_only;
  CHECK(detail::run_op(short_only, c, std::string("a")) == "ax");
}

TEST_CASE("drivers hand a context executor the op's global chunk and first / last chunk",
          "[exec][executor]") {
  // Interleaved (loop placement, v = 2) and zb-v (V placement: stage 0 holds the first and the
  // last chunk); one lowered schedule for the contexts of SEND / RECV ops.
  const std::vector<schedule> scheds = {generate(interleaved_1f1b{}, 3, 6, 2),
                                        generate(zb_v{}, 3, 6),
                                        lower_communication(generate(zb_v{}, 2, 4))};
  for (const schedule& s : scheds) {
    INFO(s.name() << (s.has_comm() ? " (lowered)" : ""));
    exec_test::context_executor serial(s.stages());
    run_serial(serial, s);
    CHECK(exec_test::check_contexts(
              s, [&](stage_index st) -> const auto& { return serial.seen(st); }) == "");
    exec_test::context_executor threaded(s.stages());
    run_threaded(threaded, s);
    CHECK(exec_test::check_contexts(
              s, [&](stage_index st) -> const auto& { return threaded.seen(st); }) == "");
    // Independently of the placement arithmetic: the m forwards of the first chunk run on
    // stage 0, those of the last on the last stage (loop) or on stage 0 again (V).
    const stage_index loss_stage = s.layout().kind() == placement_kind::v_shape ? 0 : 2;
    std::size_t first_f = 0;
    std::size_t last_f = 0;
    for (stage_index st = 0; st < s.stages(); ++st) {
      for (const op_context& c : serial.seen(st)) {
        if (c.o.kind == op_kind::forward) {
          first_f += c.first_chunk && st == 0 ? 1U : 0U;
          last_f += c.last_chunk && st == loss_stage ? 1U : 0U;
        }
      }
    }
    CHECK(first_f == s.microbatches());
    CHECK(last_f == s.microbatches());
  }
}

TEST_CASE("an executor with both forms gets the context form; the short form still drives",
          "[exec][executor]") {
  const auto s = generate(one_f_one_b{}, 2, 3);
  both_forms both;  // its short form throws
  CHECK_NOTHROW(run_serial(both, s));
  CHECK_NOTHROW(run_threaded(both, s));
  exec_test::checking_executor old_form(s);  // short form only
  run_threaded(old_form, s);
  CHECK(old_form.finished());
}

TEST_CASE("drivers run an overlapped pair as two run() calls in list order, flagged on the first",
          "[exec][executor][overlap]") {
  // Stage 0 overlaps F2 with BW0, stage 1 F1 with BW0 (docs/model.md §1).
  schedule s = schedule::sequential("pairs", 2, 3);
  const auto F = [](microbatch_index j) { return make_op(op_kind::forward, j); };
  const auto BW = [](microbatch_index j) { return make_op(op_kind::backward_full, j); };
  s.stage_ops(0) = {F(0), F(1), overlapping_next(F(2)), BW(0), BW(1), BW(2)};
  s.stage_ops(1) = {F(0), overlapping_next(F(1)), BW(0), F(2), BW(1), BW(2)};
  CHECK(make_op_context(s, 0, 2).overlaps_next);
  CHECK_FALSE(make_op_context(s, 0, 3).overlaps_next);  // the second op is not flagged
  CHECK_FALSE(make_op_context(s, 0, 1).overlaps_next);
  CHECK(make_op_context(s, 0, 2).o == overlapping_next(F(2)));
  // A mark on the last op of a stage (invalid) has no next op to overlap with.
  schedule last = schedule::sequential("last", 1, 1);
  last.stage_ops(0) = {F(0), overlapping_next(BW(0))};
  CHECK_FALSE(make_op_context(last, 0, 1).overlaps_next);
  for (int threaded = 0; threaded < 2; ++threaded) {
    INFO((threaded ? "thread driver" : "serial driver"));
    exec_test::context_executor seen(s.stages());
    exec_test::checking_executor checked(s);  // routing and dependency order
    if (threaded) {
      run_threaded(seen, s);
      run_threaded(checked, s);
    } else {
      run_serial(seen, s);
      run_serial(checked, s);
    }
    CHECK(checked.finished());
    CHECK(exec_test::check_contexts(
              s, [&](stage_index st) -> const auto& { return seen.seen(st); }) == "");
    for (stage_index st = 0; st < 2; ++st) {
      const auto& got = seen.seen(st);
      REQUIRE(got.size() == 6);
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].index == i);
        CHECK(got[i].overlaps_next == (st == 0 ? i == 2 : i == 1));
      }
    }
  }
}
