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
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

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
    auto permit = co_await TryAcquire(std::chrono::steady_clock::time_point::max(), SIZE_MAX);
    co_return std::move(*permit);
  }

  // As Acquire, but gives up (nullopt) at once when `max_waiting` others already wait, and when
  // its turn has not come by `deadline`.
  boost::asio::awaitable<std::optional<Permit>> TryAcquire(
      std::chrono::steady_clock::time_point deadline, size_t max_waiting) {
    namespace asio = boost::asio;
    if (free_ > 0 && waiting_ == 0) {
      --free_;
      co_return Permit(this);
    }
    if (waiting_ >= max_waiting) co_return std::nullopt;
    auto waiter = std::make_shared<Waiter>(co_await asio::this_coro::executor, this);
    waiters_.push_back(waiter);
    ++waiting_;
    while (!waiter->granted) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) co_return std::nullopt;  // ~Waiter leaves the line.
      // Woken by Release (the timer is cancelled); the slice is only a safety net for a
      // cancellation that could not be made (see Wake).
      waiter->timer.expires_at(deadline - now < kRecheck ? deadline : now + kRecheck);
      co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    waiter->taken = true;
    co_return Permit(this);
  }

  // Waiters still waiting for their turn.
  size_t waiting() const { return waiting_; }

 private:
  // How long a waiter sleeps before it looks at `granted` again by itself.
  static constexpr std::chrono::seconds kRecheck{1};

  struct Waiter {
    Waiter(const boost::asio::any_io_executor& ex, AsyncSemaphore* s) : timer(ex), owner(s) {}
    // A waiter that went away after being handed the permit gives it back; one that went
    // away before (its deadline passed, its coroutine was destroyed) leaves the line.
    ~Waiter() {
      if (!granted) {
        --owner->waiting_;
      } else if (!taken) {
        owner->Release();
      }
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
        --waiting_;
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
  size_t waiting_ = 0;  // Waiters in waiters_ not yet granted and not gone.
  std::deque<std::weak_ptr<Waiter>> waiters_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_ASYNC_SEMAPHORE_H_
