#include "proxy/upstream/access_answers.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kf {

namespace asio = boost::asio;

std::optional<bool> AccessAnswers::Find(const std::string& key, Clock::time_point now) {
  absl::MutexLock lock(&mu_);
  const auto* e = entries_.Find(key);
  if (e == nullptr) return std::nullopt;
  if (e->fresh(now)) return e->value;
  entries_.Erase(key);
  return std::nullopt;
}

void AccessAnswers::Put(const std::string& key, bool allowed, Clock::time_point expires) {
  absl::MutexLock lock(&mu_);
  entries_.Put(key, allowed, expires);
}

size_t AccessAnswers::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

asio::awaitable<Access> AccessAnswers::Share(const std::string& key,
                                             std::function<asio::awaitable<Access>()> fetch) {
  const auto executor = co_await asio::this_coro::executor;
  std::shared_ptr<Flight> joined;
  std::shared_ptr<asio::steady_timer> timer;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = flights_.find(key); it != flights_.end()) {
      joined = it->second;
      timer = std::make_shared<asio::steady_timer>(executor);
      timer->expires_at(asio::steady_timer::time_point::max());
      joined->waiters.push_back({timer->get_executor(), timer});
    } else {
      flights_[key] = std::make_shared<Flight>();
    }
  }
  if (joined) {
    const Access shared = co_await Wait(std::move(joined), std::move(timer));
    co_return shared;
  }
  const Access value = co_await fetch();
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = flights_.find(key);
    it->second->result = value;
    waiters = std::move(it->second->waiters);
    flights_.erase(it);
  }
  // Each waiter's timer is its thread's: cancelled there (its wait has begun by then: it was
  // registered by a coroutine that suspended on it before its thread ran anything else).
  for (Waiter& w : waiters) {
    asio::post(w.executor, [timer = w.timer] {
      if (auto t = timer.lock()) t->cancel();
    });
  }
  co_return value;
}

asio::awaitable<Access> AccessAnswers::Wait(std::shared_ptr<Flight> flight,
                                            std::shared_ptr<asio::steady_timer> timer) {
  for (;;) {
    std::optional<Access> result;
    {
      absl::MutexLock lock(&mu_);
      result = flight->result;
    }
    if (result) co_return *result;
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace kf
