#pragma once

// Distributed execution on MPI: one rank per pipeline stage, activations and gradients moved
// with MPI point-to-point calls. Optional: nothing else in pipesched includes this header, and
// it is the only one that includes <mpi.h> (link MPI::MPI_CXX, or build with mpicxx).
//
//   MPI_Init(&argc, &argv);
//   schedule sched = lower_communication(zb_h1{}.generate(params));  // same on every rank
//   my_model model(...);                      // an executor whose message has an mpi_codec
//   mpi_run_result r = run_mpi(model, sched); // rank s runs stage s's list
//   // rank 0: r.timings holds every op of every stage (seconds since a common start)
//   MPI_Finalize();

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include "pipesched/exec/dynamic_driver.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/run_stage.hpp"
#include "pipesched/exec/transport.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/transform/comm_lowering.hpp"

namespace pipesched {

// ---------------------------------------------------------------------------------------------
// Serialisation

/// mpi_codec<M>: how an executor's message crosses ranks, as bytes.
/// A specialisation for M provides, for a `const M& msg`, a `std::vector<std::byte>& out` and
/// a `std::span<const std::byte> bytes`:
///   mpi_codec<M>::encode(msg, out)     replace out's contents by msg's bytes
///   mpi_codec<M>::decode(bytes) -> M   the message back; throw when the bytes can't be one
/// Provided: every trivially copyable M (its object representation) and std::vector<T> of a
/// trivially copyable T (the elements, back to back; the length follows from the size).
/// Specialise it for your own message type in namespace pipesched, e.g. a matrix as
/// [rows, cols, values...]; see examples/mlp_pipeline_mpi.
template <class M>
struct mpi_codec {};

template <class M>
  requires std::is_trivially_copyable_v<M>
struct mpi_codec<M> {
  static void encode(const M& msg, std::vector<std::byte>& out) {
    out.resize(sizeof(M));
    std::memcpy(out.data(), &msg, sizeof(M));
  }
  static M decode(std::span<const std::byte> bytes) {
    if (bytes.size() != sizeof(M)) {
      throw std::runtime_error("mpi_codec: received " + std::to_string(bytes.size()) +
                               " bytes for a message of " + std::to_string(sizeof(M)));
    }
    M msg;
    std::memcpy(&msg, bytes.data(), sizeof(M));
    return msg;
  }
};

template <class T>
  requires std::is_trivially_copyable_v<T>
struct mpi_codec<std::vector<T>> {
  static void encode(const std::vector<T>& msg, std::vector<std::byte>& out) {
    out.resize(msg.size() * sizeof(T));
    if (!msg.empty()) {
      std::memcpy(out.data(), msg.data(), out.size());
    }
  }
  static std::vector<T> decode(std::span<const std::byte> bytes) {
    if (bytes.size() % sizeof(T) != 0) {
      throw std::runtime_error("mpi_codec: received " + std::to_string(bytes.size()) +
                               " bytes, not a whole number of " + std::to_string(sizeof(T)) +
                               "-byte elements");
    }
    std::vector<T> msg(bytes.size() / sizeof(T));
    if (!msg.empty()) {
      std::memcpy(msg.data(), bytes.data(), bytes.size());
    }
    return msg;
  }
};

/// mpi_message: a message type with a usable mpi_codec (see above).
///   static_assert(mpi_message<std::vector<double>>);   static_assert(!mpi_message<std::string>);
template <class M>
concept mpi_message = requires(const M& msg,
                               std::vector<std::byte>& out,
                               std::span<const std::byte> bytes) {
  mpi_codec<M>::encode(msg, out);
  { mpi_codec<M>::decode(bytes) } -> std::same_as<M>;
};

// ---------------------------------------------------------------------------------------------
// Tags

/// The MPI tag of a message: `2 * (chunk * m + mb) + d`, with chunk the key's global chunk
/// (the consumer's), m the schedule's micro-batch count, mb the key's micro-batch and d = 0
/// for an activation (forward), 1 for a gradient (backward). A bijection between the keys of
/// a run and 0 .. mpi_tag_count(sched) - 1, so a receive matches exactly one send by (source
/// rank, tag) in any arrival order. Returned as 64 bits: compare with MPI_TAG_UB before use
/// (mpi_transport does).
constexpr std::uint64_t mpi_tag(const message_key& k, std::uint32_t microbatches) noexcept {
  return 2 * (std::uint64_t{k.chunk} * microbatches + k.mb) +
         (k.dir == direction::backward ? 1u : 0u);
}

/// How many tags a run of `sched` uses: 2 * stages * chunks * microbatches (the largest tag
/// is one less).
inline std::uint64_t mpi_tag_count(const schedule& sched) noexcept {
  return 2 * std::uint64_t{sched.layout().total_chunks()} * sched.microbatches();
}

/// Thrown by mpi_transport when an MPI call returns an error (the communicator must have
/// MPI_ERRORS_RETURN for that; run_mpi sets it on its private communicator).
class mpi_error : public std::runtime_error {
 public:
  mpi_error(const char* call, int code) : std::runtime_error(message(call, code)), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  static std::string message(const char* call, int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
      return std::string(call) + " failed with MPI error " + std::to_string(code);
    }
    return std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(len));
  }
  int code_;
};

namespace detail {

inline void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw mpi_error(call, rc);
  }
}

/// MPI_TAG_UB of this MPI library (at least 32767 by the standard).
inline std::uint64_t mpi_tag_upper_bound() {
  void* value = nullptr;
  int flag = 0;
  mpi_check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag), "MPI_Comm_get_attr");
  if (flag == 0 || value == nullptr) {
    return 32767;
  }
  return static_cast<std::uint64_t>(*static_cast<int*>(value));
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Transport

/// How mpi_transport::send hands a message to MPI.
enum class mpi_send_mode : std::uint8_t {
  /// MPI_Ssend: returns only once the peer has started the matching receive (a rendezvous).
  /// The semantics lower_communication() proves deadlock-free: use it for lowered schedules,
  /// whose SEND_* ops then block exactly like the lowering assumes.
  synchronous,
  /// MPI_Isend, completed later (flush(), or the destructor): send() never waits for the
  /// peer, as the transport concept requires. Needed for compute-only schedules, where F and
  /// B send their outputs directly and a blocking send could deadlock.
  buffered,
};

/// transport<mpi_transport<M>, M> over an MPI communicator: stage s is rank s. Messages are
/// serialised with mpi_codec<M> and tagged with mpi_tag(key, m); receive() takes the one
/// message of (peer, tag) whatever else has arrived (MPI_Mprobe + MPI_Mrecv on its size).
/// Throws invalid_argument at construction when mpi_tag_count(sched) - 1 exceeds MPI_TAG_UB,
/// and mpi_error when an MPI call fails (if the communicator returns errors). Not thread-safe:
/// one per rank, used by one thread. In synchronous mode send() blocks until the peer
/// receives, which the transport concept otherwise forbids; see mpi_send_mode.
template <mpi_message M>
class mpi_transport {
 public:
  mpi_transport(MPI_Comm comm,
                const schedule& sched,
                mpi_send_mode mode = mpi_send_mode::synchronous)
      : comm_(comm), microbatches_(sched.microbatches()), mode_(mode) {
    const std::uint64_t count = mpi_tag_count(sched);
    const std::uint64_t ub = detail::mpi_tag_upper_bound();
    if (count - 1 > ub) {
      detail::fail("mpi_transport: schedule \"", sched.name(), "\" needs tags up to ", count - 1,
                   " = 2*stages*chunks*microbatches - 1 (p=", sched.stages(),
                   ", v=", sched.chunks(), ", m=", sched.microbatches(),
                   "), more than this MPI's MPI_TAG_UB (", ub, ")");
    }
  }
  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;
  /// Waits for buffered sends still in flight (call flush() first to see their errors).
  ~mpi_transport() {
    for (pending& p : pending_) {
      MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    }
  }

  void send(stage_index peer, const message_key& k, M&& msg) {
    std::vector<std::byte> bytes;
    mpi_codec<M>::encode(msg, bytes);
    const int count = byte_count(bytes.size());
    if (mode_ == mpi_send_mode::synchronous) {
      detail::mpi_check(MPI_Ssend(bytes.data(), count, MPI_BYTE, rank_of(peer), tag_of(k), comm_),
                        "MPI_Ssend");
      return;
    }
    reap();
    pending_.push_back({std::move(bytes), MPI_REQUEST_NULL});
    pending& p = pending_.back();  // the byte buffer stays put when the vector moves
    detail::mpi_check(
        MPI_Isend(p.bytes.data(), count, MPI_BYTE, rank_of(peer), tag_of(k), comm_, &p.request),
        "MPI_Isend");
  }

  M receive(stage_index peer, const message_key& k) {
    MPI_Message handle = MPI_MESSAGE_NULL;
    MPI_Status status;
    detail::mpi_check(MPI_Mprobe(rank_of(peer), tag_of(k), comm_, &handle, &status), "MPI_Mprobe");
    int count = 0;
    detail::mpi_check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    std::vector<std::byte> bytes(static_cast<std::size_t>(count));
    detail::mpi_check(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &handle, MPI_STATUS_IGNORE),
                      "MPI_Mrecv");
    return mpi_codec<M>::decode(bytes);
  }

  /// Whether the message of (peer, k) has arrived, without receiving it (MPI_Iprobe; drives
  /// MPI's progress, so buffered sends move on too).
  bool arrived(stage_index peer, const message_key& k) {
    int flag = 0;
    detail::mpi_check(MPI_Iprobe(rank_of(peer), tag_of(k), comm_, &flag, MPI_STATUS_IGNORE),
                      "MPI_Iprobe");
    return flag != 0;
  }

  /// Completes every buffered send (a no-op in synchronous mode).
  void flush() {
    while (!pending_.empty()) {
      pending& p = pending_.back();
      detail::mpi_check(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "MPI_Wait");
      pending_.pop_back();
    }
  }

  mpi_send_mode mode() const noexcept { return mode_; }
  /// Buffered sends not known to be complete.
  std::size_t in_flight() const noexcept { return pending_.size(); }

 private:
  struct pending {
    std::vector<std::byte> bytes;
    MPI_Request request;
  };

  int tag_of(const message_key& k) const { return static_cast<int>(mpi_tag(k, microbatches_)); }
  static int rank_of(stage_index s) { return static_cast<int>(s); }
  static int byte_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw std::length_error("mpi_transport: message of " + std::to_string(n) +
                              " bytes is larger than INT_MAX");
    }
    return static_cast<int>(n);
  }
  // Frees the buffers of completed sends, so memory stays bounded by what is in flight.
  void reap() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      int done = 0;
      detail::mpi_check(MPI_Test(&pending_[i].request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done == 0) {
        if (kept != i) {
          pending_[kept] = std::move(pending_[i]);
        }
        ++kept;
      }
    }
    pending_.resize(kept);
  }

  MPI_Comm comm_;
  std::uint32_t microbatches_;
  mpi_send_mode mode_;
  std::vector<pending> pending_;
};

// ---------------------------------------------------------------------------------------------
// Driver

/// Options of run_mpi().
struct mpi_options {
  /// The ranks: rank s runs stage s; its size must equal the schedule's stages. run_mpi works
  /// on a private duplicate, so its messages never mix with the caller's.
  MPI_Comm comm = MPI_COMM_WORLD;
  /// A compute-only schedule is first lowered with lower_communication(sched, lowering) and
  /// run with synchronous sends. When false it runs as given, its F and B ops sending their
  /// outputs with buffered sends. A schedule that already has SEND/RECV ops always runs as
  /// given, with synchronous sends.
  bool lower = true;
  lowering_options lowering{};
  /// Validate the schedule first (on every rank: an invalid one throws the same
  /// invalid_argument / deadlock_error everywhere instead of hanging).
  bool validate = true;
  /// Collect every rank's per-op timings on rank `root` (MPI_Gatherv).
  bool gather_timings = true;
  int root = 0;
  /// When an op (or a transfer) fails on a rank: print "pipesched run_mpi: rank r, stage s,
  /// op i (B3): what" to stderr and MPI_Abort the job (the default: the other ranks would
  /// otherwise wait forever for that rank's messages). When false the execution_error is
  /// rethrown on the failing rank only; the caller must then end the job itself.
  bool abort_on_error = true;
  /// run_mpi_dynamic: how long a rank that has no op it may run sleeps between two MPI_Iprobe
  /// polls for its inputs (a blocking probe would spin on the core its peers need).
  double idle_poll_seconds = 50e-6;
};

/// What run_mpi() returns on each rank.
struct mpi_run_result {
  /// The schedule every rank ran: the input, or its lowering (see mpi_options::lower).
  schedule ran;
  /// Per-op wall-clock intervals, in seconds since a start synchronised by MPI_Barrier (each
  /// rank's MPI_Wtime after the barrier is its time 0). Each SEND/RECV interval includes the
  /// wait for the peer. On `root` with gather_timings: every op of every stage, by stage then
  /// list position; on every other rank (or without gathering) this rank's own ops.
  std::vector<timed_op> timings;
  /// This rank's time from the synchronised start to the end of its last op.
  double elapsed = 0.0;
};

namespace detail {

/// Owns a duplicate of a communicator that returns errors instead of aborting.
class mpi_comm_dup {
 public:
  explicit mpi_comm_dup(MPI_Comm parent) {
    mpi_check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  mpi_comm_dup(const mpi_comm_dup&) = delete;
  mpi_comm_dup& operator=(const mpi_comm_dup&) = delete;
  ~mpi_comm_dup() { MPI_Comm_free(&comm_); }
  MPI_Comm get() const noexcept { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// Seven doubles per op: index, kind, local chunk, mb, flags, start, end (the flags too, so a
/// gathered op equals the schedule's: an overlapped pair's first op). Exact for indices < 2^53.
inline constexpr int timing_fields = 7;

inline std::vector<timed_op> gather_timings(MPI_Comm comm,
                                            int root,
                                            const std::vector<timed_op>& mine) {
  int rank = 0;
  int size = 0;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<double> packed;
  packed.reserve(mine.size() * timing_fields);
  for (const timed_op& t : mine) {
    packed.insert(packed.end(), {static_cast<double>(t.index), static_cast<double>(t.o.kind),
                                 static_cast<double>(t.o.chunk), static_cast<double>(t.o.mb),
                                 static_cast<double>(t.o.flags), t.start, t.end});
  }
  if (packed.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::length_error("run_mpi: too many timings to gather");
  }
  int count = static_cast<int>(packed.size());
  std::vector<int> counts(rank == root ? static_cast<std::size_t>(size) : 0);
  mpi_check(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm), "MPI_Gather");
  std::vector<int> displs(counts.size(), 0);
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (total > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw std::length_error("run_mpi: too many timings to gather");
    }
    displs[r] = static_cast<int>(total);
    total += static_cast<std::size_t>(counts[r]);
  }
  std::vector<double> all(total);
  mpi_check(MPI_Gatherv(packed.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                        MPI_DOUBLE, root, comm),
            "MPI_Gatherv");
  std::vector<timed_op> out;
  if (rank != root) {
    return out;
  }
  out.reserve(total / timing_fields);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    const std::size_t begin = static_cast<std::size_t>(displs[r]);
    const std::size_t end = begin + static_cast<std::size_t>(counts[r]);
    for (std::size_t i = begin; i + timing_fields <= end; i += timing_fields) {
      timed_op t;
      t.stage = static_cast<stage_index>(r);
      t.index = static_cast<std::uint32_t>(all[i]);
      t.o =
          make_op(static_cast<op_kind>(static_cast<int>(all[i + 1])),
                  static_cast<microbatch_index>(all[i + 3]), static_cast<chunk_index>(all[i + 2]));
      t.o.flags = static_cast<std::uint8_t>(all[i + 4]);
      t.start = all[i + 5];
      t.end = all[i + 6];
      out.push_back(t);
    }
  }
  return out;
}

/// In a catch block for `err`: with opts.abort_on_error, says it on stderr and aborts the job
/// (the other ranks would wait for this one forever); else rethrows it. `who`: the driver.
[[noreturn]] inline void abort_or_rethrow(const mpi_options& opts,
                                          int rank,
                                          const char* who,
                                          const execution_error& err) {
  if (!opts.abort_on_error) {
    throw;
  }
  std::fprintf(stderr, "pipesched %s: rank %d, %s\n", who, rank, err.what());
  std::fflush(stderr);
  MPI_Abort(opts.comm, 1);
  throw;  // MPI_Abort does not return on a working MPI
}

}  // namespace detail

/// Runs one stage of `sched` on each rank of opts.comm: rank s executes stage s's op list in
/// order (several chunks per rank for multi-chunk schedules), calling e.run() for every op
/// like run_stage() does, and moves activations and gradients with MPI point-to-point calls:
/// SEND_* ops with MPI_Ssend, RECV_* ops with a matched receive (mpi_transport; tags from
/// mpi_tag()). A collective call: every rank of opts.comm calls it with the same schedule and
/// options; each rank's executor computes only its own stage's ops.
///
/// Throws (on every rank alike, before any op runs): invalid_argument when the communicator's
/// size differs from the schedule's stages, when the tags don't fit MPI_TAG_UB, or when the
/// schedule is invalid (deadlock_error when it cannot run to the end). An op or transfer that
/// fails on one rank aborts the whole job (see mpi_options::abort_on_error).
template <class E>
mpi_run_result run_mpi(E& e, const schedule& sched, const mpi_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  // Only a model of executor gets further (see run_serial).
  if constexpr (executor<E>) {
    static_assert(
        mpi_message<typename E::message>,
        "pipesched run_mpi: E::message needs an mpi_codec (trivially copyable, "
        "std::vector of trivially copyable, or a specialisation of pipesched::mpi_codec)");
    using message = typename E::message;
    int size = 0;
    int rank = 0;
    detail::mpi_check(MPI_Comm_size(opts.comm, &size), "MPI_Comm_size");
    detail::mpi_check(MPI_Comm_rank(opts.comm, &rank), "MPI_Comm_rank");
    if (static_cast<std::uint64_t>(size) != sched.stages()) {
      detail::fail("run_mpi: communicator size (", size,
                   " ranks) must equal the stages (p=", sched.stages(), ") of schedule \"",
                   sched.name(), "\": one rank per stage");
    }
    if (opts.root < 0 || opts.root >= size) {
      detail::fail("run_mpi: root (", opts.root, ") must be a rank of the communicator (0..",
                   size - 1, ")");
    }
    if (opts.validate) {
      detail::require_runnable(sched, "run_mpi");
    }
    mpi_run_result result;
    const bool lower = !sched.has_comm() && opts.lower;
    result.ran = lower ? lower_communication(sched, opts.lowering) : sched;
    const bool lowered = result.ran.has_comm() || lower;
    const stage_index s = static_cast<stage_index>(rank);

    detail::mpi_comm_dup comm(opts.comm);
    mpi_transport<message> t(comm.get(), result.ran,
                             lowered ? mpi_send_mode::synchronous : mpi_send_mode::buffered);
    detail::stage_runner<message> runner(result.ran, s);
    std::vector<timed_op>& mine = result.timings;
    mine.reserve(result.ran.ops(s).size());

    detail::mpi_check(MPI_Barrier(comm.get()), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    const auto ops = result.ran.ops(s);
    const bool chunked = result.ran.chunks() > 1;
    try {
      try {
        while (!runner.done()) {
          const std::size_t i = runner.position();
          const double a = MPI_Wtime() - t0;
          runner.step(e, t);  // throws execution_error naming this stage and op
          mine.push_back({s, detail::op_position(i, s, "run_mpi"), ops[i], a, MPI_Wtime() - t0});
        }
      } catch (const execution_error&) {
        throw;
      } catch (...) {
        const std::size_t i = std::min(runner.position(), ops.size() - 1);
        throw execution_error(s, i, ops[i], chunked, detail::current_what());
      }
      try {
        t.flush();
      } catch (...) {
        // A buffered send failed after its op returned (so the stage has ops): blame its last.
        throw execution_error(s, ops.size() - 1, ops.back(), chunked, detail::current_what());
      }
    } catch (const execution_error& err) {
      detail::abort_or_rethrow(opts, rank, "run_mpi", err);
    }
    result.elapsed = mine.empty() ? 0.0 : mine.back().end;
    if (opts.gather_timings) {
      std::vector<timed_op> all = detail::gather_timings(comm.get(), opts.root, mine);
      if (rank == opts.root) {
        result.timings = std::move(all);
      }
    }
    return result;
  } else {
    return mpi_run_result{};
  }
}

/// run_mpi's dynamic mode, run_threaded_dynamic on ranks: no fixed order. Rank s runs stage s
/// of placement `pl` with `microbatches` micro-batches and, whenever it is free, picks among
/// the ops whose input message has arrived (MPI_Iprobe of the producer's rank and mpi_tag) by
/// the rule of run_threaded_dynamic (detail::dynamic_stage, the same code: a B, else an F that
/// memory admits within dyn.memory_limit, else the oldest pending W; each micro-batch along its
/// route only, its messages to the ranks of the route's neighbouring chunks). Outputs leave with
/// buffered sends (MPI_Isend), so a rank never waits for a peer to receive; a rank with
/// nothing to run polls and sleeps opts.idle_poll_seconds in between instead of spinning. Split
/// backward only (F, B, W). A collective call like run_mpi; of mpi_options it uses comm,
/// gather_timings, root, abort_on_error and idle_poll_seconds.
///
/// Returns, on each rank, `ran`: the order that ran (name "dynamic"); on `root` with
/// gather_timings every stage's list, which validates and fits the limit (check_memory),
/// elsewhere only this rank's own list. `timings` and `elapsed` as run_mpi, with each op's
/// index its position in `ran`. Throws (on every rank alike, before any op runs)
/// invalid_argument when the communicator's size differs from the stages, when the tags don't
/// fit MPI_TAG_UB, or for a limit below static memory plus one activation of each chunk of a
/// stage (require_minimum_memory). An op that
/// fails aborts the job (mpi_options::abort_on_error), named by its position in `ran`. Unlike
/// the thread driver it cannot see that every rank waits: a limit that leaves the policy with
/// nothing to run would hang, which the limit check above rules out for the placements here.
template <class E>
mpi_run_result run_mpi_dynamic(E& e,
                               const placement& pl,
                               std::uint32_t microbatches,
                               const dynamic_run_options& dyn = {},
                               const mpi_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  if constexpr (executor<E>) {
    static_assert(
        mpi_message<typename E::message>,
        "pipesched run_mpi_dynamic: E::message needs an mpi_codec (trivially copyable, "
        "std::vector of trivially copyable, or a specialisation of pipesched::mpi_codec)");
    using message = typename E::message;
    const char* who = "run_mpi_dynamic";
    int size = 0;
    int rank = 0;
    detail::mpi_check(MPI_Comm_size(opts.comm, &size), "MPI_Comm_size");
    detail::mpi_check(MPI_Comm_rank(opts.comm, &rank), "MPI_Comm_rank");
    if (static_cast<std::uint64_t>(size) != pl.stages()) {
      detail::fail(who, ": communicator size (", size,
                   " ranks) must equal the stages (p=", pl.stages(),
                   ") of the placement: one rank per stage");
    }
    if (opts.root < 0 || opts.root >= size) {
      detail::fail(who, ": root (", opts.root, ") must be a rank of the communicator (0..",
                   size - 1, ")");
    }
    if (!(opts.idle_poll_seconds >= 0.0) || !(opts.idle_poll_seconds <= 1.0)) {
      detail::fail(who, ": idle_poll_seconds (", opts.idle_poll_seconds,
                   ") must be between 0 and 1");
    }
    mpi_run_result result;
    result.ran = schedule::on("dynamic", pl, microbatches);  // checks m
    const shaped_memory_model mem =
        dyn.memory.for_shape(pl.stages(), pl.chunks(), microbatches, who);
    const std::vector<double> cap = detail::dynamic_cap(who, pl, mem, dyn.memory_limit);
    const stage_index s = static_cast<stage_index>(rank);
    detail::dynamic_stage policy(pl, s, microbatches, mem, detail::stage_cap(cap, s));

    detail::mpi_comm_dup comm(opts.comm);
    mpi_transport<message> t(comm.get(), result.ran, mpi_send_mode::buffered);
    std::vector<op>& ran = result.ran.stage_ops(s);
    std::vector<timed_op>& mine = result.timings;
    const std::size_t total = policy.total();
    ran.reserve(total);
    mine.reserve(total);
    auto arrived = [&](const message_key& k) { return t.arrived(policy.producer_of(k), k); };
    const auto idle = std::chrono::duration<double>(opts.idle_poll_seconds);
    const bool chunked = pl.chunks() > 1;

    detail::mpi_check(MPI_Barrier(comm.get()), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    // The op being started (its position in `ran`), for the error message.
    std::size_t at = 0;
    op at_op{};
    try {
      try {
        while (ran.size() < total) {
          const std::optional<op> next = policy.pick(arrived);
          if (!next) {
            std::this_thread::sleep_for(idle);
            continue;
          }
          const op x = *next;
          at = ran.size();
          at_op = x;
          const double a = MPI_Wtime() - t0;
          message in{};
          if (const std::optional<message_key> k = policy.input_of(x)) {
            in = t.receive(policy.producer_of(*k), *k);  // it has arrived: no wait
          }
          policy.commit(x);
          ran.push_back(x);
          message out = detail::run_op(e, policy.context(x, at), std::move(in));
          mine.push_back(
              {s, detail::op_position(at, s, "run_mpi_dynamic"), x, a, MPI_Wtime() - t0});
          if (const auto to = policy.output_of(x)) {
            t.send(to->first, to->second, std::move(out));
          }
        }
        t.flush();  // a buffered send that failed after its op returned: blamed on the last op
      } catch (...) {
        throw execution_error(s, at, at_op, chunked, detail::current_what());
      }
    } catch (const execution_error& err) {
      detail::abort_or_rethrow(opts, rank, "run_mpi_dynamic", err);
    }
    result.elapsed = mine.empty() ? 0.0 : mine.back().end;
    if (opts.gather_timings) {
      std::vector<timed_op> all = detail::gather_timings(comm.get(), opts.root, mine);
      if (rank == opts.root) {
        // Gathered by stage, each in the order it ran: that is the order.
        schedule order = schedule::on("dynamic", pl, microbatches);
        for (const timed_op& x : all) {
          order.stage_ops(x.stage).push_back(x.o);
        }
        result.ran = std::move(order);
        result.timings = std::move(all);
      }
    }
    return result;
  } else {
    return mpi_run_result{};
  }
}

}  // namespace pipesched
