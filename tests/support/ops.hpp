#pragma once

// Short op constructors for hand-built schedules in tests: F(3), BW(0, 1), SF(2), ...
#include <cstdint>

#include <pipesched/ir/op.hpp>

namespace test_ops {

using pipesched::chunk_index;
using pipesched::make_op;
using pipesched::op;
using pipesched::op_kind;

inline op F(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::forward, j, c);
}
inline op B(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::backward_input, j, c);
}
inline op W(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::backward_weight, j, c);
}
inline op BW(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::backward_full, j, c);
}
inline op R(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::recompute, j, c);
}
/// An F marked recompute (it keeps only its input until its R).
inline op Fr(std::uint32_t j, chunk_index c = 0) {
  return pipesched::recomputing(make_op(op_kind::forward, j, c));
}
inline op SF(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::send_forward, j, c);
}
inline op RF(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::recv_forward, j, c);
}
inline op SB(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::send_backward, j, c);
}
inline op RB(std::uint32_t j, chunk_index c = 0) {
  return make_op(op_kind::recv_backward, j, c);
}

}  // namespace test_ops
