#include "cache/version_digest.h"

#include <catch2/catch.hpp>

#include "cache/cacher.h"
#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Pod;
using testing::PodsType;

VersionDigest DigestOf(const std::vector<KeyVersion>& pairs) {
  VersionDigest d;
  for (const KeyVersion& p : pairs) d.Add(p.key, p.resource_version);
  return d;
}

TEST_CASE("VersionDigest is the same for the same pairs in any order", "[self_check]") {
  const VersionDigest sorted = DigestOf({{"a/x", 5}, {"a/y", 7}, {"b/z", 9}});
  CHECK(DigestOf({{"b/z", 9}, {"a/x", 5}, {"a/y", 7}}) == sorted);
  CHECK(sorted.count() == 3);
  CHECK(VersionDigest() == DigestOf({}));
}

TEST_CASE("VersionDigest differs for any change to a key, a version or the set", "[self_check]") {
  const VersionDigest base = DigestOf({{"a/x", 5}, {"a/y", 7}, {"b/z", 9}});
  CHECK_FALSE(DigestOf({{"a/x", 5}, {"a/y", 8}, {"b/z", 9}}) == base);              // Modified.
  CHECK_FALSE(DigestOf({{"a/x", 5}, {"b/z", 9}}) == base);                          // Deleted.
  CHECK_FALSE(DigestOf({{"a/x", 5}, {"a/y", 7}, {"b/z", 9}, {"c/w", 2}}) == base);  // Added.
  CHECK_FALSE(DigestOf({{"a/x", 5}, {"a/w", 7}, {"b/z", 9}}) == base);  // Renamed, same count.
  // Two versions swapped between two keys: the same multiset of versions, different pairs.
  CHECK_FALSE(DigestOf({{"a/x", 7}, {"a/y", 5}, {"b/z", 9}}) == base);
  // A key and a version that would read the same run together ("a/x1" + 5 vs "a/x" + 15).
  CHECK_FALSE(DigestOf({{"a/x1", 5}}) == DigestOf({{"a/x", 15}}));
}

TEST_CASE("DiffVersions names the keys that differ, in key order, bounded", "[self_check]") {
  size_t total = 0;
  const auto diffs = DiffVersions({{"b/z", 9}, {"a/x", 5}, {"a/y", 7}, {"c/v", 1}},
                                  {{"a/x", 5}, {"a/y", 8}, {"b/z", 9}, {"c/w", 3}}, 10, &total);
  REQUIRE(diffs.size() == 3);
  CHECK(total == 3);
  CHECK((diffs[0].key == "a/y" && diffs[0].cached == 7 && diffs[0].upstream == 8));
  CHECK((diffs[1].key == "c/v" && diffs[1].cached == 1 && diffs[1].upstream == 0));
  CHECK((diffs[2].key == "c/w" && diffs[2].cached == 0 && diffs[2].upstream == 3));
  CHECK(DiffVersions({{"a/x", 5}}, {{"a/x", 5}}, 10).empty());
  const auto bounded = DiffVersions({{"a", 1}, {"b", 1}, {"c", 1}}, {}, 2, &total);
  CHECK(bounded.size() == 2);
  CHECK(total == 3);
}

TEST_CASE("Cacher::VersionsDigest equals the digest of an upstream list of the same state",
          "[self_check]") {
  Cacher cacher(PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); });
  CHECK_FALSE(cacher.VersionsDigest().has_value());  // Not synced: nothing to check.
  cacher.Replace({Pod("a", "x", 5), Pod("a", "y", 7), Pod("b", "z", 9)}, 10);
  auto d = cacher.VersionsDigest();
  REQUIRE(d.has_value());
  CHECK(d->resource_version == 10);
  CHECK(d->versions == DigestOf({{"b/z", 9}, {"a/x", 5}, {"a/y", 7}}));
  // A list that saw an update the cache missed differs, and the difference is named.
  const std::vector<KeyVersion> upstream = {{"a/x", 5}, {"a/y", 8}, {"b/z", 9}};
  CHECK_FALSE(d->versions == DigestOf(upstream));
  auto at10 = cacher.VersionsAt(10);
  REQUIRE(at10.ok());
  const auto diffs = DiffVersions(*at10, upstream, 10);
  REQUIRE(diffs.size() == 1);
  CHECK(diffs[0].key == "a/y");
}

TEST_CASE("Cacher::VersionsAt gives the state at an older RV of the window, not the current one",
          "[self_check]") {
  Cacher cacher(PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); });
  cacher.Replace({Pod("a", "x", 5), Pod("a", "y", 7)}, 10);
  cacher.Apply(EventType::kModified, Pod("a", "y", 12));
  cacher.Apply(EventType::kAdded, Pod("b", "z", 13));
  auto at10 = cacher.VersionsAt(10);
  REQUIRE(at10.ok());
  CHECK(DiffVersions(*at10, {{"a/x", 5}, {"a/y", 7}}, 10).empty());
  auto now = cacher.VersionsAt(13);
  REQUIRE(now.ok());
  CHECK(DiffVersions(*now, {{"a/x", 5}, {"a/y", 12}, {"b/z", 13}}, 10).empty());
  CHECK_FALSE(cacher.VersionsAt(14).ok());  // Newer than the cache.
  CHECK_FALSE(cacher.VersionsAt(8).ok());   // Before the list: not known.
}

}  // namespace
}  // namespace kf
