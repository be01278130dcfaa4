#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include <pipesched/exec/detail/channel.hpp>
#include <pipesched/exec/transport.hpp>

using namespace pipesched;

namespace {
struct map_transport {
  std::map<message_key, int> box;
  void send(stage_index, const message_key& k, int&& v) { box[k] = v; }
  int receive(stage_index, const message_key& k) { return box.at(k); }
};
struct send_only {
  void send(stage_index, const message_key&, int&&) {}
};
struct receive_wrong_type {
  void send(stage_index, const message_key&, int&&) {}
  long receive(stage_index, const message_key&) { return 0; }
};
}  // namespace

static_assert(transport<detail::channel_endpoint<int>, int>);
static_assert(transport<map_transport, int>);
static_assert(!transport<int, int>);
static_assert(!transport<send_only, int>);
static_assert(!transport<receive_wrong_type, int>);
static_assert(!transport<detail::channel_endpoint<int>, std::string>);

TEST_CASE("message_key orders and prints", "[exec][transport]") {
  const message_key a{3, 5, direction::forward};
  const message_key b{3, 5, direction::backward};
  CHECK(a != b);
  CHECK(a < b);
  CHECK(to_string(a) == "activation for chunk 3, mb 5");
  CHECK(to_string(b) == "gradient of chunk 3, mb 5");
}

TEST_CASE("channels match messages by key, in any order", "[exec][transport]") {
  detail::channel_hub<int> hub(2);
  detail::channel_endpoint<int> s0(hub, 0);
  detail::channel_endpoint<int> s1(hub, 1);
  s0.send(1, {1, 0, direction::forward}, 10);
  s0.send(1, {1, 1, direction::forward}, 11);
  CHECK(hub.pending() == 2);
  CHECK(s1.receive(0, {1, 1, direction::forward}) == 11);
  CHECK(s1.receive(0, {1, 0, direction::forward}) == 10);
  CHECK(hub.pending() == 0);
  s1.send(0, {0, 0, direction::backward}, 7);
  CHECK_THROWS_AS(s1.send(0, {0, 0, direction::backward}, 8), std::logic_error);
  CHECK(s0.receive(1, {0, 0, direction::backward}) == 7);
}

TEST_CASE("a non-blocking hub reports a missing message instead of waiting", "[exec][transport]") {
  detail::channel_hub<int> hub(2, /*blocking=*/false);
  CHECK_THROWS_WITH(hub.receive(1, 0, {1, 0, direction::forward}),
                    Catch::Contains("has not been sent"));
  hub.send(0, 1, {1, 0, direction::forward}, 4);
  CHECK_THROWS_WITH(hub.receive(1, 2, {1, 0, direction::forward}),
                    Catch::Contains("came from stage 0, expected stage 2"));
}

TEST_CASE("cancel wakes a blocked receive", "[exec][transport]") {
  detail::channel_hub<int> hub(2);
  bool cancelled = false;
  std::thread t([&] {
    try {
      (void)hub.receive(1, 0, {1, 0, direction::forward});
    } catch (const detail::run_cancelled&) {
      cancelled = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // not a timing assertion
  hub.cancel();
  t.join();
  CHECK(cancelled);
  CHECK(hub.cancelled());
  CHECK_THROWS_AS(hub.send(0, 1, {1, 0, direction::forward}, 1), detail::run_cancelled);
}

TEST_CASE("a receive blocks until the message is sent from another thread", "[exec][transport]") {
  detail::channel_hub<int> hub(2);
  int got = 0;
  std::thread t([&] { got = hub.receive(1, 0, {1, 4, direction::forward}); });
  hub.send(0, 1, {1, 4, direction::forward}, 42);
  t.join();
  CHECK(got == 42);
}
