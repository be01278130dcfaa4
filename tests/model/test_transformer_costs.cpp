#include <catch2/catch.hpp>

#include <pipesched/model/transformer_costs.hpp>

using namespace pipesched;

TEST_CASE("transformer_costs: per-layer formulas times layers", "[sim][transformer]") {
  // h=4, a=2, s=8, b=1, 2 layers.
  const transformer_dims d{4, 2, 8, 1, 2};
  const auto p = transformer_costs(d);
  CHECK(p.units == transformer_units::absolute);
  CHECK(p.costs.forward == 2 * 8 * 4 * (24 * 4 + 4 * 8));         // 8192
  CHECK(p.costs.backward_input == 2 * 8 * 4 * (24 * 4 + 8 * 8));  // 10240
  CHECK(p.costs.backward_weight == 2 * 24 * 8 * 4 * 4);           // 6144
  CHECK(p.memory.activation == 2 * 8 * (34 * 4 + 5 * 2 * 8));     // 3456
  CHECK(p.memory.weight_grad_input == 2 * 32 * 8 * 4);            // 2048
  CHECK(p.memory.received == 2 * 8 * 4);                          // one s·b·h activation
  CHECK(p.memory.input == 2 * 8 * 4);                             // M_in: the slice's input
  CHECK(p.costs.backward_input + p.costs.backward_weight == 2 * p.costs.forward);
}

TEST_CASE("transformer_costs: per-layer units", "[sim][transformer]") {
  const transformer_dims d{4, 2, 8, 1, 2};
  const auto p = transformer_costs(d, transformer_units::per_layer);
  CHECK(p.units == transformer_units::per_layer);
  CHECK(p.costs.forward == 2);
  CHECK(p.costs.backward_input == Approx(2 * 5120.0 / 4096.0));
  CHECK(p.costs.backward_weight == Approx(2 * 3072.0 / 4096.0));
  CHECK(p.memory.activation == Approx(2));
  CHECK(p.memory.weight_grad_input == Approx(2 * 1024.0 / 1728.0));
  CHECK(p.memory.received == Approx(64.0 / 1728.0));

  const auto c = make_cost_model(p, 0.5);
  CHECK(c.for_shape(4, 1, "t").at(3).forward == 2);
  CHECK(c.comm(0, 1) == 0.5);
  const auto m = make_memory_model(p);
  CHECK(m.for_shape(4, 1, "t").at(1).activation == Approx(2));
}

TEST_CASE("transformer_costs: realistic shapes order the costs T_W < T_F < T_B",
          "[sim][transformer]") {
  const auto p = transformer_costs(transformer_dims{4096, 32, 2048, 1, 8});
  CHECK(p.costs.backward_weight < p.costs.forward);
  CHECK(p.costs.forward < p.costs.backward_input);
  CHECK(p.memory.weight_grad_input < p.memory.activation);
  // Valid inputs for the models (M_W <= M_B is enforced there).
  CHECK_NOTHROW(make_memory_model(p));
}

TEST_CASE("transformer_costs: rejects zero dimensions", "[sim][transformer]") {
  CHECK_THROWS_AS(transformer_costs(transformer_dims{0, 2, 8, 1, 1}), invalid_argument);
  CHECK_THROWS_AS(transformer_costs(transformer_dims{4, 0, 8, 1, 1}), invalid_argument);
  CHECK_THROWS_AS(transformer_costs(transformer_dims{4, 2, 0, 1, 1}), invalid_argument);
  CHECK_THROWS_AS(transformer_costs(transformer_dims{4, 2, 8, 0, 1}), invalid_argument);
  CHECK_THROWS_AS(transformer_costs(transformer_dims{4, 2, 8, 1, 0}), invalid_argument);
  CHECK_THROWS_WITH(transformer_costs(transformer_dims{0, 2, 8, 1, 1}),
                    "transformer_costs: hidden (h=0) must be at least 1");
}

TEST_CASE("transformer_costs: activation precision in bytes", "[sim][transformer][recompute]") {
  // h=4, a=2, s=8, b=1, 2 layers. fp8 (1 byte): the 32h and 4as tensors halve, the 1-byte
  // masks (2h, as) do not: M_B = 2·8·(16·4 + 2·4 + 2·2·8 + 2·8) = 2·8·120.
  transformer_dims d{4, 2, 8, 1, 2};
  d.activation_bytes = 1;
  const auto fp8 = transformer_costs(d);
  CHECK(fp8.memory.activation == 2 * 8 * 120);  // 1920, against 3456 in bf16
  CHECK(fp8.memory.weight_grad_input == 2 * 16 * 8 * 4);
  CHECK(fp8.memory.received == 8 * 4);
  CHECK(fp8.memory.input == 8 * 4);
  CHECK(fp8.costs == transformer_costs(transformer_dims{4, 2, 8, 1, 2}).costs);  // FLOPs alike
  d.activation_bytes = 4;  // fp32: M_B = 2·8·(64·4 + 8 + 8·2·8 + 16)
  CHECK(transformer_costs(d).memory.activation == 2 * 8 * (256 + 8 + 128 + 16));
  d.activation_bytes = 0;
  CHECK_THROWS_WITH(transformer_costs(d),
                    "transformer_costs: activation_bytes (0) must be at least 1");
}
