#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/model/link.hpp>

using namespace pipesched;

namespace {

std::string link_error(const link_model& l, std::uint32_t stages) {
  try {
    l.check(stages, "who");
  } catch (const pipesched::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("link_model: defaults are free links and no bulk traffic", "[link]") {
  const link_model l;
  CHECK(link_error(l, 4).empty());
  CHECK(l.bandwidth_of(3) == std::numeric_limits<double>::infinity());
  CHECK(l.discipline == link_discipline::fifo);
  CHECK_FALSE(l.bulk.any());
  CHECK(l.bulk.steps() == 0);
}

TEST_CASE("link_model: per-stage bandwidth and bulk bytes", "[link]") {
  link_model l;
  l.bandwidth = {1.0, 2.0, 3.0};
  l.bulk.replicas = 4;
  l.bulk.gradient_bytes = {10.0, 20.0, 30.0};
  CHECK(link_error(l, 3).empty());
  CHECK(l.bandwidth_of(1) == 2.0);
  CHECK(l.bulk.bytes(2) == 30.0);
  CHECK(l.bulk.steps() == 6);
  CHECK(l.bulk.any());
  CHECK(link_error(l, 4) ==
        "who: link bandwidth (3 entries) must hold one value or one per stage (p=4)");
}

TEST_CASE("link_model: invalid values name the field and the rule", "[link]") {
  link_model l;
  l.bandwidth = {0.0};
  CHECK(link_error(l, 2) ==
        "who: link bandwidth (0) must be > 0 (bytes per time unit; infinity: no serialization)");
  l.bandwidth = {-1.0};
  CHECK(link_error(l, 2).find("link bandwidth (-1) must be > 0") != std::string::npos);
  l.bandwidth = {std::numeric_limits<double>::quiet_NaN()};
  CHECK(link_error(l, 2).find("link bandwidth (nan) must be > 0") != std::string::npos);
  l = link_model{};
  l.activation_bytes = -1.0;
  CHECK(link_error(l, 2) == "who: link activation_bytes (-1) must be finite and >= 0");
  l = link_model{};
  l.gradient_bytes = std::numeric_limits<double>::infinity();
  CHECK(link_error(l, 2) == "who: link gradient_bytes (inf) must be finite and >= 0");
  l = link_model{};
  l.bulk.replicas = 0;
  CHECK(link_error(l, 2) == "who: bulk replicas (D=0) must be at least 1");
  l = link_model{};
  l.bulk.gradient_bytes = {1.0, -2.0};
  CHECK(link_error(l, 2) == "who: bulk gradient_bytes (-2) must be finite and >= 0");
  l.bulk.gradient_bytes = {1.0, 2.0, 3.0};
  CHECK(link_error(l, 2) ==
        "who: bulk gradient_bytes (3 entries) must hold one value or one per stage (p=2)");
  l = link_model{};
  l.bulk.step_latency = -0.5;
  CHECK(link_error(l, 2) == "who: bulk step_latency (-0.5) must be finite and >= 0");
  l = link_model{};
  l.bulk.buckets_per_chunk = 0;
  CHECK(link_error(l, 2) == "who: bulk buckets_per_chunk (0) must be at least 1");
}

TEST_CASE("link_discipline: names round-trip, others are refused", "[link]") {
  CHECK(parse_link_discipline("fifo") == link_discipline::fifo);
  CHECK(parse_link_discipline("priority") == link_discipline::priority);
  CHECK(to_string(link_discipline::fifo) == "fifo");
  CHECK(to_string(link_discipline::priority) == "priority");
  CHECK(parse_link_discipline(to_string(link_discipline::priority)) == link_discipline::priority);
  CHECK_THROWS_WITH(parse_link_discipline("lifo", "--discipline"),
                    "--discipline: discipline (\"lifo\") must be fifo or priority");
}

TEST_CASE("bulk_traffic: from a data-parallel model, without its bandwidth", "[link]") {
  data_parallel_model dp;
  dp.replicas = 8;
  dp.gradient_bytes = {5.0, 6.0};
  dp.bandwidth = 123.0;
  dp.latency = 0.25;
  const bulk_traffic b = bulk_traffic::from(dp, 3);
  CHECK(b.replicas == 8);
  CHECK(b.gradient_bytes == std::vector<double>{5.0, 6.0});
  CHECK(b.step_latency == 0.25);
  CHECK(b.buckets_per_chunk == 3);
  CHECK(b.steps() == 14);
}

TEST_CASE("transformer_link_model: messages are the chunk-boundary tensor", "[link]") {
  transformer_dims d;
  d.hidden = 1024;
  d.heads = 16;
  d.sequence = 2048;
  d.microbatch = 2;
  d.layers = 4;
  const link_model l = transformer_link_model(d, 1e9, 8);
  CHECK(l.activation_bytes == 2.0 * 2048 * 2 * 1024);  // e·s·b·h, e = 2
  CHECK(l.gradient_bytes == l.activation_bytes);
  CHECK(l.bulk.replicas == 8);
  CHECK(l.bulk.bytes(0) == transformer_gradient_bytes(d));
  CHECK(l.bandwidth_of(0) == 1e9);
  CHECK(link_error(l, 4).empty());
}
