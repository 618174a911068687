#include "proxy/sync/snapshot_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Pod;
using testing::PodsType;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kf-snapshot-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

SnapshotOptions Options(const std::string& dir) {
  SnapshotOptions o;
  o.dir = dir;
  o.interval = std::chrono::seconds(1);
  return o;
}

}  // namespace

TEST_CASE("SnapshotStore writes a synced cache on stop and loads it for the same upstream only") {
  TempDir tmp;
  Logger log(2, Logger::Level::kError);
  Cacher cacher(PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); });
  cacher.Replace({Pod("a", "x", 5)}, 10);
  cacher.Apply(EventType::kAdded, Pod("a", "y", 11));
  // A protobuf cache no client asked for never synced: nothing is written for it.
  Cacher unused(
      PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); },
      Encoding::kProtobuf);
  {
    SnapshotStore store(Options(tmp.path), log);
    REQUIRE(store.Open());
    store.Start({{&cacher, "https://up:6443"}, {&unused, "https://up:6443"}});
    store.Stop();  // The final write.
    CHECK(store.stats().writes.load() == 1);
  }
  CHECK_FALSE(std::filesystem::exists(tmp.path + "/pods_v1.protobuf.snap"));
  struct stat st {};
  REQUIRE(::stat((tmp.path + "/pods_v1.snap").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_FALSE(std::filesystem::exists(tmp.path + "/pods_v1.snap.tmp"));

  SnapshotStore again(Options(tmp.path), log);
  REQUIRE(again.Open());
  auto loaded = again.Load("", "v1", "pods", "https://up:6443");
  REQUIRE(loaded.has_value());
  CHECK(loaded->type.kind == "Pod");
  CHECK(loaded->state.resource_version == 11);
  CHECK(loaded->state.objects.size() == 2);
  CHECK(loaded->state.events.size() == 1);
  CHECK_FALSE(again.Load("", "v1", "pods", "https://other:6443").has_value());
  CHECK(again.stats().loads[SnapshotStats::kUpstream].load() == 1);
  CHECK_FALSE(again.Load("", "v1", "nodes", "https://up:6443").has_value());
  CHECK(again.stats().loads[SnapshotStats::kMissing].load() == 1);
  // No protobuf snapshot: not counted as missing (most resources never have one).
  CHECK_FALSE(again.Load("", "v1", "pods", "https://up:6443", Encoding::kProtobuf).has_value());
  CHECK(again.stats().loads[SnapshotStats::kMissing].load() == 1);
  // A JSON snapshot under the protobuf cache's name is refused, not read as protobuf.
  std::filesystem::copy_file(tmp.path + "/pods_v1.snap", tmp.path + "/pods_v1.protobuf.snap");
  CHECK_FALSE(again.Load("", "v1", "pods", "https://up:6443", Encoding::kProtobuf).has_value());
  CHECK(again.stats().loads[SnapshotStats::kInvalid].load() == 1);

  SnapshotOptions expired = Options(tmp.path);
  expired.max_age = std::chrono::seconds(-1);  // Anything written is too old.
  SnapshotStore old(expired, log);
  REQUIRE(old.Open());
  CHECK_FALSE(old.Load("", "v1", "pods", "https://up:6443").has_value());
  CHECK(old.stats().loads[SnapshotStats::kStale].load() == 1);
}

TEST_CASE("SnapshotStore refuses a directory group or others may access, and skips Secrets") {
  TempDir tmp;
  Logger log(2, Logger::Level::kError);
  REQUIRE(::chmod(tmp.path.c_str(), 0750) == 0);
  SnapshotStore open(Options(tmp.path), log);
  CHECK_FALSE(open.Open());
  CHECK(open.stats().disabled.load());
  REQUIRE(::chmod(tmp.path.c_str(), 0700) == 0);
  SnapshotStore closed(Options(tmp.path + "/new"), log);
  CHECK(closed.Open());  // Created, 0700.
  const ResourceType secrets{"", "v1", "secrets", "Secret", true, false};
  CHECK_FALSE(closed.Writes(secrets));
  CHECK(closed.Writes(PodsType()));
  SnapshotOptions with = Options(tmp.path);
  with.include_secrets = true;
  CHECK(SnapshotStore(with, log).Writes(secrets));
}

}  // namespace kf
