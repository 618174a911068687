#include "proxy/serve/list_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

TEST_CASE("ListPool runs the work on a thread of its own and resumes the caller on its own") {
  asio::io_context ioc;
  ListPool pool(2);
  CHECK(pool.threads() == 2);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id worked_on, resumed_on;
  const auto task = [&]() -> asio::awaitable<void> {
    co_await pool.Run([&] { worked_on = std::this_thread::get_id(); });
    resumed_on = std::this_thread::get_id();
  };
  Run(ioc, task());
  CHECK(worked_on != std::thread::id());
  CHECK(worked_on != caller);
  CHECK(resumed_on == caller);
}

TEST_CASE("ListPool hands the work's exception to the caller") {
  asio::io_context ioc;
  ListPool pool(1);
  const auto task = [&]() -> asio::awaitable<int> {
    try {
      co_await pool.Run([] { throw std::runtime_error("no memory for the list"); });
    } catch (const std::runtime_error& e) {
      co_return std::string_view(e.what()) == "no memory for the list" ? 1 : 2;
    }
    co_return 0;
  };
  CHECK(Run(ioc, task()) == 1);
}

TEST_CASE("ListBuilds keeps at most its bound of one thread's work in the pool, the rest wait") {
  asio::io_context ioc;
  ListPool pool(4);  // Room for more than the bound: the bound is what holds them back.
  ListBuilds builds(pool, 2);
  std::atomic<int> in_pool{0}, most{0}, done{0};
  std::atomic<bool> release{false};
  const auto work = [&] {
    const int now = ++in_pool;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Held until the test has looked (at most 5 s).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!release.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    --in_pool;
  };
  const auto task = [&]() -> asio::awaitable<void> {
    co_await builds.Run(work);
    ++done;
  };
  std::vector<Spawned> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(Spawn(ioc, task()));
  REQUIRE(RunUntil(ioc, [&] { return in_pool.load() == 2; }));
  // A third, were it let in, has 100 ms to get there with two pool threads idle.
  RunUntil(
      ioc, [] { return false; }, std::chrono::milliseconds(100));
  CHECK(in_pool.load() == 2);
  CHECK(builds.waiting() == 4);
  release = true;
  REQUIRE(RunUntil(ioc, [&] { return done.load() == 6; }));
  for (const Spawned& s : tasks) s.Rethrow();
  CHECK(most.load() == 2);
  CHECK(in_pool.load() == 0);
  CHECK(builds.waiting() == 0);
}

}  // namespace
}  // namespace kf::test
