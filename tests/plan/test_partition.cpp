#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/plan/partition.hpp>

using namespace pipesched;

namespace {

double slowest(const std::vector<std::uint32_t>& layers,
               const placement& pl,
               const partition_weights& w) {
  std::vector<double> t(pl.stages(), 0.0);
  for (global_chunk g = 0; g < layers.size(); ++g) {
    t[pl.stage_of(g)] += layers[g] * w.layer_time + w.fixed_time[g];
  }
  return *std::max_element(t.begin(), t.end());
}

/// The best slowest-stage time over every partition (small cases), by enumeration.
double brute_force(std::uint32_t layers, const placement& pl, const partition_weights& w) {
  const std::uint32_t n = pl.stages() * pl.chunks();
  std::vector<std::uint32_t> cur(n, 1);
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::uint32_t, std::uint32_t)> go = [&](std::uint32_t g, std::uint32_t left) {
    if (g + 1 == n) {
      if (left < min_chunk_layers(g, n, layers)) {
        return;
      }
      cur[g] = left;
      std::vector<std::uint32_t> per_stage(pl.stages(), 0);
      for (global_chunk k = 0; k < n; ++k) {
        per_stage[pl.stage_of(k)] += cur[k];
      }
      for (stage_index s = 0; s < pl.stages(); ++s) {
        if (!w.max_stage_layers.empty() && per_stage[s] > w.max_stage_layers[s]) {
          return;
        }
      }
      best = std::min(best, slowest(cur, pl, w));
      return;
    }
    for (std::uint32_t l = min_chunk_layers(g, n, layers); l <= left; ++l) {
      cur[g] = l;
      go(g + 1, left - l);
    }
  };
  go(0, layers);
  return best;
}

}  // namespace

TEST_CASE("partition: even gives the extra layers to the middle chunks", "[plan][partition]") {
  CHECK(even_partition(32, 4) == std::vector<std::uint32_t>{8, 8, 8, 8});
  CHECK(even_partition(126, 16) ==
        std::vector<std::uint32_t>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7});  // Llama 3's
  CHECK(even_partition(7, 3) == std::vector<std::uint32_t>{2, 3, 2});
  // One or two chunks more than layers: the head's chunk, then also the embedding's, hold none.
  CHECK(even_partition(3, 4) == std::vector<std::uint32_t>{1, 1, 1, 0});
  CHECK(even_partition(3, 5) == std::vector<std::uint32_t>{0, 1, 1, 1, 0});
  CHECK_THROWS_WITH(even_partition(3, 6), Catch::Contains("cannot fill 6 chunks"));
  CHECK(max_chunks_for(126) == 128);
  CHECK(min_chunk_layers(0, 128, 126) == 0);
  CHECK(min_chunk_layers(127, 128, 126) == 0);
  CHECK(min_chunk_layers(1, 128, 126) == 1);
  CHECK(min_chunk_layers(0, 126, 126) == 1);
}

TEST_CASE("partition: Llama 3 405B's layout, the end chunks only the embedding and the head",
          "[plan][partition]") {
  // 126 layers on PP 16 with v = 8 (arXiv 2407.21783 §3.3.2): 128 chunks, one layer each but
  // the first (the embedding) and the last (the head).
  const placement pl = placement::loop(16, 8);
  partition_weights w;
  w.layer_time = 1.0;
  w.fixed_time.assign(128, 0.0);
  w.fixed_time[0] = 0.05;
  w.fixed_time[127] = 0.9;
  const auto got = balanced_partition(126, pl, w);
  REQUIRE(got);
  std::vector<std::uint32_t> want(128, 1);
  want.front() = 0;
  want.back() = 0;
  CHECK(*got == want);
  // One chunk more than layers: the balance empties the heavier end, the head's.
  w.fixed_time.assign(16, 0.0);
  w.fixed_time[0] = 0.05;
  w.fixed_time[15] = 0.9;
  const auto one = balanced_partition(15, placement::sequential(16), w);
  REQUIRE(one);
  CHECK(one->front() == 1);
  CHECK(one->back() == 0);
}

TEST_CASE("partition: balanced is the best slowest stage (brute force on small cases)",
          "[plan][partition]") {
  std::mt19937 engine(11);
  auto rng = [&] { return static_cast<std::uint32_t>(engine()); };
  for (int round = 0; round < 60; ++round) {
    const std::uint32_t p = 1 + rng() % 4;
    const std::uint32_t v = 1 + rng() % 2;
    const placement pl = v == 1 ? placement::sequential(p)
                                : (rng() % 2 ? placement::v_shape(p) : placement::loop(p, 2));
    const std::uint32_t n = p * v;
    // From two layers fewer than chunks (the end chunks empty) to six more.
    const auto layers =
        static_cast<std::uint32_t>(std::max(1, static_cast<int>(n + rng() % 9) - 2));
    partition_weights w;
    w.layer_time = 1.0 + static_cast<double>(rng() % 5) / 4.0;
    w.fixed_time.assign(n, 0.0);
    w.fixed_time[0] = static_cast<double>(rng() % 4) / 2.0;
    w.fixed_time[n - 1] = static_cast<double>(rng() % 6) / 2.0;
    if (rng() % 3 == 0) {
      w.max_stage_layers.assign(p, layers);
      w.max_stage_layers[rng() % p] = v + rng() % 3;
    }
    const auto got = balanced_partition(layers, pl, w);
    const double best = brute_force(layers, pl, w);
    INFO("p " << p << " v " << v << " layers " << layers);
    if (!std::isfinite(best)) {
      CHECK_FALSE(got);
      continue;
    }
    REQUIRE(got);
    CHECK(got->size() == n);
    std::uint32_t sum = 0;
    for (std::uint32_t g = 0; g < n; ++g) {
      CHECK((*got)[g] >= min_chunk_layers(g, n, layers));
      sum += (*got)[g];
    }
    CHECK(sum == layers);
    CHECK(slowest(*got, pl, w) == Approx(best));
  }
}

TEST_CASE("partition: a heavy head gives the last stage fewer layers", "[plan][partition]") {
  partition_weights w;
  w.layer_time = 1.0;
  w.fixed_time.assign(16, 0.0);
  w.fixed_time[15] = 0.9;  // the LM head: most of a layer
  const auto got = balanced_partition(126, placement::sequential(16), w);
  REQUIRE(got);
  CHECK(got->back() == 7);
  CHECK(slowest(*got, placement::sequential(16), w) == 8.0);
}

TEST_CASE("partition: a given list is checked", "[plan][partition]") {
  CHECK_NOTHROW(check_given_partition({7, 8, 8, 7}, 30, 4));
  CHECK_THROWS_WITH(check_given_partition({7, 8, 8}, 30, 4),
                    "plan: --partition lists 3 values; the layout has p·v = 4 chunks");
  CHECK_NOTHROW(check_given_partition({0, 15, 15, 0}, 30, 4));  // embedding and head alone
  CHECK_THROWS_WITH(check_given_partition({10, 0, 10, 10}, 30, 4),
                    "plan: --partition: chunk 1 has no layer: every chunk but the first (the "
                    "embedding) and the last (the head) needs at least one");
  CHECK_THROWS_WITH(check_given_partition({8, 8, 8, 8}, 30, 4),
                    "plan: --partition sums to 32 layers; the model has 30");
}
