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
#include <boost/system/system_error.hpp>
#include <chrono>
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
      // Woken by Release (the timer is cancelled); the slice is only a safety net for a
      // cancellation that could not be made (see Wake).
      waiter->timer.expires_after(kRecheck);
      co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    waiter->taken = true;
    co_return Permit(this);
  }

  size_t waiting() const { return waiters_.size(); }

 private:
  // How long a waiter sleeps before it looks at `granted` again by itself.
  static constexpr std::chrono::seconds kRecheck{1};

  struct Waiter {
    Waiter(const boost::asio::any_io_executor& ex, AsyncSemaphore* s) : timer(ex), owner(s) {}
    // A waiter that went away after being handed the permit gives it back.
    ~Waiter() {
      if (granted && !taken) owner->Release();
    }
    boost::asio::steady_timer timer;
    AsyncSemaphore* owner;
    bool granted = false, taken = false;
  };

  // Hands the permit to the first waiter still there, or frees it. Runs in destructors
  // (Permit's, Waiter's): never throws.
  void Release() noexcept {
    while (!waiters_.empty()) {
      std::shared_ptr<Waiter> next = waiters_.front().lock();
      waiters_.pop_front();
      if (next) {
        next->granted = true;
        Wake(next->timer);
        return;
      }
    }
    ++free_;
  }

  // Ends a waiter's sleep at once. With BOOST_ASIO_NO_DEPRECATED the timer's cancel() is the
  // throwing form only; the reactor's cancellation does not fail, and were it to, the waiter
  // still sees `granted` within kRecheck.
  static void Wake(boost::asio::steady_timer& timer) noexcept {
    try {
      timer.cancel();
    } catch (const boost::system::system_error&) {
      // Left to the waiter's next look (above).
    }
  }

  size_t free_;
  std::deque<std::weak_ptr<Waiter>> waiters_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_ASYNC_SEMAPHORE_H_
