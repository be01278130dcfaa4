#include <catch2/catch.hpp>

#include <pipesched/ir/dependencies.hpp>

using namespace pipesched;

TEST_CASE("requirements follow docs/model.md section 1", "[ir][dependencies]") {
  const auto pl = placement::sequential(3);
  auto r = requirements_of(pl, 1, make_op(op_kind::forward, 4), false);
  REQUIRE(r.count == 1);
  CHECK(r.items[0] == requirement{0, 0, 4, event_kind::forward_done, true});
  r = requirements_of(pl, 0, make_op(op_kind::forward, 4), false);
  CHECK(r.count == 0);
  r = requirements_of(pl, 2, make_op(op_kind::backward_input, 1), false);  // last: its own F
  REQUIRE(r.count == 1);
  CHECK(r.items[0] == requirement{2, 2, 1, event_kind::activations_ready, false});
  r = requirements_of(pl, 1, make_op(op_kind::backward_full, 1), false);
  REQUIRE(r.count == 2);
  CHECK(r.items[1] == requirement{2, 2, 1, event_kind::input_grad_done, true});
  r = requirements_of(pl, 1, make_op(op_kind::backward_weight, 1), false);
  REQUIRE(r.count == 1);
  CHECK(r.items[0].what == event_kind::backward_input_done);
  // Lowered: the cross-stage input is a local RECV.
  r = requirements_of(pl, 1, make_op(op_kind::forward, 4), true);
  REQUIRE(r.count == 1);
  CHECK(r.items[0] == requirement{1, 1, 4, event_kind::received_forward, false});
}

TEST_CASE("comm partners pair SEND and RECV on the right peers", "[ir][dependencies]") {
  const auto v = placement::v_shape(2);  // stage 0: chunks 0, 3; stage 1: chunks 1, 2
  auto p = comm_partner(v, 0, make_op(op_kind::send_forward, 2, 0));
  REQUIRE(p);
  CHECK(*p == op_ref{1, make_op(op_kind::recv_forward, 2, 0)});
  p = comm_partner(v, 1, make_op(op_kind::send_forward, 2, 1));  // chunk 2 -> chunk 3 on stage 0
  REQUIRE(p);
  CHECK(*p == op_ref{0, make_op(op_kind::recv_forward, 2, 1)});
  CHECK_FALSE(comm_partner(v, 0, make_op(op_kind::send_forward, 0, 1)).has_value());  // last
  CHECK_FALSE(comm_partner(v, 0, make_op(op_kind::forward, 0, 0)).has_value());
}

TEST_CASE("R needs its own F; the backward of a recomputed F waits for the R",
          "[ir][dependencies][recompute]") {
  const auto pl = placement::sequential(3);
  auto r = requirements_of(pl, 1, make_op(op_kind::recompute, 2), false);
  REQUIRE(r.count == 1);
  CHECK(r.items[0] == requirement{1, 1, 2, event_kind::forward_done, false});
  // activations_ready comes from a plain F or from an R, never from an F marked recompute.
  const op f = make_op(op_kind::forward, 2);
  CHECK(events_produced(f) ==
        (event_bit(event_kind::forward_done) | event_bit(event_kind::activations_ready)));
  CHECK(events_produced(recomputing(f)) == event_bit(event_kind::forward_done));
  CHECK(events_produced(make_op(op_kind::recompute, 2)) ==
        event_bit(event_kind::activations_ready));
}
