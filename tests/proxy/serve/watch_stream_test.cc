#include "proxy/serve/watch_stream.h"

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/log.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

TEST_CASE("WatchDeadline follows the apiserver's timeoutSeconds arithmetic without overflowing") {
  const auto now = std::chrono::steady_clock::now();
  CHECK(WatchDeadline(now, 5) == now + std::chrono::seconds(5));
  // Absent or 0: the apiserver's random default in [1800 s, 3600 s).
  const auto d = WatchDeadline(now, 0) - now;
  CHECK(d >= std::chrono::seconds(1800));
  CHECK(d < std::chrono::seconds(3600));
  // time.Duration(n) * time.Second wraps: a negative product has already passed...
  CHECK(WatchDeadline(now, 9223372037) == now);
  // ... the largest values end somewhere far away (capped), and nothing overflows.
  CHECK(WatchDeadline(now, 9223372036) > now + std::chrono::hours(24 * 365 * 99));
  CHECK(WatchDeadline(now, INT64_MAX) >= now);
  CHECK(WatchDeadline(now, 18446744074) >= now);
}

// A watch's Response whose direct writes (TryWriteBody) the test scripts: each runs `on_try`
// once if set, then answers `result` (kWritten keeps the bytes, as WriteBody does).
class ScriptedResponse : public test::RecordingResponse {
 public:
  bool can_write_now() const override { return true; }
  TryWrite TryWriteBody(std::span<const asio::const_buffer> pieces) override {
    ++tries;
    if (on_try) std::exchange(on_try, nullptr)();
    if (result == TryWrite::kWritten) {
      for (const auto& p : pieces) body.append(static_cast<const char*>(p.data()), p.size());
    }
    return result;
  }
  std::function<void()> on_try;
  TryWrite result = TryWrite::kWritten;
  int tries = 0;
};

// A cached pods watch served by ServeWatch and run detached on `ioc`, as the transports run it.
struct DetachedWatch {
  DetachedWatch() {
    cacher.Replace({}, 10);
    options.max_queue_bytes = 1 << 20;
    bool served = false;
    test::Spawn(ioc, [](DetachedWatch* d, bool* out) -> asio::awaitable<void> {
      *out = co_await ServeWatch(d->x, d->cacher, d->reflector, d->filter, d->wakeups, d->stats,
                                 d->options);
    }(this, &served));
    REQUIRE(test::RunUntil(ioc, [&] { return served; }));
    REQUIRE(x.detached);
    x.detached->Start(std::make_shared<int>(0), [this] { done = true; });
    Settle();
    REQUIRE(resp.head);
    REQUIRE(resp.head->status == 200);
  }
  // Runs what is ready, and what that makes ready, until nothing is.
  void Settle() {
    ioc.restart();
    ioc.poll();
  }
  ~DetachedWatch() {
    r.stop.Stop();
    (void)test::RunUntil(ioc, [this] { return done; });
  }

  asio::io_context ioc;
  Cacher cacher{testing::PodsType(), EventRingLimits{},
                [] { return std::chrono::steady_clock::now(); }};
  test::FakeUpstream upstream{ioc};  // Never asked: the reflector does not run.
  Logger log{2, Logger::Level::kError};
  Reflector reflector{cacher, upstream.pool, [] { return std::string(); }, log, ioc.get_executor()};
  Wakeups wakeups{ioc.get_executor()};
  CacheServeStats stats;
  WatchOptions options;
  const WatchFilter filter = testing::Filter();
  test::TestRequest r{boost::beast::http::verb::get, "/api/v1/pods?watch=1&resourceVersion=0"};
  ScriptedResponse resp;
  Exchange x{r.request, &resp, r.stop};
  bool done = false;
};

// Under load (a 10,000-stream HTTP/2 run whose kube-fanout was stopped for 2 s) some watches
// stopped receiving for good, their events piling up in kube-fanout: a wake-up took a batch and
// left it to the loop (the client's window was short), a second event's wake-up came before the
// loop started and found that batch still taken, and the loop's start cleared the `woken` it set.
// The watcher tells its watch once until the next take, so nothing woke it again.
TEST_CASE("A watch's event told while a taken batch waits for the loop is written after it") {
  DetachedWatch w;
  // The first event's wake-up takes it and leaves it to the loop; while it does, the second
  // event is queued (its wake-up queued after the first's drain, before the loop's start).
  w.resp.result = Response::TryWrite::kUnsupported;
  w.resp.on_try = [&w] { w.cacher.Apply(EventType::kAdded, testing::Pod("ns", "second", 12)); };
  w.cacher.Apply(EventType::kAdded, testing::Pod("ns", "first", 11));
  REQUIRE(test::RunUntil(w.ioc, [&w] { return w.resp.tries > 0; }));
  w.Settle();
  REQUIRE(w.resp.tries == 1);  // The race was set up: one direct write, left to the loop.
  REQUIRE(w.resp.body.find("\"first\"") != std::string::npos);
  CHECK(test::RunUntil(
      w.ioc, [&w] { return w.resp.body.find("\"second\"") != std::string::npos; },
      std::chrono::milliseconds(500)));
  CHECK(w.resp.body.find("\"first\"") < w.resp.body.find("\"second\""));
}

// The usual case for comparison: a batch written from the wake-up, the next event's likewise.
TEST_CASE("A parked watch's events go out from their wake-ups, in order") {
  DetachedWatch w;
  w.cacher.Apply(EventType::kAdded, testing::Pod("ns", "first", 11));
  w.Settle();
  w.cacher.Apply(EventType::kAdded, testing::Pod("ns", "second", 12));
  w.Settle();
  CHECK(w.resp.tries == 2);
  REQUIRE(w.resp.body.find("\"second\"") != std::string::npos);
  CHECK(w.resp.body.find("\"first\"") < w.resp.body.find("\"second\""));
}

}  // namespace
}  // namespace kf
