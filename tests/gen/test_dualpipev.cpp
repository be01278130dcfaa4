// DualPipeV (gen/dualpipev.hpp): PyTorch's golden order for p = 4, m = 10, overlap marks
// included; the published rule for other p and m written a second way (explicit micro-batch
// numbers per phase, docs/model.md §6); validity; DeepSeek's published bubble at equal costs; the
// gain of T_FB < T_F + T_B; the rejection of m < 2p.
//
// tests/data/dualpipev_4rank_10mb.csv is a verbatim copy of PyTorch's
// test/distributed/pipelining/artifacts/dualpipev_4rank_10mb.csv (pytorch/pytorch, commit
// a2af973f46e7172e0494afebc88090d1a07eae66; BSD-style licence), the order PyTorch's own
// TestScheduleCsv checks ScheduleDualPipeV against: 4 ranks, 8 global stages, 10 micro-batches,
// compute actions only in list order (no SEND/RECV, no empty cells).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/dualpipev.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/io/torch_csv.hpp>

using namespace pipesched;

static_assert(schedule_generator<dualpipev>);

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The published rule with each op's micro-batch written out (docs/model.md §6, DualPipeV);
// stage s, d = p−s−1 stages below it, u = s+1, n = m−2p+s+1 steady steps. F0/F1, B0/B1 are
// chunk 0 / 1's F and backward; "F~" is an F overlapped with the backward after it.
schedule rule(std::uint32_t p, std::uint32_t m) {
  schedule out = schedule::on("rule", placement::v_shape(p), m);
  for (std::uint32_t s = 0; s < p; ++s) {
    auto& l = out.stage_ops(s);
    const std::uint32_t d = p - s - 1;
    const std::uint32_t u = s + 1;
    const std::uint32_t n = m - 2 * p + s + 1;
    const auto F = [&](chunk_index c, std::uint32_t mb) {
      l.push_back(make_op(op_kind::forward, mb, c));
    };
    const auto Fo = [&](chunk_index c, std::uint32_t mb) {
      l.push_back(overlapping_next(make_op(op_kind::forward, mb, c)));
    };
    const auto BW = [&](chunk_index c, std::uint32_t mb) {
      l.push_back(make_op(op_kind::backward_full, mb, c));
    };
    const auto B = [&](chunk_index c, std::uint32_t mb) {
      l.push_back(make_op(op_kind::backward_input, mb, c));
    };
    const auto Bs = [&](bool split, chunk_index c, std::uint32_t mb) {
      l.push_back(make_op(split ? op_kind::backward_input : op_kind::backward_full, mb, c));
    };
    const auto W = [&](chunk_index c, std::uint32_t mb) {
      l.push_back(make_op(op_kind::backward_weight, mb, c));
    };
    // 1, 2: F0 0 .. 2d−1; then u × (F0 2d+j, F1 j).
    for (std::uint32_t j = 0; j < 2 * d; ++j) {
      F(0, j);
    }
    for (std::uint32_t j = 0; j < u; ++j) {
      F(0, 2 * d + j);
      F(1, j);
    }
    // 3: d × (B1 j, W1 j, F1 u+j). F1 has now reached p.
    for (std::uint32_t j = 0; j < d; ++j) {
      B(1, j);
      W(1, j);
      F(1, u + j);
    }
    // 4: n × (F0 2p−u+j ~ BW1 d+j, F1 p+j ~ BW0 j); the last stage's first F0, BW1 plain.
    for (std::uint32_t j = 0; j < n; ++j) {
      if (j == 0 && s == p - 1) {
        F(0, 2 * p - u);
      } else {
        Fo(0, 2 * p - u + j);
      }
      BW(1, d + j);
      Fo(1, p + j);
      BW(0, j);
    }
    // 5: d × (BW1 d+n+j, F1 p+n+j ~ BW0 n+j). Every F is done; B1 has reached 2d+n = m−u,
    //    B0 has reached d+n = m−p.
    for (std::uint32_t j = 0; j < d; ++j) {
      BW(1, d + n + j);
      Fo(1, p + n + j);
      BW(0, n + j);
    }
    // 6: u × (backward 1 of m−u+j, backward 0 of m−p+j): BW before the switch at step u/2, B
    //    from it (an odd stage switches before that step's chunk-1 backward, an even one after).
    for (std::uint32_t j = 0; j < u; ++j) {
      const bool split1 = j > u / 2 || (j == u / 2 && s % 2 == 1);
      const bool split0 = j >= u / 2;
      Bs(split1, 1, m - u + j);
      Bs(split0, 0, m - p + j);
    }
    // The W of step 6's B, in order, then each W of step 7 after it: a FIFO of the split
    // backwards. 7: d × (W, B0 m−d+j); 8: the u W still pending.
    std::vector<op> pending;
    for (const op& o : l) {
      if (o.kind == op_kind::backward_input && !(o.chunk == 1 && o.mb < d)) {
        pending.push_back(make_op(op_kind::backward_weight, o.mb, o.chunk));
      }
    }
    std::size_t next = 0;
    for (std::uint32_t j = 0; j < d; ++j) {
      l.push_back(pending[next++]);
      B(0, m - d + j);
      pending.push_back(make_op(op_kind::backward_weight, m - d + j, 0));
    }
    while (next < pending.size()) {
      l.push_back(pending[next++]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("dualpipev: p=4 m=10 equals PyTorch's golden CSV, overlap marks included",
          "[gen][dualpipev]") {
  const std::string text = read_text(PIPESCHED_TEST_DATA_DIR "/dualpipev_4rank_10mb.csv");
  CHECK(text.find("SEND") == std::string::npos);  // compute only: no comm actions
  CHECK(text.find("RECV") == std::string::npos);
  const schedule golden = from_torch_csv(text, "dualpipev");
  REQUIRE(golden.layout() == placement::v_shape(4));
  REQUIRE(golden.microbatches() == 10);
  const schedule s = generate(dualpipev{}, 4, 10);
  REQUIRE(s.stages() == 4);
  for (stage_index r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const auto got = s.ops(r);
    const auto want = golden.ops(r);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("position " << i << ": " << to_string(got[i], true) << " flags " << int{got[i].flags}
                       << ", PyTorch " << to_string(want[i], true) << " flags "
                       << int{want[i].flags});
      CHECK(got[i] == want[i]);
    }
  }
  CHECK(s == golden);
  // Written back in list order, it is PyTorch's file byte for byte.
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order}) == text);
  // Stage s holds 2m−3p+s+1 overlapped pairs, the last stage one fewer: 9, 10, 11, 11.
  for (stage_index r = 0; r < 4; ++r) {
    std::size_t pairs = 0;
    for (const op& o : s.ops(r)) {
      pairs += overlaps_next(o) ? 1U : 0U;
    }
    CHECK(pairs == std::size_t{9} + std::min<std::size_t>(r, 2));
  }
}

TEST_CASE("dualpipev: p=2..8, m=2p..4p valid and equal to the published rule", "[gen][dualpipev]") {
  for (std::uint32_t p = 2; p <= 8; ++p) {
    for (std::uint32_t m = 2 * p; m <= 4 * p; ++m) {
      INFO("p=" << p << " m=" << m);
      const schedule s = generate(dualpipev{}, p, m);
      CHECK(s.chunks() == 2);
      CHECK(s.layout().kind() == placement_kind::v_shape);
      CHECK(s == rule(p, m));
      const validation_report rep = validate(s);
      INFO((rep.violations.empty() ? std::string() : rep.violations.front().message));
      CHECK(rep.ok());
      for (stage_index st = 0; st < p; ++st) {
        const auto ops = s.ops(st);
        REQUIRE(!ops.empty());
        CHECK(!overlaps_next(ops.back()));
        for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
          if (overlaps_next(ops[i])) {  // F of one chunk, then BW of the other
            CHECK(ops[i].kind == op_kind::forward);
            CHECK(ops[i + 1].kind == op_kind::backward_full);
            CHECK(ops[i + 1].chunk != ops[i].chunk);
            CHECK(!overlaps_next(ops[i + 1]));
          }
        }
      }
    }
  }
}

TEST_CASE("dualpipev: at T_F = T_B = T_W the bubble is DeepSeek's published (p-1)(F&B+B-3W)",
          "[gen][dualpipev]") {
  // DeepSeek's table, per chunk (a PP stage), B the full backward, F&B an F and a full B
  // overlapped (here no gain: T_FB unset). At per-stage costs 1, 1, 1 a chunk has F = B_input =
  // W = 1/2: (p-1)(3/2 + 1 - 3/2) = p-1, the longest span minus the largest busy time.
  for (std::uint32_t p = 2; p <= 8; ++p) {
    for (std::uint32_t m : {2 * p, 3 * p + 1, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const simulation_result r = simulate(generate(dualpipev{}, p, m), cost_model::unit());
      double span = 0.0;
      double busy = 0.0;
      for (const auto& st : r.stages) {
        span = std::max(span, st.span);
        busy = std::max(busy, st.busy);
      }
      CHECK(busy == Approx(3.0 * m));
      CHECK(span - busy == Approx(p - 1.0));
    }
  }
}

TEST_CASE("dualpipev: T_FB < T_F + T_B shortens the span", "[gen][dualpipev]") {
  // Per-stage costs 1, 1, 1; T_FB = 1.5 per stage, so each pair (per chunk: F 0.5 with a BW
  // 0.5 + 0.5) saves 0.25.
  const cost_model plain = cost_model::unit();
  cost_model overlapped = cost_model::unit();
  overlapped.set_overlapped(1.5);
  for (auto [p, m] : {std::pair{2U, 4U}, {4U, 10U}, {4U, 16U}, {8U, 16U}, {8U, 32U}}) {
    INFO("p=" << p << " m=" << m);
    const schedule s = generate(dualpipev{}, p, m);
    const simulation_result r0 = simulate(s, plain);
    const simulation_result r1 = simulate(s, overlapped);
    std::size_t most_pairs = 0;
    for (stage_index st = 0; st < p; ++st) {
      std::size_t pairs = 0;
      for (const op& o : s.ops(st)) {
        pairs += overlaps_next(o) ? 1U : 0U;
      }
      most_pairs = std::max(most_pairs, pairs);
      // Each pair is one slot, 0.25 shorter than its two ops one after the other.
      CHECK(r1.stages[st].busy == Approx(r0.stages[st].busy - 0.25 * static_cast<double>(pairs)));
    }
    // The span gains at least what the busiest stage's pairs save (more: the pairs on the
    // critical path of the other stages shorten it too).
    CHECK(r1.makespan <= r0.makespan - 0.25 * static_cast<double>(most_pairs));
  }
  // p = 4, m = 10: 33 without the gain (ZB-V 31.5, 1F1B 39), 29.5 with it.
  CHECK(simulate(generate(dualpipev{}, 4, 10), plain).makespan == Approx(33.0));
  CHECK(simulate(generate(dualpipev{}, 4, 10), overlapped).makespan == Approx(29.5));
  CHECK(simulate(generate(one_f_one_b{}, 4, 10), overlapped).makespan == Approx(39.0));
}

TEST_CASE("dualpipev: p=1 and large shapes", "[gen][dualpipev]") {
  CHECK(validate(generate(dualpipev{}, 1, 2)).ok());
  CHECK(validate(generate(dualpipev{}, 1, 7)).ok());
  const schedule big = generate(dualpipev{}, 16, 64);
  CHECK(validate(big).ok());
  CHECK(big == rule(16, 64));
}

TEST_CASE("dualpipev: m < 2p and v != 2 are rejected, naming the field and the rule",
          "[gen][dualpipev]") {
  CHECK_THROWS_WITH(generate(dualpipev{}, 4, 7),
                    "dualpipev: microbatches (m=7) must be at least 2*stages (2p=8), as in "
                    "PyTorch's ScheduleDualPipeV");
  CHECK_THROWS_AS(generate(dualpipev{}, 4, 8, 3), invalid_argument);
  CHECK_NOTHROW(generate(dualpipev{}, 4, 8));
}
