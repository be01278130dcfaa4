// Tests of pipesched/exec/mpi.hpp, run by ctest under mpiexec with 1 to 4 ranks. Every rank runs
// the same sequence (the collective calls must match); each check failure prints
// "FAIL rank r: ..." and the job exits non-zero. With --inject-failure S:I, stage S's executor
// throws at op I instead, to test the abort path.
//   mpirun -np 4 mpi_test_run

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <mpi.h>

#include <pipesched/exec/mpi.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/ir/placement.hpp>
#include <pipesched/ir/schedule.hpp>
#include <pipesched/transform/comm_lowering.hpp>

namespace {

using namespace pipesched;

int g_rank = 0;
int g_size = 1;
int g_checks = 0;
int g_failures = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::printf("FAIL rank %d: %s\n", g_rank, what.c_str());
    std::fflush(stdout);
  }
}

// Concepts: positive and negative cases.
struct pod {
  int a;
  double b;
};
static_assert(mpi_message<std::vector<double>>);
static_assert(mpi_message<pod>);
static_assert(mpi_message<null_executor::message>);
static_assert(!mpi_message<std::string>);
static_assert(!mpi_message<std::vector<std::string>>);
static_assert(transport<mpi_transport<std::vector<double>>, std::vector<double>>);
static_assert(!transport<mpi_transport<std::vector<double>>, std::vector<float>>);

/// A message records the path it took: [mb, chunk ids...]. F on global chunk g appends g;
/// B/BW on chunk g appends 1000 + g. Every op checks its input is exactly the expected path,
/// so a message delivered to the wrong op, or a wrong payload, fails the run.
class path_executor {
 public:
  using message = std::vector<double>;

  path_executor(const schedule& sched, stage_index me, int fail_stage, std::size_t fail_op)
      : sched_(&sched), me_(me), fail_stage_(fail_stage), fail_op_(fail_op) {}

  message run(stage_index s, const op& o, message&& in) {
    if (s != me_) {
      throw std::logic_error("run() for stage " + std::to_string(s) + " on rank of stage " +
                             std::to_string(me_));
    }
    if (fail_stage_ == static_cast<int>(s) && calls_ == fail_op_) {
      throw std::runtime_error("injected failure");
    }
    ++calls_;
    const placement& pl = sched_->layout();
    const global_chunk g = pl.global(s, o.chunk);
    const double j = o.mb;
    switch (o.kind) {
      case op_kind::forward: {
        message want{j};
        const global_chunk first = pl.route_of_chunk(g) * pl.route_length();  // g's route
        for (global_chunk c = first; c < g; ++c) {
          want.push_back(c);
        }
        expect(in, pl.is_first(g) ? message{} : want, o);
        want.push_back(g);
        ++forwards_;
        return want;
      }
      case op_kind::backward_input:
      case op_kind::backward_full: {
        message want{j};
        const global_chunk end = (pl.route_of_chunk(g) + 1) * pl.route_length();
        for (global_chunk c = end; c-- > g + 1;) {
          want.push_back(1000.0 + c);
        }
        expect(in, pl.is_last(g) ? message{} : want, o);
        if (pl.is_last(g)) {
          want = {j};
        }
        want.push_back(1000.0 + g);
        ++backwards_;
        if (o.kind == op_kind::backward_input) {
          pending_w_.insert({g, o.mb});
        } else {
          ++weights_;
        }
        return want;
      }
      case op_kind::backward_weight:
        if (pending_w_.erase({g, o.mb}) != 1) {
          throw std::logic_error("W before its B");
        }
        ++weights_;
        return {};
      default:
        ++comms_;
        return std::move(in);
    }
  }

  std::size_t forwards_ = 0;
  std::size_t backwards_ = 0;
  std::size_t weights_ = 0;
  std::size_t comms_ = 0;

 private:
  void expect(const message& got, const message& want, const op& o) const {
    if (got != want) {
      std::string s = "wrong input for " + to_string(o, true) + ": got [";
      for (double x : got) {
        s += std::to_string(x) + " ";
      }
      throw std::logic_error(s + "]");
    }
  }

  const schedule* sched_;
  stage_index me_;
  int fail_stage_;
  std::size_t fail_op_;
  std::size_t calls_ = 0;
  std::set<std::pair<global_chunk, microbatch_index>> pending_w_;
};

/// The context form in front of path_executor: records the op_context run_mpi hands over.
struct context_recorder {
  using message = path_executor::message;
  path_executor* inner;
  std::vector<op_context> seen;

  message run(const op_context& c, message&& in) {
    seen.push_back(c);
    return inner->run(c.stage, c.o, std::move(in));
  }
};
static_assert(executor<context_recorder>);

/// "" when `seen` holds the contexts of stage `me`'s list in `ran`, from the placement.
std::string context_mismatch(const schedule& ran,
                             stage_index me,
                             const std::vector<op_context>& seen) {
  const placement& pl = ran.layout();
  const auto list = ran.ops(me);
  if (seen.size() != list.size()) {
    return std::to_string(seen.size()) + " contexts for " + std::to_string(list.size()) + " ops";
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const op_context& c = seen[i];
    const global_chunk g = pl.global(me, list[i].chunk);
    if (!(c.stage == me && c.index == i && c.o == list[i] && c.chunk == g &&
          c.first_chunk == pl.is_first(g) && c.last_chunk == pl.is_last(g) &&
          c.microbatches == ran.microbatches())) {
      return "op " + std::to_string(i) + " (" + to_string(list[i], true) + "): wrong context";
    }
  }
  return "";
}

void test_tags() {
  check(mpi_tag(message_key{3, 5, direction::backward}, 8) == 59, "tag 2*(3*8+5)+1 = 59");
  check(mpi_tag(message_key{0, 0, direction::forward}, 8) == 0, "tag of the first key is 0");
  const schedule s = schedule::on("t", placement::loop(4, 2), 8);
  check(mpi_tag_count(s) == 128, "tag count 2*p*v*m = 128");
  std::set<std::uint64_t> seen;
  for (global_chunk g = 0; g < 8; ++g) {
    for (microbatch_index j = 0; j < 8; ++j) {
      for (direction d : {direction::forward, direction::backward}) {
        seen.insert(mpi_tag(message_key{g, j, d}, 8));
      }
    }
  }
  check(seen.size() == 128 && *seen.rbegin() == 127, "tags are a bijection onto 0..127");
  // 2 * p * 128 * 2^24 - 1 >= 2^32 - 1 > MPI_TAG_UB (at most INT_MAX = 2^31 - 1).
  const schedule huge = schedule::on(
      "huge", placement::loop(static_cast<std::uint32_t>(g_size), 128), std::uint32_t{1} << 24);
  bool threw = false;
  try {
    mpi_transport<std::vector<double>> t(MPI_COMM_WORLD, huge);
  } catch (const invalid_argument& e) {
    threw = std::string(e.what()).find("MPI_TAG_UB") != std::string::npos;
  }
  check(threw, "tags beyond MPI_TAG_UB are refused with a message naming MPI_TAG_UB");
}

void test_codec() {
  std::vector<std::byte> bytes;
  const std::vector<double> v{1.5, -2.0, 3.25};
  mpi_codec<std::vector<double>>::encode(v, bytes);
  check(bytes.size() == 24, "vector<double> encodes to 8 bytes per element");
  check(mpi_codec<std::vector<double>>::decode(bytes) == v, "vector<double> round trip");
  mpi_codec<std::vector<double>>::encode({}, bytes);
  check(bytes.empty() && mpi_codec<std::vector<double>>::decode(bytes).empty(),
        "empty vector round trip");
  mpi_codec<pod>::encode(pod{7, 0.5}, bytes);
  const pod p = mpi_codec<pod>::decode(bytes);
  check(p.a == 7 && p.b == 0.5, "trivially copyable round trip");
  bool threw = false;
  try {
    const std::array<std::byte, 5> five{};
    (void)mpi_codec<std::vector<double>>::decode(five);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  check(threw, "decoding 5 bytes as doubles throws");
}

void test_transport() {
  if (g_size < 2) {
    return;
  }
  const schedule s =
      schedule::on("t", placement::sequential(static_cast<std::uint32_t>(g_size)), 4);
  const message_key a{1, 0, direction::forward};
  const message_key b{0, 3, direction::backward};
  std::vector<double> big(1 << 17);  // 1 MiB: Open MPI's rendezvous protocol, not eager
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<double>(i) * 0.5;
  }
  {
    // Buffered: sent a then b, received b then a.
    mpi_transport<std::vector<double>> t(MPI_COMM_WORLD, s, mpi_send_mode::buffered);
    if (g_rank == 0) {
      t.send(1, a, std::vector<double>{42.0});
      t.send(1, b, std::vector<double>(big));
      check(t.in_flight() <= 2, "at most two sends in flight");
      t.flush();
      check(t.in_flight() == 0, "flush completes every send");
    } else if (g_rank == 1) {
      check(t.receive(0, b) == big, "1 MiB message received first, intact");
      check(t.receive(0, a) == std::vector<double>{42.0}, "small message received second");
    }
  }
  {
    mpi_transport<std::vector<double>> t(MPI_COMM_WORLD, s, mpi_send_mode::synchronous);
    if (g_rank == 1) {
      t.send(0, a, std::vector<double>(big));
    } else if (g_rank == 0) {
      check(t.receive(1, a) == big, "synchronous send of 1 MiB");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Runs `sched` on every rank and checks the work done and the gathered timings; with
/// `context_form`, through context_recorder, checking the op_context of every op too.
void run_and_check(const schedule& sched,
                   const mpi_options& opts,
                   const std::string& label,
                   bool context_form) {
  const stage_index me = static_cast<stage_index>(g_rank);
  path_executor e(sched, me, -1, 0);
  context_recorder rec{&e, {}};
  const mpi_run_result r = context_form ? run_mpi(rec, sched, opts) : run_mpi(e, sched, opts);
  if (context_form) {
    const std::string bad = context_mismatch(r.ran, me, rec.seen);
    check(bad.empty(), label + ": op_context of every op: " + bad);
  }
  const placement& pl = sched.layout();
  const std::size_t m = sched.microbatches() / pl.routes();  // on each of this stage's chunks
  const std::size_t v = sched.chunks();
  check(e.forwards_ == v * m, label + ": every F of this stage ran");
  check(e.backwards_ == v * m, label + ": every B/BW of this stage ran");
  check(e.weights_ == v * m, label + ": every weight gradient of this stage ran");
  check(r.ran.has_comm() == (opts.lower || sched.has_comm()) || pl.stages() == 1,
        label + ": ran the lowered schedule when asked to");
  std::size_t local_comm = 0;
  for (const op& o : r.ran.ops(me)) {
    local_comm += is_comm(o.kind) ? 1u : 0u;
  }
  check(e.comms_ == local_comm, label + ": every SEND/RECV of this stage ran");
  if (g_rank != opts.root) {
    check(r.timings.size() == r.ran.ops(me).size(), label + ": non-root keeps its own timings");
    return;
  }
  check(r.timings.size() == r.ran.size(), label + ": root gathered one timing per op");
  std::map<std::pair<stage_index, std::size_t>, const timed_op*> by_pos;
  bool ok = true;
  for (const timed_op& t : r.timings) {
    ok = ok && t.stage < r.ran.stages() && t.index < r.ran.ops(t.stage).size() &&
         r.ran.ops(t.stage)[t.index] == t.o && t.end >= t.start && t.start >= 0.0;
    ok = ok && by_pos.emplace(std::pair{t.stage, t.index}, &t).second;
  }
  check(ok, label + ": every timing names a distinct op of the schedule, end >= start >= 0");
  bool ordered = true;
  for (auto it = by_pos.begin(); it != by_pos.end(); ++it) {
    auto next = std::next(it);
    if (next != by_pos.end() && next->first.first == it->first.first) {
      ordered = ordered && next->second->start >= it->second->end;
    }
  }
  check(ordered, label + ": each stage's ops ran one after another in list order");
}

void test_registry_runs() {
  const auto p = static_cast<std::uint32_t>(g_size);
  int ran = 0;
  for (const generator_entry& entry : default_registry().entries()) {
    for (std::uint32_t m : {p, 2 * p + 1, 1u}) {
      generator_params params;
      params.stages = p;
      params.microbatches = m;
      params.chunks = entry.default_chunks;
      schedule sched;
      try {
        sched = entry.generate(params);
      } catch (const invalid_argument&) {
        continue;  // e.g. interleaving needs m to be a multiple of p: the same on every rank
      }
      const std::string label = entry.name + " p=" + std::to_string(p) + " m=" + std::to_string(m);
      mpi_options eager;
      run_and_check(sched, eager, label + " eager", true);
      mpi_options late;
      late.lowering.receives = receive_placement::late;
      late.root = g_size - 1;
      run_and_check(lower_communication(sched, late.lowering), late, label + " late, pre-lowered",
                    true);
      mpi_options buffered;
      buffered.lower = false;
      run_and_check(sched, buffered, label + " compute-only, buffered sends", false);
      ++ran;
    }
  }
  check(ran >= 6, "ran every registered schedule (" + std::to_string(ran) + " runs)");
}

void test_invalid_input() {
  const auto p = static_cast<std::uint32_t>(g_size);
  const schedule wrong = generate(one_f_one_b{}, p + 1, 2);
  null_executor e;
  bool threw = false;
  try {
    (void)run_mpi(e, wrong);
  } catch (const invalid_argument& ex) {
    threw = std::string(ex.what()).find("communicator size") != std::string::npos;
  }
  check(threw, "a schedule for p+1 stages is refused on every rank");

  schedule broken = generate(one_f_one_b{}, p, 2);
  broken.stage_ops(p - 1).pop_back();  // a missing BW
  threw = false;
  try {
    (void)run_mpi(e, broken);
  } catch (const invalid_argument&) {
    threw = true;
  }
  check(threw, "an invalid schedule is refused on every rank");
  mpi_options bad_root;
  bad_root.root = g_size;
  threw = false;
  try {
    (void)run_mpi(e, generate(one_f_one_b{}, p, 2), bad_root);
  } catch (const invalid_argument&) {
    threw = true;
  }
  check(threw, "root outside the communicator is refused");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc == 3 && std::string(argv[1]) == "--inject-failure") {
    // Stage S fails at op I of 1F1B, m = 4: the job must abort, naming rank, stage and op.
    const std::string spec = argv[2];
    const int stage = std::stoi(spec.substr(0, spec.find(':')));
    const std::size_t index = std::stoul(spec.substr(spec.find(':') + 1));
    const schedule sched = generate(one_f_one_b{}, static_cast<std::uint32_t>(g_size), 4);
    path_executor e(sched, static_cast<stage_index>(g_rank), stage, index);
    (void)run_mpi(e, sched);
    std::printf("rank %d: the run did not abort\n", g_rank);
    MPI_Finalize();
    return 1;
  }
  try {
    test_tags();
    test_codec();
    test_transport();
    test_registry_runs();
    test_invalid_input();
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    if (failures == 0) {
      std::printf("mpi tests: %d ranks, %d checks on rank 0, all passed\n", g_size, g_checks);
    } else {
      std::printf("mpi tests: %d FAILED checks over %d ranks\n", failures, g_size);
    }
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
