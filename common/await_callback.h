// AwaitCallback: wait, on this coroutine's (single-threaded) executor, for a callback that
// another part of kube-fanout calls from any thread — a consistent-read probe's answer, an
// admission decision, a coalesced call's response. The value is handed over by a post to this
// executor; a timeout bounds the wait.
#ifndef KUBE_FANOUT_COMMON_AWAIT_CALLBACK_H_
#define KUBE_FANOUT_COMMON_AWAIT_CALLBACK_H_

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace kf {

// Calls `start` with a callback taking the value, and waits at most `timeout` for it. nullopt:
// the timeout passed first (a late value is dropped).
template <typename T>
boost::asio::awaitable<std::optional<T>> AwaitCallback(
    std::function<void(std::function<void(T)>)> start, std::chrono::milliseconds timeout) {
  namespace asio = boost::asio;
  auto exec = co_await asio::this_coro::executor;
  struct State {
    explicit State(const asio::any_io_executor& e) : timer(e) {}
    asio::steady_timer timer;
    std::optional<T> value;
  };
  auto st = std::make_shared<State>(exec);
  st->timer.expires_after(timeout);
  start([exec, weak = std::weak_ptr<State>(st)](T v) {
    // Shared, so the posted handler is copyable whatever T is (a Decision holds a seat).
    auto value = std::make_shared<T>(std::move(v));
    asio::post(exec, [weak, value] {
      if (auto s = weak.lock()) {
        s->value = std::move(*value);
        s->timer.cancel();
      }
    });
  });
  if (!st->value) co_await st->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return std::move(st->value);
}

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_AWAIT_CALLBACK_H_
