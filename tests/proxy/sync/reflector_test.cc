// Reflector: what it asks its upstream and what it makes of the answers (list, watch lines,
// bookmarks, a 410, a watch that ends), against a scripted upstream on loopback. Wire fidelity
// against the real apiserver is the integration suite's; these pin the reflector's own rules.
#include "proxy/sync/reflector.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/sync/scripted_upstream.h"

namespace kf {
namespace {

using test::Bookmark;
using test::Line;
using test::PodList;
using test::WatchScript;

// The cache's objects as "namespace/name@rv", in key order.
std::vector<std::string> Contents(const Cacher& cacher) {
  std::vector<std::string> out;
  for (const auto& o : cacher.List(testing::Filter()).items) {
    out.push_back(absl::StrCat(o->namespace_(), "/", o->name(), "@", o->resource_version()));
  }
  return out;
}

struct ReflectorRig {
  asio::io_context ioc;
  test::ScriptedUpstream upstream{ioc};
  Cacher cacher{testing::PodsType(), EventRingLimits{},
                [] { return std::chrono::steady_clock::now(); }};
  Logger log{2, Logger::Level::kError};
  Reflector reflector{cacher, upstream.up.pool, [] { return std::string(); }, log,
                      ioc.get_executor()};

  // Runs the reflector until `done`, then stops it and lets it end.
  bool RunUntil(const std::function<bool()>& done) {
    test::Spawn(ioc, test::ScriptedUpstream::Serve(&upstream));
    const test::Spawned run = test::Spawn(ioc, reflector.Run());
    const bool reached = test::RunUntil(ioc, done, std::chrono::seconds(5));
    reflector.Stop();
    upstream.up.acceptor.close();
    test::RunUntil(
        ioc, [&] { return run.finished(); }, std::chrono::seconds(3));
    run.Rethrow();
    return reached;
  }
};

}  // namespace

TEST_CASE("a reflector lists, watches from the list's RV, and applies events and bookmarks",
          "[reflector]") {
  ReflectorRig rig;
  rig.upstream.lists = {PodList(5, {testing::PodJson("ns", "a", 3)})};
  rig.upstream.watches = {
      WatchScript{{Line("ADDED", testing::PodJson("ns", "b", 6)),
                   Line("MODIFIED", testing::PodJson("ns", "a", 7)), Bookmark(9)}}};
  REQUIRE(rig.RunUntil([&] { return rig.cacher.resource_version() == 9; }));
  CHECK(Contents(rig.cacher) == std::vector<std::string>{"ns/a@7", "ns/b@6"});
  CHECK(rig.reflector.stats().events == 2);
  CHECK(rig.reflector.stats().relists == 0);
  REQUIRE(rig.upstream.list_targets.size() == 1);
  REQUIRE(rig.upstream.watch_targets.size() == 1);
  const std::string& watch = rig.upstream.watch_targets[0];
  CHECK(watch.find("resourceVersion=5") != std::string::npos);
  CHECK(watch.find("allowWatchBookmarks=true") != std::string::npos);
}

TEST_CASE("a watch that ends is resumed from the cache's RV, with no relist", "[reflector]") {
  ReflectorRig rig;
  rig.upstream.lists = {PodList(5, {testing::PodJson("ns", "a", 3)})};
  rig.upstream.watches = {
      WatchScript{{Line("ADDED", testing::PodJson("ns", "b", 6))}, /*end=*/true},
      WatchScript{{Line("DELETED", testing::PodJson("ns", "a", 8))}}};
  REQUIRE(rig.RunUntil([&] { return rig.cacher.resource_version() == 8; }));
  CHECK(Contents(rig.cacher) == std::vector<std::string>{"ns/b@6"});
  CHECK(rig.upstream.list_targets.size() == 1);
  CHECK(rig.reflector.stats().relists == 0);
  REQUIRE(rig.upstream.watch_targets.size() == 2);
  CHECK(rig.upstream.watch_targets[1].find("resourceVersion=6") != std::string::npos);
}

TEST_CASE("a 410 on the watch relists, and the cache becomes the new list", "[reflector]") {
  ReflectorRig rig;
  rig.upstream.lists = {
      PodList(5, {testing::PodJson("ns", "a", 3), testing::PodJson("ns", "b", 4)}),
      PodList(20, {testing::PodJson("ns", "a", 15), testing::PodJson("ns", "c", 18)})};
  const std::string expired =
      R"j({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)j"
      R"j("message":"too old resource version: 5 (10)","reason":"Expired","code":410})j";
  rig.upstream.watches = {WatchScript{{Line("ERROR", expired)}}, WatchScript{}};
  REQUIRE(rig.RunUntil([&] { return rig.upstream.watch_targets.size() == 2; }));
  CHECK(Contents(rig.cacher) == std::vector<std::string>{"ns/a@15", "ns/c@18"});
  CHECK(rig.cacher.resource_version() == 20);
  CHECK(rig.reflector.stats().relists == 1);
  CHECK(rig.upstream.list_targets.size() == 2);
  CHECK(rig.upstream.watch_targets[1].find("resourceVersion=20") != std::string::npos);
}

TEST_CASE("a watch line that does not parse ends the watch: the reflector resumes, not relists",
          "[reflector]") {
  ReflectorRig rig;
  rig.upstream.lists = {PodList(5, {})};
  rig.upstream.watches = {
      WatchScript{{Line("ADDED", testing::PodJson("ns", "a", 6)), "{not json\n"}},
      WatchScript{{Line("ADDED", testing::PodJson("ns", "b", 7))}}};
  REQUIRE(rig.RunUntil([&] { return rig.cacher.resource_version() == 7; }));
  CHECK(Contents(rig.cacher) == std::vector<std::string>{"ns/a@6", "ns/b@7"});
  CHECK(rig.reflector.stats().relists == 0);
  CHECK(rig.reflector.stats().errors >= 1);
  REQUIRE(rig.upstream.watch_targets.size() == 2);
  CHECK(rig.upstream.watch_targets[1].find("resourceVersion=6") != std::string::npos);
}

}  // namespace kf
