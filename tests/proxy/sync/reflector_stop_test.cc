#include <catch2/catch.hpp>

#include "proxy/sync/reflector.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/sync/scripted_upstream.h"

namespace kf {
namespace {

// A pods reflector of the scripted upstream, the upstream served.
struct StopRig {
  StopRig(asio::io_context& ioc, test::ScriptedUpstream& upstream)
      : reflector(
            cacher, upstream.up.pool, [] { return std::string(); }, log, ioc.get_executor()) {
    test::Spawn(ioc, test::ScriptedUpstream::Serve(&upstream));
  }
  Cacher cacher{testing::PodsType(), EventRingLimits{},
                [] { return std::chrono::steady_clock::now(); }};
  Logger log{2, Logger::Level::kError};
  Reflector reflector;
};

}  // namespace

// At shutdown a reflector is stopped wherever it is. Stopped while its watch is being opened
// (the request sent, the answer not yet in), it has nothing to cancel yet: without a check once
// the watch is open, the watch would run its 5-10 minutes and the process's shutdown wait for it
// ("shutting down", then nothing until the rig's SIGKILL).
TEST_CASE("a reflector stopped while its watch opens ends as soon as the watch is open") {
  asio::io_context ioc;
  test::ScriptedUpstream upstream(ioc);
  upstream.lists = {test::PodList(5, {})};
  upstream.hold_watches = true;
  StopRig rig(ioc, upstream);
  Cacher& cacher = rig.cacher;
  Reflector& reflector = rig.reflector;
  const test::Spawned run = test::Spawn(ioc, reflector.Run());
  REQUIRE(test::RunUntil(ioc, [&] { return !upstream.watch_targets.empty(); }));
  CHECK(cacher.synced());  // It listed, and is opening its watch.
  reflector.Stop();
  upstream.hold_watches = false;  // The watch's answer comes after the stop.
  CHECK(test::RunUntil(
      ioc, [&] { return run.finished(); }, std::chrono::seconds(3)));
  run.Rethrow();
}

// Stopped while it backs off after failed LISTs (up to 30 s between tries), it ends at once
// instead of waiting the backoff out ("shutting down", then nothing until SIGKILL).
TEST_CASE("a reflector stopped during its backoff ends at once") {
  asio::io_context ioc;
  test::ScriptedUpstream upstream(ioc);
  const std::string list_target =
      "/api/v1/pods?limit=500&shardSelector=shardRange%28object.metadata.uid%2C"
      "%270x0000000000000000%27%2C%270x10000000000000000%27%29";
  upstream.documents[list_target] = {500, "{}"};
  StopRig rig(ioc, upstream);
  Cacher& cacher = rig.cacher;
  Reflector& reflector = rig.reflector;
  const test::Spawned run = test::Spawn(ioc, reflector.Run());
  // The fourth failure starts a backoff of 1-2 s.
  REQUIRE(test::RunUntil(
      ioc, [&] { return reflector.stats().errors.load() >= 4; }, std::chrono::seconds(5)));
  CHECK_FALSE(cacher.synced());
  reflector.Stop();
  CHECK(test::RunUntil(
      ioc, [&] { return run.finished(); }, std::chrono::milliseconds(300)));
  run.Rethrow();
}

}  // namespace kf
