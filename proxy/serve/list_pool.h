// Large LIST answers are built and compressed off the I/O threads, so that a 19 MB list (and
// its 60 ms of gzip) does not hold up the watch fan-out running on the same thread.
//
// ListPool: a few threads of their own, at a lower CPU priority than the I/O threads (nice
// +10), shared by every I/O thread. ListBuilds: one per I/O thread, the bound on what that
// thread has in the pool at once (running or queued); past it a session's coroutine waits its
// turn (AsyncSemaphore, in arrival order) without blocking its thread. The number of sessions
// waiting is bounded by admission and the connection limits, like any request.
//
// The work runs while its session's coroutine is suspended: it may use that coroutine's
// locals by reference. The pool is destroyed (joined) before the I/O threads' io_contexts and
// after those threads have stopped (Server's member order).
#ifndef KUBE_FANOUT_SERVE_LIST_POOL_H_
#define KUBE_FANOUT_SERVE_LIST_POOL_H_

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/async_semaphore.h"

namespace kf {

namespace asio = boost::asio;

class ListPool {
 public:
  // `threads` at least 1.
  explicit ListPool(size_t threads);
  ~ListPool();  // Abandons work not started; waits for the work under way.
  ListPool(const ListPool&) = delete;
  ListPool& operator=(const ListPool&) = delete;

  // Runs `work` on a pool thread; the caller resumes on its own executor once it is done. An
  // exception from `work` is rethrown to the caller.
  asio::awaitable<void> Run(absl::FunctionRef<void()> work);

  size_t threads() const { return threads_.size(); }

 private:
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::vector<std::thread> threads_;
};

class ListBuilds {
 public:
  // What one I/O thread may have in the pool at once.
  static constexpr size_t kPerThread = 2;

  explicit ListBuilds(ListPool& pool, size_t bound = kPerThread) : pool_(pool), permits_(bound) {}

  // Waits for one of this thread's places, then runs `work` in the pool.
  asio::awaitable<void> Run(absl::FunctionRef<void()> work);

  size_t waiting() const { return permits_.waiting(); }

 private:
  ListPool& pool_;
  AsyncSemaphore permits_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_LIST_POOL_H_
