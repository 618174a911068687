// AsyncSemaphore: at most N holders at once among the coroutines of one thread; the others wait
// in arrival order, without blocking the thread. Used to bound the reviews a worker thread has
// in flight to the apiserver at once (a fleet of new identities arriving together queues here
// instead of opening a connection per review).
//
// One per thread; not thread-safe.
#ifndef KUBE_FANOUT_COMMON_ASYNC_SEMAPHORE_H_
#define KUBE_FANOUT_COMMON_ASYNC_SEMAPHORE_H_

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <deque>
#include <memory>

namespace kf {

class AsyncSemaphore {
 public:
  explicit AsyncSemaphore(size_t holders) : free_(holders) {}
  AsyncSemaphore(const AsyncSemaphore&) = delete;
  AsyncSemaphore& operator=(const AsyncSemaphore&) = delete;

  // Held until destroyed.
  class Permit {
   public:
    explicit Permit(AsyncSemaphore* owner) : owner_(owner) {}
    Permit(Permit&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Permit& operator=(Permit&&) = delete;
    ~Permit() {
      if (owner_ != nullptr) owner_->Release();
    }

   private:
    AsyncSemaphore* owner_;
  };

  boost::asio::awaitable<Permit> Acquire() {
    namespace asio = boost::asio;
    if (free_ > 0 && waiters_.empty()) {
      --free_;
      co_return Permit(this);
    }
    auto waiter = std::make_shared<Waiter>(co_await asio::this_coro::executor, this);
    waiters_.push_back(waiter);
    while (!waiter->granted) {
      co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    waiter->taken = true;
    co_return Permit(this);
  }

  size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    Waiter(const boost::asio::any_io_executor& ex, AsyncSemaphore* s) : timer(ex), owner(s) {
      timer.expires_at(boost::asio::steady_timer::time_point::max());
    }
    // A waiter that went away after being handed the permit gives it back.
    ~Waiter() {
      if (granted && !taken) owner->Release();
    }
    boost::asio::steady_timer timer;
    AsyncSemaphore* owner;
    bool granted = false, taken = false;
  };

  // Hands the permit to the first waiter still there, or frees it.
  void Release() {
    while (!waiters_.empty()) {
      std::shared_ptr<Waiter> next = waiters_.front().lock();
      waiters_.pop_front();
      if (next) {
        next->granted = true;
        next->timer.cancel();
        return;
      }
    }
    ++free_;
  }

  size_t free_;
  std::deque<std::weak_ptr<Waiter>> waiters_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_ASYNC_SEMAPHORE_H_
