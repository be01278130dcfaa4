#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/detail/zb_v_order.hpp>
#include <pipesched/ir/placement.hpp>
#include <pipesched/ir/schedule.hpp>

using namespace pipesched;

namespace {

schedule handcrafted(std::uint32_t p, std::uint32_t m) {
  schedule s = schedule::on("zb-v-handcrafted", placement::v_shape(p), m);
  auto lists = detail::zb_v_handcrafted_ops(p, m);
  REQUIRE(lists.size() == p);
  for (stage_index st = 0; st < p; ++st) {
    s.stage_ops(st) = std::move(lists[st]);
  }
  return s;
}

std::string render(const schedule& s, stage_index st) {
  std::string out;
  for (const op& o : s.ops(st)) {
    if (!out.empty()) {
      out += ' ';
    }
    out += to_string(o, true);
  }
  return out;
}

}  // namespace

// Per-stage costs and memory of 2 (cost_model, memory_model): one unit per chunk at v = 2, the
// units of the hand traces below.
const cost_model chunk_unit = cost_model::uniform(2.0, 2.0, 2.0);

TEST_CASE("zb-v order: golden lists for p=2, m=4", "[gen][zb-v]") {
  // Hand trace of the rule (cap 4p = 8: a chunk-1 F needs 2a+w+2 <= 8, a chunk-0 F <= 6;
  // a = activations held, w = W pending; ops end one step after they start). "Fk.c" is the F
  // of micro-batch k on local chunk c.
  // Stage 0 holds global chunks 0 (local 0) and 3 (local 1, the loss); stage 1 holds 1 and 2.
  // t0-2: stage 0 runs F0.0 F1.0 F2.0 (2p-1 = 3 chunk-0 forwards, a = 3); stage 1 starts at
  //       t1 with F0.0, then F0.1 (the turn needs only its own F0.0).
  // t3:   F0.1 reaches stage 0 (2a+w+2 = 8 <= 8): the F before the first B, a = 4 = 2p.
  //       Stage 1 runs F1.0 (2·2+2 = 6 <= 6), then F1.1 at t4 (a = 4).
  // t4:   stage 0: chunk-0 F blocked by memory, B0.1 (the loss) runs; t5: F1.1 has arrived
  //       but 2·3+1+2 = 9 > 8, no B is ready, so W0.1; t6: F1.1 (8 <= 8).
  // t5-8: stage 1: B0.1 (from stage 0), B0.0 (the turn), then W0.0, W0.1 (F2.0 blocked:
  //       2·2+1+2 = 7 > 6; F2.1 needs F2.0; no B ready); F2.0 at t9 once w = 0 (6 <= 6).
  // t7-13: stage 0: B0.0, B1.1, W0.0, W1.1, F2.1, B2.1, B1.0; F3.0 (chunk 0) waits until
  //       2a+w+2 <= 6, which first holds after B1.0 (a = 1, w = 2), so it runs at t14.
  // From there both stages drain: remaining F as they arrive, B before W, chunk 0 first.
  // Every step of both stages is busy: span 24 = 6m on each stage (stage 1 runs t1..t25).
  const schedule s = handcrafted(2, 4);
  CHECK(render(s, 0) ==
        "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B0.0 B1.1 W0.0 W1.1 F2.1 B2.1 B1.0 F3.0 B2.0 "
        "W1.0 F3.1 B3.1 W2.0 W2.1 B3.0 W3.0 W3.1");
  CHECK(render(s, 1) ==
        "F0.0 F0.1 F1.0 F1.1 B0.1 B0.0 W0.0 W0.1 F2.0 F2.1 B1.1 B1.0 B2.1 B2.0 F3.0 F3.1 "
        "W1.0 W2.0 B3.1 B3.0 W3.0 W1.1 W2.1 W3.1");
  REQUIRE(validate(s).ok());
  const simulation_result r = simulate(s, chunk_unit);
  REQUIRE(r.completed());
  CHECK(r.span(0) == Approx(24.0));
  CHECK(r.span(1) == Approx(24.0));
  CHECK(r.makespan == Approx(25.0));
  const memory_report mem = check_memory(s, memory_model::uniform(2.0, 0.0));
  REQUIRE(mem.lifetimes_ok());
  CHECK(mem.peak_memory(0) == Approx(4.0));
  CHECK(mem.peak_memory(1) == Approx(4.0));
}

TEST_CASE("zb-v order: warm-up is the paper's (2p-1-s chunk-0 and s chunk-1 forwards)",
          "[gen][zb-v]") {
  for (std::uint32_t p = 1; p <= 8; ++p) {
    const std::uint32_t m = 2 * p + 3;
    INFO("p=" << p);
    const auto lists = detail::zb_v_handcrafted_ops(p, m);
    for (stage_index st = 0; st < p; ++st) {
      INFO("stage " << st);
      // 2p-1 warm-up forwards: 2p-1-s of chunk 0 and s of chunk 1 ...
      std::uint32_t f[2] = {0, 0};
      for (std::size_t i = 0; i + 1 < 2 * std::size_t{p}; ++i) {
        REQUIRE(lists[st][i].kind == op_kind::forward);
        ++f[lists[st][i].chunk];
      }
      CHECK(f[0] == 2 * p - 1 - st);
      CHECK(f[1] == st);
      // ... then the first group's F, then the first B.
      CHECK(lists[st][2 * std::size_t{p} - 1].kind == op_kind::forward);
      CHECK(lists[st][2 * std::size_t{p}].kind == op_kind::backward_input);
    }
  }
}

TEST_CASE("zb-v order: zero bubble at unit costs once m >= 2p", "[gen][zb-v]") {
  for (std::uint32_t p = 1; p <= 12; ++p) {
    for (std::uint32_t m : {2 * p, 2 * p + 1, 3 * p, 4 * p, 5 * p + 3}) {
      INFO("p=" << p << " m=" << m);
      const schedule s = handcrafted(p, m);
      REQUIRE(validate(s).ok());
      const simulation_result r = simulate(s, chunk_unit);
      REQUIRE(r.completed());
      for (stage_index st = 0; st < p; ++st) {
        // 6m unit ops on every stage, no idle between its first and last op.
        CHECK(r.span(st) == Approx(6.0 * m));
      }
      CHECK(r.span(r.max_span_stage) == Approx(6.0 * m));
      // Stage s starts at s (its first F0 is s hops away), so the makespan is 6m + p - 1.
      CHECK(r.makespan == Approx(6.0 * m + p - 1));
    }
  }
}

TEST_CASE("zb-v order: valid and within 1F1B memory for every p, m", "[gen][zb-v][memory]") {
  for (std::uint32_t p = 1; p <= 12; ++p) {
    for (std::uint32_t m = 1; m <= 40; ++m) {
      INFO("p=" << p << " m=" << m);
      const schedule s = handcrafted(p, m);
      for (stage_index st = 0; st < p; ++st) {
        REQUIRE(s.ops(st).size() == std::size_t{6} * m);
      }
      REQUIRE(validate(s).ok());
      REQUIRE(simulate(s, chunk_unit).completed());
      // M_W = 0: at most 2p chunk activations (1F1B's peak) on every stage.
      const memory_report m0 = check_memory(s, memory_model::uniform(2.0, 0.0));
      REQUIRE(m0.lifetimes_ok());
      // The rule also holds memory within 2p for M_W up to M_B/2 (the library default).
      const memory_report m5 = check_memory(s, memory_model::uniform(2.0, 1.0));
      REQUIRE(m5.lifetimes_ok());
      for (stage_index st = 0; st < p; ++st) {
        CHECK(m0.peak_memory(st) <= 2.0 * p + 1e-9);
        CHECK(m5.peak_memory(st) <= 2.0 * p + 1e-9);
      }
    }
  }
}

namespace {
// The rule of zb_v_handcrafted_ops traced the direct way: every stage looked at in every step
// (p per step, so O(p·(m + p)) in all). The reference for the library's event-driven trace.
std::vector<std::vector<op>> scan_every_stage(std::uint32_t p, std::uint32_t m) {
  constexpr std::uint64_t never = ~std::uint64_t{0};
  // End step of F / B by [chunk][stage * m + mb].
  std::vector<std::uint64_t> f_end[2] = {std::vector<std::uint64_t>(std::size_t{p} * m, never),
                                         std::vector<std::uint64_t>(std::size_t{p} * m, never)};
  std::vector<std::uint64_t> b_end[2] = {f_end[0], f_end[0]};
  struct state {
    std::uint32_t f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
    std::uint64_t held = 0, pending = 0;
  };
  std::vector<state> st(p);
  std::vector<std::vector<op>> out(p);
  const auto at = [m](std::uint32_t s, std::uint32_t mb) { return std::size_t{s} * m + mb; };
  for (std::uint64_t t = 0, placed = 0; placed < 6 * std::uint64_t{p} * m; ++t) {
    for (std::uint32_t s = 0; s < p; ++s) {
      state& x = st[s];
      const auto done = [&](const std::vector<std::uint64_t>& v, std::size_t i) {
        return v[i] <= t;
      };
      const bool f1 = x.f[1] < m && (s + 1 == p ? done(f_end[0], at(s, x.f[1]))
                                                : done(f_end[1], at(s + 1, x.f[1])));
      const bool f0 = x.f[0] < m && (s == 0 || done(f_end[0], at(s - 1, x.f[0])));
      const bool b0 = x.b[0] < m && (s + 1 == p ? done(b_end[1], at(s, x.b[0]))
                                                : done(b_end[0], at(s + 1, x.b[0])));
      const bool b1 = x.b[1] < m &&
                      (s == 0 ? done(f_end[1], at(s, x.b[1])) : done(b_end[1], at(s - 1, x.b[1])));
      const bool w0 = x.w[0] < m && done(b_end[0], at(s, x.w[0]));
      const bool w1 = x.w[1] < m && done(b_end[1], at(s, x.w[1]));
      const std::uint64_t use = 2 * x.held + x.pending + 2;
      const std::uint64_t cap = 4 * std::uint64_t{p};
      const int c = use <= cap && f1       ? 1
                    : use + 2 <= cap && f0 ? 0
                    : b0                   ? 2
                    : b1                   ? 3
                    : w0                   ? 4
                    : w1                   ? 5
                                           : -1;
      if (c < 0) {
        continue;
      }
      const chunk_index ch = static_cast<chunk_index>(c == 1 || c == 3 || c == 5 ? 1 : 0);
      if (c <= 1) {
        out[s].push_back(make_op(op_kind::forward, x.f[ch], ch));
        f_end[ch][at(s, x.f[ch]++)] = t + 1;
        ++x.held;
      } else if (c <= 3) {
        out[s].push_back(make_op(op_kind::backward_input, x.b[ch], ch));
        b_end[ch][at(s, x.b[ch]++)] = t + 1;
        --x.held;
        ++x.pending;
      } else {
        out[s].push_back(make_op(op_kind::backward_weight, x.w[ch]++, ch));
        --x.pending;
      }
      ++placed;
    }
  }
  return out;
}
}  // namespace

TEST_CASE("zb-v order: the trace of the rule, looking only at stages that can change",
          "[gen][zb-v]") {
  for (std::uint32_t p = 1; p <= 16; ++p) {
    for (std::uint32_t m = 1; m <= 3 * p + 2; ++m) {
      INFO("p=" << p << " m=" << m);
      REQUIRE(detail::zb_v_handcrafted_ops(p, m) == scan_every_stage(p, m));
    }
  }
  CHECK(detail::zb_v_handcrafted_ops(100, 7) == scan_every_stage(100, 7));
}

TEST_CASE("zb-v order: work linear in the ops, also for m = 1 and large p",
          "[gen][zb-v][complexity]") {
  // Looking at every stage in every step would take p·(6m + 4p) stage visits, 1.1e9 for
  // p = 16384, m = 1 (98304 ops). At most 3 visits per op plus p for the first step.
  for (const auto& [p, m] : {std::pair{16384u, 1u}, std::pair{4096u, 3u}, std::pair{64u, 500u}}) {
    INFO("p=" << p << " m=" << m);
    std::uint64_t visits = 0;
    const auto lists = detail::zb_v_handcrafted_ops(p, m, &visits);
    std::uint64_t ops = 0;
    for (const auto& l : lists) {
      ops += l.size();
    }
    REQUIRE(ops == 6 * std::uint64_t{p} * m);
    CHECK(visits <= 3 * ops + p);
  }
}

TEST_CASE("zb-v order: bad arguments throw", "[gen][zb-v][errors]") {
  CHECK_THROWS_AS(detail::zb_v_handcrafted_ops(0, 4), pipesched::invalid_argument);
  CHECK_THROWS_WITH(detail::zb_v_handcrafted_ops(0, 4),
                    "zb_v_handcrafted_ops: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(detail::zb_v_handcrafted_ops(3, 0),
                    "zb_v_handcrafted_ops: microbatches (m=0) must be at least 1");
}
