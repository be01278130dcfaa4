#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/interleaved.hpp>
#include <pipesched/gen/one_f_one_b.hpp>

using namespace pipesched;

static_assert(schedule_generator<interleaved_1f1b>);

namespace {
std::string line(const schedule& s, stage_index st) {
  std::string out;
  for (const op& o : s.ops(st)) {
    out += (out.empty() ? "" : " ") + to_string(o, true);
  }
  return out;
}
std::uint64_t forwards_before_first_backward(std::span<const op> ops) {
  std::uint64_t n = 0;
  for (const op& o : ops) {
    if (o.kind != op_kind::forward) {
      break;
    }
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("interleaved-1f1b p=2 v=2 m=2 by hand", "[gen][interleaved]") {
  const auto s = generate(interleaved_1f1b{}, 2, 2, 2);
  CHECK(s.layout().kind() == placement_kind::loop);
  // Stage 0 warm-up (2-0-1)*2 + (2-1)*2 = 4 = m*v: every forward first.
  CHECK(line(s, 0) == "F0.0 F1.0 F0.1 F1.1 BW0.1 BW1.1 BW0.0 BW1.0");
  // Stage 1 warm-up 0 + 2 = 2, then one forward one backward.
  CHECK(line(s, 1) == "F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 BW0.0 BW1.0");
}

TEST_CASE("interleaved-1f1b grid: valid, counts, warm-up", "[gen][interleaved][grid]") {
  for (std::uint32_t p = 1; p <= 8; ++p) {
    for (std::uint32_t v = 1; v <= 4; ++v) {
      for (std::uint32_t m = 1; m <= 20; ++m) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const auto s = generate(interleaved_1f1b{}, p, m, v);
        REQUIRE(validate(s).ok());
        REQUIRE(s.size() == std::size_t{2} * p * m * v);
        for (stage_index r = 0; r < p; ++r) {
          REQUIRE(s.ops(r).size() == std::size_t{2} * m * v);
          if (m % p == 0) {
            // The warm-up, then the steady phase's first forward.
            CHECK(forwards_before_first_backward(s.ops(r)) ==
                  std::min<std::uint64_t>(interleaved_1f1b::warmup(p, m, v, r) + 1,
                                          std::uint64_t{m} * v));
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: m not a multiple of p where Megatron's short group deadlocks",
          "[gen][interleaved]") {
  // p=5, v=2, m=7 and p=6, v=3, m=8: the short-last-group order deadlocks; padding does not.
  CHECK(validate(generate(interleaved_1f1b{}, 5, 7, 2)).ok());
  CHECK(validate(generate(interleaved_1f1b{}, 6, 8, 3)).ok());
  CHECK(validate(generate(interleaved_1f1b{}, 8, 3, 4)).ok());
}

namespace {
// The order as first written: every stage walks the whole padded table (m rounded up to a
// multiple of p) and skips the padding micro-batches, p·v·⌈m/p⌉·p steps per stage.
std::vector<std::vector<op>> padded_order(std::uint32_t p, std::uint32_t m, std::uint32_t v) {
  const std::uint32_t padded = (m + p - 1) / p * p;
  std::vector<std::pair<microbatch_index, chunk_index>> table;
  for (std::uint32_t first = 0; first < padded; first += p) {
    for (std::uint32_t c = 0; c < v; ++c) {
      for (std::uint32_t j = first; j < first + p; ++j) {
        table.emplace_back(j, static_cast<chunk_index>(c));
      }
    }
  }
  std::vector<std::vector<op>> out(p);
  for (stage_index r = 0; r < p; ++r) {
    auto fwd = [&](std::size_t k) {
      if (table[k].first < m) {
        out[r].push_back(make_op(op_kind::forward, table[k].first, table[k].second));
      }
    };
    auto bwd = [&](std::size_t k) {
      if (table[k].first < m) {
        out[r].push_back(make_op(op_kind::backward_full, table[k].first,
                                 static_cast<chunk_index>(v - 1 - table[k].second)));
      }
    };
    const auto w = static_cast<std::size_t>(interleaved_1f1b::warmup(p, padded, v, r));
    std::size_t f = 0;
    std::size_t b = 0;
    for (; f < w; ++f) {
      fwd(f);
    }
    for (; f < table.size(); ++f, ++b) {
      fwd(f);
      bwd(b);
    }
    for (; b < table.size(); ++b) {
      bwd(b);
    }
  }
  return out;
}
}  // namespace

TEST_CASE("interleaved-1f1b: the padded table's order with the padding dropped",
          "[gen][interleaved][grid]") {
  for (std::uint32_t p = 1; p <= 9; ++p) {
    for (std::uint32_t v = 1; v <= 4; ++v) {
      for (std::uint32_t m = 1; m <= 2 * p + 3; ++m) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const auto s = generate(interleaved_1f1b{}, p, m, v);
        const auto want = padded_order(p, m, v);
        for (stage_index r = 0; r < p; ++r) {
          REQUIRE(std::vector<op>(s.ops(r).begin(), s.ops(r).end()) == want[r]);
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: work linear in the ops, also for m = 1 and large p",
          "[gen][interleaved][complexity]") {
  // A quadratic walk would show here: at p = 65536, m = 1, v = 2 walking the padded table on every
  // stage is 2·p²·v = 1.7e10 steps for 262144 ops. The bound counts loop steps, not time.
  for (const auto& [p, m, v] : {std::tuple{65536u, 1u, 2u}, std::tuple{4096u, 3u, 64u},
                                std::tuple{1000u, 999u, 3u}, std::tuple{7u, 50u, 5u}}) {
    INFO("p=" << p << " m=" << m << " v=" << v);
    std::uint64_t steps = 0;
    const schedule s = interleaved_1f1b{}.order(p, m, v, &steps);
    REQUIRE(s.size() == std::size_t{2} * p * m * v);
    CHECK(steps <= 2 * (s.size() + std::uint64_t{p} * v));
  }
}

TEST_CASE("interleaved-1f1b bubble is (p-1)(TF+TB+TW) in chunk costs, 1/v of 1F1B's",
          "[gen][interleaved][timing]") {
  for (const op_costs c : {op_costs{1, 1, 1}, op_costs{3, 4, 2}, op_costs{1, 2, 0}}) {
    for (std::uint32_t p : {2u, 4u, 8u}) {
      for (std::uint32_t v : {2u, 3u, 4u}) {
        for (std::uint32_t k : {1u, 2u, 3u}) {
          const std::uint32_t m = k * p;
          INFO("p=" << p << " v=" << v << " m=" << m << " costs " << c.forward << ","
                    << c.backward_input << "," << c.backward_weight);
          const double t = c.forward + c.backward_input + c.backward_weight;
          // Per stage: v times a chunk's cost (cost_model splits it over the v chunks).
          const auto stage_costs =
              cost_model::uniform(v * c.forward, v * c.backward_input, v * c.backward_weight);
          const auto il = simulate(generate(interleaved_1f1b{}, p, m, v), stage_costs);
          const double span = il.span(il.max_span_stage);
          const double bubble = span - double(m) * v * t;
          CHECK(bubble == Approx((p - 1) * t));
          // The bubble rate's busy time is m*v*(T_F+T_B+T_W) in chunk costs.
          CHECK(il.bubble_rate == Approx(bubble / span));
          // 1F1B with the same per-stage costs: its bubble is v times larger.
          const auto ofob = simulate(generate(one_f_one_b{}, p, m), stage_costs);
          const double bubble_1f1b = ofob.span(ofob.max_span_stage) - double(m) * v * t;
          CHECK(bubble_1f1b == Approx(v * bubble));
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: registry default v=2 and errors", "[gen][interleaved][errors]") {
  const auto* e = default_registry().find("interleaved-1f1b");
  REQUIRE(e != nullptr);
  CHECK(e->default_chunks == 2);
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  CHECK(e->generate(gp).chunks() == 2);
  CHECK_THROWS_WITH(generate(interleaved_1f1b{}, 0, 4, 2),
                    "interleaved-1f1b: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(generate(interleaved_1f1b{}, 4, 0, 2),
                    "interleaved-1f1b: microbatches (m=0) must be at least 1");
}

namespace {
schedule interleaved_group_generate(std::uint32_t p,
                                    std::uint32_t m,
                                    std::uint32_t v,
                                    std::uint32_t n) {
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  gp.chunks = v;
  gp.group_size = n;
  return interleaved_1f1b{}.generate(gp);
}
}  // namespace

TEST_CASE("interleaved-1f1b group size: the order Megatron-LM's schedule table gives",
          "[gen][interleaved][group]") {
  // tests/data/megatron_interleaved_order.json: Megatron-LM's get_schedule_table and
  // get_pp_rank_microbatches run unchanged (the file names the commit), per rank.
  std::ifstream in(PIPESCHED_TEST_DATA_DIR "/megatron_interleaved_order.json");
  REQUIRE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  REQUIRE(data.at("cases").size() >= 6);
  for (const auto& c : data.at("cases")) {
    const auto p = c.at("p").get<std::uint32_t>();
    const auto v = c.at("v").get<std::uint32_t>();
    const auto n = c.at("group_size").get<std::uint32_t>();
    const auto m = c.at("microbatches").get<std::uint32_t>();
    INFO("p=" << p << " v=" << v << " N=" << n << " m=" << m);
    const schedule s = interleaved_group_generate(p, m, v, n);
    REQUIRE(validate(s).ok());
    for (const auto& st : c.at("stages")) {
      const auto r = st.at("rank").get<stage_index>();
      CHECK(line(s, r) == st.at("order").get<std::string>());
      CHECK(interleaved_1f1b::warmup(p, m, v, r, n) == st.at("warmup").get<std::uint64_t>());
    }
  }
}

TEST_CASE("interleaved-1f1b group size: warm-up (p-r-1)*2 + (v-1)*N, valid for p <= N <= m",
          "[gen][interleaved][group][grid]") {
  for (std::uint32_t p = 1; p <= 6; ++p) {
    for (std::uint32_t v = 2; v <= 3; ++v) {
      for (std::uint32_t n = p; n <= 2 * p + 1; ++n) {
        for (std::uint32_t m = n; m <= 3 * n + 1; ++m) {
          INFO("p=" << p << " v=" << v << " N=" << n << " m=" << m);
          const schedule s = interleaved_group_generate(p, m, v, n);
          REQUIRE(validate(s).ok());
          REQUIRE(s.size() == std::size_t{2} * p * m * v);
          if (m % n != 0) {
            continue;  // padded to a multiple of N: the warm-up counts the dropped slots
          }
          for (stage_index r = 0; r < p; ++r) {
            // Megatron's get_pp_rank_microbatches, written out; then the steady phase's first
            // forward.
            const std::uint64_t megatron = std::uint64_t{p - r - 1} * 2 + std::uint64_t{v - 1} * n;
            CHECK(forwards_before_first_backward(s.ops(r)) ==
                  std::min<std::uint64_t>(megatron + 1, std::uint64_t{m} * v));
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b group size: default p is today's order; above p, a longer step",
          "[gen][interleaved][group]") {
  for (std::uint32_t p : {2u, 4u, 5u}) {
    for (std::uint32_t m : {1u, 3u, 8u, 10u}) {
      INFO("p=" << p << " m=" << m);
      const schedule dflt = generate(interleaved_1f1b{}, p, m, 2);
      if (m >= p) {
        const schedule given = interleaved_group_generate(p, m, 2, p);
        for (stage_index r = 0; r < p; ++r) {
          CHECK(line(given, r) == line(dflt, r));
        }
      }
    }
  }
  // p = 4, v = 2, m = 8, unit chunk costs: with N = p the bubble is (p-1)*3 chunk times; a
  // larger group keeps more forwards in flight and does not shorten the step.
  const auto costs = cost_model::uniform(2, 2, 2);
  const auto by_p = simulate(interleaved_group_generate(4, 8, 2, 4), costs);
  const auto by_8 = simulate(interleaved_group_generate(4, 8, 2, 8), costs);
  CHECK(by_p.span(by_p.max_span_stage) == Approx(8 * 2 * 3 + 3 * 3));
  CHECK(by_8.span(by_8.max_span_stage) >= by_p.span(by_p.max_span_stage));
}

TEST_CASE("interleaved-1f1b group size: errors name N and m", "[gen][interleaved][errors]") {
  CHECK_THROWS_WITH(interleaved_group_generate(4, 8, 2, 9),
                    "interleaved-1f1b: group_size (N=9) must be between 1 and microbatches (m=8)");
  CHECK_THROWS_WITH(interleaved_group_generate(1, 1, 2, 2),
                    "interleaved-1f1b: group_size (N=2) must be between 1 and microbatches (m=1)");
  // Below p is Llama 3's order now.
  CHECK(validate(interleaved_group_generate(4, 8, 2, 3)).ok());
  const auto* e = default_registry().find("interleaved-1f1b");
  REQUIRE(e != nullptr);
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 12;
  gp.group_size = 6;
  CHECK(interleaved_1f1b::warmup(4, 12, 2, 0, 6) == 12);
  CHECK(forwards_before_first_backward(e->generate(gp).ops(0)) == 13);
}

namespace {
// Most forwards in flight (run, their backward not yet run) on one stage.
std::uint64_t peak_in_flight(std::span<const op> ops) {
  std::uint64_t now = 0;
  std::uint64_t peak = 0;
  for (const op& o : ops) {
    if (o.kind == op_kind::forward) {
      peak = std::max(peak, ++now);
    } else if (o.kind == op_kind::backward_full) {
      --now;
    }
  }
  return peak;
}
// The ops of one kind on a stage, in order.
std::vector<op> ops_of(std::span<const op> ops, op_kind k) {
  std::vector<op> out;
  for (const op& o : ops) {
    if (o.kind == k) {
      out.push_back(o);
    }
  }
  return out;
}
// Megatron's table for groups of n, written out: (micro-batch, chunk) by group, chunk,
// micro-batch, the padding micro-batches (>= m) left out.
std::vector<std::pair<microbatch_index, chunk_index>> group_table(std::uint32_t m,
                                                                  std::uint32_t v,
                                                                  std::uint32_t n) {
  std::vector<std::pair<microbatch_index, chunk_index>> out;
  for (std::uint32_t first = 0; first < m; first += n) {
    for (std::uint32_t c = 0; c < v; ++c) {
      for (std::uint32_t j = first; j < std::min(first + n, m); ++j) {
        out.emplace_back(j, static_cast<chunk_index>(c));
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("interleaved-1f1b group size below p: valid, the table's order, in flight bounded",
          "[gen][interleaved][group][grid]") {
  for (std::uint32_t p : {2u, 3u, 4u, 5u, 8u, 16u}) {
    for (std::uint32_t v : {2u, 3u, 4u, 8u}) {
      for (std::uint32_t n = 1; n < p; ++n) {
        for (std::uint32_t m : {n, p, 2 * p, 2 * p + 1, 4 * p}) {
          INFO("p=" << p << " v=" << v << " N=" << n << " m=" << m);
          const schedule s = interleaved_group_generate(p, m, v, n);
          REQUIRE(validate(s).ok());
          REQUIRE(s.size() == std::size_t{2} * p * m * v);
          const auto table = group_table(m, v, n);
          for (stage_index r = 0; r < p; ++r) {
            INFO("stage " << r);
            REQUIRE(s.ops(r).size() == std::size_t{2} * m * v);
            // Forwards in the table's order, backwards in it with chunks reversed.
            const auto fwd = ops_of(s.ops(r), op_kind::forward);
            const auto bwd = ops_of(s.ops(r), op_kind::backward_full);
            REQUIRE(fwd.size() == table.size());
            REQUIRE(bwd.size() == table.size());
            for (std::size_t k = 0; k < table.size(); ++k) {
              REQUIRE(fwd[k] == make_op(op_kind::forward, table[k].first, table[k].second));
              REQUIRE(bwd[k] == make_op(op_kind::backward_full, table[k].first,
                                        static_cast<chunk_index>(v - 1 - table[k].second)));
            }
            // The bound, written out: Megatron's warm-up w_r, at least (v-1)*N + 1 (a stage's
            // first backward needs its own forward at table position (v-1)*N).
            const std::uint64_t w = std::min<std::uint64_t>(
                std::uint64_t{p - r - 1} * 2 + std::uint64_t{v - 1} * n, std::uint64_t{m} * v);
            const std::uint64_t need = std::uint64_t{v - 1} * n + 1;
            const std::uint64_t bound = interleaved_1f1b::in_flight_bound(p, m, v, r, n);
            CHECK(bound == std::max(w, need));
            CHECK(bound == (r + 1 < p ? w : w + 1));
            const std::uint64_t peak = peak_in_flight(s.ops(r));
            CHECK(peak <= bound);
            CHECK(forwards_before_first_backward(s.ops(r)) >= need);
            if (r + 1 == p) {
              CHECK(peak == bound);  // the last stage's bound is the least that runs at all
            }
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b group size: in flight at most in_flight_bound for every N",
          "[gen][interleaved][group][grid]") {
  for (std::uint32_t p = 1; p <= 6; ++p) {
    for (std::uint32_t v = 1; v <= 3; ++v) {
      for (std::uint32_t m = 1; m <= 2 * p + 2; ++m) {
        for (std::uint32_t n = 1; n <= m; ++n) {
          INFO("p=" << p << " v=" << v << " N=" << n << " m=" << m);
          const schedule s = interleaved_group_generate(p, m, v, n);
          REQUIRE(validate(s).ok());
          for (stage_index r = 0; r < p; ++r) {
            const std::uint64_t bound = interleaved_1f1b::in_flight_bound(p, m, v, r, n);
            const std::uint64_t peak = peak_in_flight(s.ops(r));
            CHECK(peak <= bound);
            if ((n >= p || v == 1) && m % n == 0) {
              CHECK(peak == bound);  // Megatron's warm-up, then the steady phase's forward
            }
          }
        }
      }
    }
  }
  // v = 1: the table is micro-batch order and every N gives 1F1B's order.
  for (std::uint32_t n = 1; n <= 7; ++n) {
    INFO("N=" << n);
    const schedule s = interleaved_group_generate(5, 7, 1, n);
    const schedule want = generate(one_f_one_b{}, 5, 7);
    for (stage_index r = 0; r < 5; ++r) {
      CHECK(line(s, r) == line(want, r));
    }
  }
}

TEST_CASE("interleaved-1f1b group size below p: Megatron's deadlocking case by hand",
          "[gen][interleaved][group]") {
  // p=3, v=2, N=1, m=3: in Megatron's order stage 0's F2.1 waits for stage 2's F2.0, which
  // comes after stage 2's BW0.0, which waits for stage 0's BW0.1, which comes after F2.1.
  // In-flight bounds 5, 3 and 2 (w_r = 5, 3, 1, the last raised to (v-1)*N + 1).
  const schedule s = interleaved_group_generate(3, 3, 2, 1);
  REQUIRE(validate(s).ok());
  CHECK(line(s, 0) == "F0.0 F0.1 F1.0 F1.1 BW0.1 F2.0 BW0.0 F2.1 BW1.1 BW1.0 BW2.1 BW2.0");
  CHECK(line(s, 1) == "F0.0 F0.1 F1.0 BW0.1 F1.1 BW0.0 F2.0 BW1.1 F2.1 BW1.0 BW2.1 BW2.0");
  CHECK(line(s, 2) == "F0.0 F0.1 BW0.1 F1.0 BW0.0 F1.1 BW1.1 F2.0 BW1.0 F2.1 BW2.1 BW2.0");
  CHECK(interleaved_1f1b::in_flight_bound(3, 3, 2, 0, 1) == 5);
  CHECK(interleaved_1f1b::in_flight_bound(3, 3, 2, 1, 1) == 3);
  CHECK(interleaved_1f1b::in_flight_bound(3, 3, 2, 2, 1) == 2);
}

TEST_CASE("interleaved-1f1b group size below p: less memory, dependency bubbles",
          "[gen][interleaved][group][timing]") {
  // Llama 3 405B's pipeline shape: p=16, v=8, here m=32; unit chunk costs (F 1, BW 2).
  const std::uint32_t p = 16;
  const std::uint32_t v = 8;
  const std::uint32_t m = 32;
  const auto costs = cost_model::uniform(v, v, v);
  // N, stage 0's peak forwards in flight, unit-cost makespan.
  const std::vector<std::tuple<std::uint32_t, std::uint64_t, double>> want = {
      {16, 143, 813}, {8, 80, 1149}, {4, 40, 2081}, {2, 21, 3933}, {1, 11, 7421}};
  std::uint64_t peak_p = 0;
  double span_p = 0;
  for (const auto& [n, peak, span] : want) {
    INFO("N=" << n);
    const schedule s = interleaved_group_generate(p, m, v, n);
    REQUIRE(validate(s).ok());
    const auto sim = simulate(s, costs);
    CHECK(peak_in_flight(s.ops(0)) == peak);
    CHECK(sim.makespan == Approx(span));
    if (n == p) {
      peak_p = peak;
      span_p = sim.makespan;
      // Megatron's: (warm-up + 1) in flight, bubble (p-1)*3 chunk times.
      CHECK(peak == interleaved_1f1b::warmup(p, m, v, 0, n) + 1);
      CHECK(span == 3.0 * m * v + 3.0 * (p - 1));
    } else {
      CHECK(peak < peak_p);
      CHECK(sim.makespan >= span_p);
    }
  }
}

TEST_CASE("interleaved-1f1b group size below p: work linear in the ops",
          "[gen][interleaved][complexity]") {
  // Each op's end wakes at most three stages: table steps 2*(ops + N*v), plus 4*ops + 2*p.
  for (const auto& [p, m, v, n] : {std::tuple{65536u, 1u, 2u, 1u}, std::tuple{4096u, 3u, 4u, 2u},
                                   std::tuple{1000u, 99u, 3u, 7u}, std::tuple{16u, 50u, 8u, 5u}}) {
    INFO("p=" << p << " m=" << m << " v=" << v << " N=" << n);
    std::uint64_t steps = 0;
    const schedule s = interleaved_1f1b{}.order(p, m, v, &steps, n);
    REQUIRE(s.size() == std::size_t{2} * p * m * v);
    CHECK(steps <= 6 * (s.size() + std::uint64_t{p} * v));
  }
}
