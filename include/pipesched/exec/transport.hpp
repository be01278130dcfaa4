#pragma once

#include <compare>
#include <concepts>
#include <cstdint>
#include <string>
#include <utility>

#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"

namespace pipesched {

/// Which way a message flows along the model.
enum class direction : std::uint8_t {
  forward,   ///< an activation, from chunk g-1's F to chunk g's F
  backward,  ///< a gradient, from chunk g+1's B/BW to chunk g's B/BW
};

/// Names one message of a run: the activation *for* global chunk `chunk` (forward) or the
/// gradient of chunk `chunk`'s output (backward), for micro-batch `mb`. The key names the
/// consumer, so an op finds its input under (its own global chunk, its mb, its direction).
/// Unique within a run: a transport may use it as a tag (MPI) or a map key.
struct message_key {
  global_chunk chunk = 0;
  microbatch_index mb = 0;
  direction dir = direction::forward;

  friend auto operator<=>(const message_key&, const message_key&) = default;
  friend bool operator==(const message_key&, const message_key&) = default;
};

/// "activation for chunk 3, mb 5" / "gradient of chunk 3, mb 5".
inline std::string to_string(const message_key& k) {
  return (k.dir == direction::forward ? "activation for chunk " : "gradient of chunk ") +
         std::to_string(k.chunk) + ", mb " + std::to_string(k.mb);
}

/// transport: moves messages between the stages of one run, seen from one stage (a rank).
/// A model T for message type M provides, for an lvalue `t`, a `stage_index peer`, a
/// `const message_key& k` and an rvalue `M msg`:
///   t.send(peer, k, std::move(msg))      hand `msg` to stage `peer`; must not wait for the
///                                        peer to receive it (buffered, or asynchronous)
///   t.receive(peer, k) -> M              the message `k` sent by stage `peer`; blocks until it
///                                        has arrived
/// Not checked by the compiler, but required: messages with different keys may be received
/// in any order relative to their sends (match by key, like an MPI tag); receive() throws
/// rather than blocking forever once the run is cancelled. An in-process model is
/// detail::channel_endpoint (exec/detail/channel.hpp); an MPI model sends with MPI_Isend and
/// a tag computed from the key.
///   static_assert(transport<detail::channel_endpoint<int>, int>);
///   static_assert(!transport<int, int>);
template <class T, class M>
concept transport = requires(T& t, stage_index peer, const message_key& k, M&& msg) {
  t.send(peer, k, std::move(msg));
  { t.receive(peer, k) } -> std::same_as<M>;
};

}  // namespace pipesched
