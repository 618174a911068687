// SingleFlight: concurrent lookups of the same key on one thread share one upstream call (the
// first caller's); the others wait for its result. Used for access reviews and identity
// lookups, whose answers are cached but which, before the first answer is cached, a ramp of
// thousands of agents with one credential would otherwise each send.
//
// One per worker thread; not thread-safe.
#ifndef KUBE_FANOUT_COMMON_SINGLE_FLIGHT_H_
#define KUBE_FANOUT_COMMON_SINGLE_FLIGHT_H_

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kf {

template <typename T>
class SingleFlight {
 public:
  boost::asio::awaitable<T> Do(const std::string& key,
                               std::function<boost::asio::awaitable<T>()> fetch) {
    namespace asio = boost::asio;
    if (auto it = flights_.find(key); it != flights_.end()) {
      std::shared_ptr<Flight> flight = it->second;
      auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
      timer->expires_at(asio::steady_timer::time_point::max());
      flight->waiters.push_back(timer);
      while (!flight->result) co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
      co_return *flight->result;
    }
    auto flight = std::make_shared<Flight>();
    flights_[key] = flight;
    T value = co_await fetch();
    flight->result = value;
    flights_.erase(key);
    for (auto& w : flight->waiters) {
      if (auto t = w.lock()) t->cancel();
    }
    co_return value;
  }

 private:
  struct Flight {
    std::optional<T> result;
    std::vector<std::weak_ptr<boost::asio::steady_timer>> waiters;
  };
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_SINGLE_FLIGHT_H_
