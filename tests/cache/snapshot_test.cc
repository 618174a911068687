#include "cache/snapshot.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tests/cache/fuzz_seed.h"
#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Filter;
using testing::Pod;
using testing::PodsType;

Cacher NewCacher() {
  return Cacher(PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); });
}

// A cache with objects and a window: adds, a selector transition, a deletion.
void Feed(Cacher& c) {
  c.Replace({Pod("a", "x", 5), Pod("b", "y", 7, "", "db"), Pod("b", "z", 8)}, 10);
  c.Apply(EventType::kAdded, Pod("a", "new", 11));
  c.Apply(EventType::kModified, Pod("b", "z", 12, "", "db"));  // Leaves app=web.
  c.Apply(EventType::kDeleted, Pod("a", "x", 13));
  c.Apply(EventType::kModified, Pod("b", "y", 14, "node-1", "web"));  // Enters app=web.
}

SnapshotHeader Header() { return {"https://127.0.0.1:6443", 1700000000, PodsType()}; }

std::string Encode(const Cacher& c, size_t max_bytes = 1 << 20) {
  auto state = c.ExportState();
  REQUIRE(state.has_value());
  auto bytes = EncodeSnapshot(Header(), *state, max_bytes);
  REQUIRE(bytes.ok());
  return *bytes;
}

// What a watch with `filter` from `rv` receives at once, as bytes.
std::string WatchBytes(Cacher& c, const WatchFilter& filter, Cacher::Start start, uint64_t rv) {
  auto w = c.Watch({filter, start, rv, 1 << 20, [] {}});
  REQUIRE(w.ok());
  std::string bytes;
  for (const Piece& p : (*w)->Take().pieces) bytes.append(p.bytes);
  c.RemoveWatcher(w->get());
  return bytes;
}

std::string ListBytes(const Cacher& c) {
  std::string bytes;
  for (const ObjectPtr& o : c.List(Filter()).items) bytes.append(o->json());
  return bytes;
}

}  // namespace

TEST_CASE("A snapshot round trip restores the objects, the RV and the window byte for byte") {
  Cacher original = NewCacher();
  Feed(original);
  auto decoded = DecodeSnapshot(Encode(original));
  REQUIRE(decoded.ok());
  CHECK(decoded->header.upstream == "https://127.0.0.1:6443");
  CHECK(decoded->header.written_unix_seconds == 1700000000);
  CHECK(decoded->header.type.kind == "Pod");
  CHECK(decoded->resource_version == 14);
  CHECK(decoded->window_start_rv == 10);
  CHECK(decoded->objects.size() == 3);
  CHECK(decoded->events.size() == 4);
  auto state = SnapshotToState(*std::move(decoded));
  REQUIRE(state.ok());
  Cacher restored = NewCacher();
  REQUIRE_FALSE(restored.synced());
  REQUIRE(restored.ImportState(*std::move(state)).ok());
  CHECK(restored.synced());
  CHECK(restored.resource_version() == 14);
  CHECK(ListBytes(restored) == ListBytes(original));
  CHECK_FALSE(ListBytes(restored).empty());
  // Resuming from any RV of the window, with a selector (transitions need the previous
  // states), replays what the original would.
  for (uint64_t rv = 10; rv <= 14; ++rv) {
    for (const std::string labels : {"", "app=web"}) {
      INFO("rv " << rv << " labels " << labels);
      const std::string want =
          WatchBytes(original, Filter("", labels), Cacher::Start::kAfterVersion, rv);
      CHECK(WatchBytes(restored, Filter("", labels), Cacher::Start::kAfterVersion, rv) == want);
      if (rv == 10) CHECK_FALSE(want.empty());
    }
  }
  CHECK_FALSE(restored.Watch({Filter(), Cacher::Start::kAfterVersion, 9, 1 << 20, [] {}}).ok());
  // Live events continue after the restored RV.
  restored.Apply(EventType::kAdded, Pod("c", "later", 15));
  CHECK(restored.resource_version() == 15);
}

TEST_CASE("A cache that has synced does not take a snapshot's state") {
  Cacher original = NewCacher();
  Feed(original);
  auto state = SnapshotToState(*DecodeSnapshot(Encode(original)));
  REQUIRE(state.ok());
  Cacher synced = NewCacher();
  synced.Replace({}, 20);
  CHECK(absl::IsFailedPrecondition(synced.ImportState(*std::move(state))));
  CHECK_FALSE(NewCacher().ExportState().has_value());
}

TEST_CASE("A truncated snapshot is DataLoss at every length") {
  Cacher c = NewCacher();
  Feed(c);
  const std::string bytes = Encode(c);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = DecodeSnapshot(std::string_view(bytes).substr(0, n));
    INFO("length " << n);
    CHECK(absl::IsDataLoss(decoded.status()));
  }
}

TEST_CASE("A snapshot with any byte flipped is refused") {
  Cacher c = NewCacher();
  Feed(c);
  const std::string bytes = Encode(c);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x20);
    auto decoded = DecodeSnapshot(flipped);
    INFO("byte " << i);
    // The version field (bytes 8-11) flipped reads as another version; anything else is loss.
    if (i >= 8 && i < 12) {
      CHECK(absl::IsFailedPrecondition(decoded.status()));
    } else {
      CHECK(absl::IsDataLoss(decoded.status()));
    }
  }
}

TEST_CASE("A snapshot of another format version is FailedPrecondition") {
  Cacher c = NewCacher();
  Feed(c);
  std::string bytes = Encode(c);
  bytes[8] = static_cast<char>(kSnapshotVersion + 1);
  auto decoded = DecodeSnapshot(bytes);
  CHECK(absl::IsFailedPrecondition(decoded.status()));
  CHECK(decoded.status().message().find(absl::StrCat("version ", kSnapshotVersion + 1)) !=
        absl::string_view::npos);
  // Version 1 (JSON only, no encoding byte) is another version too: ignored, not misread.
  bytes[8] = 1;
  CHECK(absl::IsFailedPrecondition(DecodeSnapshot(bytes).status()));
}

TEST_CASE("A version 2 snapshot (the fixed layout) is read as the same state") {
  // Written by the version 2 writer from Feed's cache: it re-encodes as today's snapshot of it.
  const std::string path =
      std::string(kf::testing::kSourceDir) + "/tests/fuzz/corpus/snapshot_fuzz/pods_v2";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream v2;
  v2 << in.rdbuf();
  REQUIRE(v2.str().substr(8, 4) == std::string("\x02\0\0\0", 4));
  auto decoded = DecodeSnapshot(v2.str());
  REQUIRE(decoded.ok());
  CHECK(decoded->objects.size() == 3);
  CHECK(decoded->events.size() == 4);
  const SnapshotHeader header = decoded->header;
  auto state = SnapshotToState(*std::move(decoded));
  REQUIRE(state.ok());
  Cacher c = NewCacher();
  Feed(c);
  CHECK(*EncodeSnapshot(header, *state, 1 << 20) == Encode(c));
}

TEST_CASE("A field a later version adds is skipped") {
  Cacher c = NewCacher();
  Feed(c);
  std::string bytes = Encode(c);
  // Field 99, bytes "later", appended to the payload; its size and CRC-32 made right.
  bytes += std::string("\x9a\x06\x05later", 8);
  const std::string_view payload = std::string_view(bytes).substr(24);
  uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()),
                    static_cast<uInt>(payload.size()));
  for (int i = 0; i < 4; ++i) bytes[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>((payload.size() >> (8 * i)) & 0xff);
  auto decoded = DecodeSnapshot(bytes);
  REQUIRE(decoded.ok());
  const SnapshotHeader header = decoded->header;
  CHECK(*EncodeSnapshot(header, *SnapshotToState(*std::move(decoded)), 1 << 20) == Encode(c));
}

TEST_CASE("A snapshot past its byte bound leaves out the window's oldest events") {
  Cacher c = NewCacher();
  Feed(c);
  const std::string whole = Encode(c);
  // Room for all but about the first event: the window then starts at its RV.
  auto decoded = DecodeSnapshot(Encode(c, whole.size() - 150));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->events.size() < 4);
  REQUIRE_FALSE(decoded->events.empty());
  const uint64_t first_kept = SnapshotToState(*decoded)->events.front()->resource_version();
  CHECK(decoded->window_start_rv == first_kept - 1);
  Cacher restored = NewCacher();
  REQUIRE(restored.ImportState(*SnapshotToState(*std::move(decoded))).ok());
  CHECK_FALSE(restored.Watch({Filter(), Cacher::Start::kAfterVersion, 10, 1 << 20, [] {}}).ok());
  CHECK(restored.Watch({Filter(), Cacher::Start::kAfterVersion, first_kept - 1, 1 << 20, [] {}})
            .ok());
  // Objects alone past the bound: nothing is written.
  auto none = EncodeSnapshot(Header(), *c.ExportState(), 200);
  CHECK(absl::IsResourceExhausted(none.status()));
}

// The seed of tests/fuzz/snapshot_fuzz: this writer's snapshot of the cache above (the
// protobuf one is written by proto_object_test.cc).
TEST_CASE("The snapshot fuzz seed is the writer's snapshot") {
  Cacher c = NewCacher();
  Feed(c);
  const std::string bytes = Encode(c);
  REQUIRE(DecodeSnapshot(bytes).ok());
  testing::CheckFuzzSeed("snapshot_fuzz", "pods", bytes);
}

}  // namespace kf
