#include <catch2/catch.hpp>

#include "proxy/sync/reflector.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/sync/scripted_upstream.h"

namespace kf {

// At shutdown a reflector is stopped wherever it is. Stopped while its watch is being opened
// (the request sent, the answer not yet in), it has nothing to cancel yet: without a check once
// the watch is open, the watch would run its 5-10 minutes and the process's shutdown wait for it
// ("shutting down", then nothing until the rig's SIGKILL).
TEST_CASE("a reflector stopped while its watch opens ends as soon as the watch is open") {
  asio::io_context ioc;
  test::ScriptedUpstream upstream(ioc);
  upstream.lists = {test::PodList(5, {})};
  upstream.hold_watches = true;
  test::Spawn(ioc, test::ScriptedUpstream::Serve(&upstream));
  Cacher cacher(testing::PodsType(), EventRingLimits{},
                [] { return std::chrono::steady_clock::now(); });
  Logger log(2, Logger::Level::kError);
  Reflector reflector(
      cacher, upstream.up.pool, [] { return std::string(); }, log, ioc.get_executor());
  const test::Spawned run = test::Spawn(ioc, reflector.Run());
  REQUIRE(test::RunUntil(ioc, [&] { return !upstream.watch_targets.empty(); }));
  CHECK(cacher.synced());  // It listed, and is opening its watch.
  reflector.Stop();
  upstream.hold_watches = false;  // The watch's answer comes after the stop.
  CHECK(test::RunUntil(
      ioc, [&] { return run.finished(); }, std::chrono::seconds(3)));
  run.Rethrow();
}

}  // namespace kf
