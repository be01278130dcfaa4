#pragma once

#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace pipesched::detail {

/// Runs `work()` on `threads` threads, the caller's included, and returns when all are done.
/// When one throws, `stop()` is called (under no lock of ours) so the others can wind down,
/// and the first exception is rethrown here once every thread has ended. A thread the system
/// cannot start is not an error: the ones running share the work (so `work` must tolerate
/// any number of workers from 1 up).
template <class Work, class Stop>
void run_parallel(unsigned threads, Work&& work, Stop&& stop) {
  std::mutex mu;
  std::exception_ptr error;
  auto guarded = [&]() noexcept {
    try {
      work();
    } catch (...) {
      {
        const std::lock_guard<std::mutex> lock(mu);
        if (!error) {
          error = std::current_exception();
        }
      }
      stop();
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(guarded);
      } catch (const std::system_error&) {
        break;
      }
    }
    guarded();
  }  // joins the pool
  if (error) {
    std::rethrow_exception(error);
  }
}

}  // namespace pipesched::detail
