#include "proxy/serve/list_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <exception>
#include <utility>

namespace kf {
namespace {

// How much lower than the I/O threads the pool's threads run: at +10 a thread gets about a
// tenth of the CPU an I/O thread gets when both want it.
constexpr int kNiceIncrement = 10;
constexpr int kNiceMax = 19;

void LowerThisThreadsPriority() {
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return;
  // Best effort: a thread that cannot be lowered still works.
  (void)setpriority(PRIO_PROCESS, tid, std::min(nice + kNiceIncrement, kNiceMax));
}

}  // namespace

ListPool::ListPool(size_t threads) : guard_(asio::make_work_guard(ioc_)) {
  threads_.reserve(std::max<size_t>(threads, 1));
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    threads_.emplace_back([this] {
      LowerThisThreadsPriority();
      ioc_.run();
    });
  }
}

ListPool::~ListPool() {
  guard_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
}

asio::awaitable<void> ListPool::Run(absl::FunctionRef<void()> work) {
  std::exception_ptr error;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [this, &work, &error](auto handler) {
        auto caller = asio::make_work_guard(asio::get_associated_executor(handler));
        asio::post(ioc_, [&work, &error, handler = std::move(handler),
                          caller = std::move(caller)]() mutable {
          try {
            work();
          } catch (...) {
            error = std::current_exception();
          }
          auto executor = caller.get_executor();
          asio::post(executor, std::move(handler));
        });
      },
      asio::use_awaitable);
  if (error) std::rethrow_exception(error);
}

asio::awaitable<void> ListBuilds::Run(absl::FunctionRef<void()> work) {
  const AsyncSemaphore::Permit permit = co_await permits_.Acquire();
  co_await pool_.Run(work);
}

}  // namespace kf
