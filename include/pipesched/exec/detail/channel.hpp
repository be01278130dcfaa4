#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/exec/transport.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched::detail {

/// Thrown by a receive (and by drivers' internal checks) once a run has been cancelled
/// because another stage failed. Drivers swallow it: the first real error is what they report.
class run_cancelled : public std::runtime_error {
 public:
  run_cancelled() : std::runtime_error("pipesched: run cancelled") {}
};

/// In-process message channels of one run: one inbox per destination stage, guarded by a
/// mutex and a condition variable, holding messages by key (any arrival order).
/// `blocking == false` (single-threaded driver): receiving a message that has not arrived is a
/// logic error instead of a wait, so a driver bug can never hang.
template <class M>
class channel_hub {
 public:
  explicit channel_hub(std::uint32_t stages, bool blocking = true) : blocking_(blocking) {
    inboxes_.reserve(stages);
    for (std::uint32_t s = 0; s < stages; ++s) {
      inboxes_.push_back(std::make_unique<inbox>());
    }
  }

  void send(stage_index from, stage_index to, const message_key& k, M&& msg) {
    inbox& box = *inboxes_.at(to);
    {
      std::lock_guard lock(box.mu);
      if (cancelled_.load(std::memory_order_relaxed)) {
        throw run_cancelled();
      }
      const bool inserted = box.messages.try_emplace(k, entry{from, std::move(msg)}).second;
      if (!inserted) {
        throw std::logic_error("channel: " + to_string(k) + " sent twice to stage " +
                               std::to_string(to));
      }
    }
    box.cv.notify_all();
  }

  M receive(stage_index to, stage_index from, const message_key& k) {
    inbox& box = *inboxes_.at(to);
    std::unique_lock lock(box.mu);
    auto arrived = [&] { return box.messages.find(k) != box.messages.end(); };
    if (blocking_) {
      box.cv.wait(lock, [&] { return cancelled_.load(std::memory_order_relaxed) || arrived(); });
    }
    if (cancelled_.load(std::memory_order_relaxed)) {
      throw run_cancelled();
    }
    auto it = box.messages.find(k);
    if (it == box.messages.end()) {
      throw std::logic_error("channel: stage " + std::to_string(to) + " expected " + to_string(k) +
                             " from stage " + std::to_string(from) + " but it has not been sent");
    }
    if (it->second.from != from) {
      throw std::logic_error("channel: " + to_string(k) + " came from stage " +
                             std::to_string(it->second.from) + ", expected stage " +
                             std::to_string(from));
    }
    M msg = std::move(it->second.msg);
    box.messages.erase(it);
    return msg;
  }

  /// Wakes every blocked receive (they throw run_cancelled), and makes later sends and
  /// receives throw too. Idempotent.
  void cancel() {
    cancelled_.store(true);
    for (auto& box : inboxes_) {
      { std::lock_guard lock(box->mu); }  // no receive can miss the flag between check and wait
      box->cv.notify_all();
    }
  }
  bool cancelled() const noexcept { return cancelled_.load(); }

  /// Messages sent but never received (0 after a complete run of a valid schedule).
  std::size_t pending() const {
    std::size_t n = 0;
    for (const auto& box : inboxes_) {
      std::lock_guard lock(box->mu);
      n += box->messages.size();
    }
    return n;
  }

 private:
  struct entry {
    stage_index from;
    M msg;
  };
  struct inbox {
    mutable std::mutex mu;
    std::condition_variable cv;
    std::map<message_key, entry> messages;
  };
  bool blocking_;
  std::atomic<bool> cancelled_{false};
  std::vector<std::unique_ptr<inbox>> inboxes_;
};

/// One stage's view of a channel_hub: a `transport` model.
template <class M>
class channel_endpoint {
 public:
  channel_endpoint(channel_hub<M>& hub, stage_index self) : hub_(&hub), self_(self) {}
  void send(stage_index to, const message_key& k, M&& msg) {
    hub_->send(self_, to, k, std::move(msg));
  }
  M receive(stage_index from, const message_key& k) { return hub_->receive(self_, from, k); }
  stage_index self() const noexcept { return self_; }

 private:
  channel_hub<M>* hub_;
  stage_index self_;
};

}  // namespace pipesched::detail
