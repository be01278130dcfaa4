#include <catch2/catch.hpp>

#include <pipesched/model/data_parallel.hpp>

using namespace pipesched;

TEST_CASE("ring all-reduce: the formula by hand", "[data_parallel]") {
  // D = 4: 6 steps of 0.5 latency, each moving 1e6 / 4 bytes at 1e5 per unit: 3 + 15.
  CHECK(ring_allreduce_time(4, 1e6, 1e5, 0.5) == Approx(18.0));
  CHECK(ring_allreduce_time(1, 1e6, 1e5, 0.5) == 0.0);
  CHECK(ring_allreduce_time(2, 100, 10, 0) == Approx(10.0));
  transformer_dims d;
  d.hidden = 1024;
  d.layers = 2;
  CHECK(transformer_gradient_bytes(d, 2) == 2.0 * (12.0 * 1024 * 1024 + 13 * 1024) * 2);
}
