#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/exec/executor.hpp>

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

TEST_CASE("null_executor runs any op", "[exec][executor]") {
  null_executor e;
  null_executor::message in;
  (void)e.run(0, make_op(op_kind::forward, 0), std::move(in));
  CHECK(detail::check_executor<null_executor>());
  good_executor g;
  CHECK(g.run(1, make_op(op_kind::backward_input, 2), std::string("a")) == "ax");
}
