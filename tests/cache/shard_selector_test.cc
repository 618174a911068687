#include "cache/shard_selector.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kf {
namespace {

TEST_CASE("ShardSelector hashes a value as the apiserver's FNV-1a 64") {
  CHECK(ShardSelector::Hash("") == 0xcbf29ce484222325ULL);
  CHECK(ShardSelector::Hash("a") == 0xaf63dc4c8601ec8cULL);
  // A uid the rig's apiserver put in the lower half of its sharded LIST.
  CHECK(ShardSelector::Hash("7f5bf67f-3240-403e-9ff2-a3a30c7b609e") == 0x63d03ddec1e8dcecULL);
}

TEST_CASE("ShardSelector echoes the apiserver's normal form of ranges joined with ||") {
  auto s = ShardSelector::Parse(
      " ( shardRange(object.metadata.uid,'0x0000000000000000','0x4000000000000000') )||\n"
      "shardRange( object . metadata . uid , \"0xc000000000000000\" , '0x10000000000000000' ) ");
  REQUIRE(s.ok());
  CHECK(s->String() ==
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || "
        "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')");
  CHECK_FALSE(s->Empty());
  CHECK(ShardSelector().Empty());
  CHECK(ShardSelector().String().empty());
}

TEST_CASE("ShardSelector matches the half-open ranges of the selected field's hash") {
  auto s = ShardSelector::Parse(
      "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000') || "
      "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')");
  REQUIRE(s.ok());
  auto uid = [](uint64_t h) { return ShardHashes{.uid = h, .namespace_ = 0x5000000000000000}; };
  CHECK_FALSE(s->Matches(uid(0x3fffffffffffffffULL)));
  CHECK(s->Matches(uid(0x4000000000000000ULL)));  // Start is inclusive.
  CHECK(s->Matches(uid(0x7fffffffffffffffULL)));
  CHECK_FALSE(s->Matches(uid(0x8000000000000000ULL)));  // End is exclusive.
  CHECK(s->Matches(uid(0xffffffffffffffffULL)));        // 2^64 reaches the top.
  CHECK(ShardSelector().Matches(uid(0)));

  auto by_ns = ShardSelector::Parse(
      "shardRange(object.metadata.namespace,'0x0000000000000000','0x4000000000000000')");
  REQUIRE(by_ns.ok());
  CHECK(by_ns->Matches(ShardHashes{.uid = 0xffffffffffffffffULL, .namespace_ = 1}));
  CHECK_FALSE(by_ns->Matches(ShardHashes{.uid = 0, .namespace_ = 0x4000000000000000ULL}));
  CHECK(by_ns->Matches(ShardHashes::Of("u", "ns")));  // "ns" hashes to 0x08b3….
}

TEST_CASE("ShardSelector leaves to the apiserver what it refuses or words itself") {
  const std::string lo = "'0x0000000000000000'";
  const std::string hi = "'0x8000000000000000'";
  const std::vector<std::string> refused = {
      std::string(""),
      std::string("   "),
      std::string("bad("),
      "shardRange(object.metadata.uid,'0x0'," + hi + ")",                 // Not 16 digits.
      "shardRange(object.metadata.uid,'0x000000000000000A'," + hi + ")",  // Upper case.
      "shardRange(object.metadata.uid," + hi + "," + lo + ")",            // start >= end.
      "shardRange(object.metadata.uid," + hi + "," + hi + ")",
      "shardRange(object.metadata.uid,'0x10000000000000000','0x10000000000000000')",
      "shardRange(object.metadata.uid,'0x20000000000000000'," + hi + ")",
      "shardRange(object.metadata.name," + lo + "," + hi + ")",  // Not a shard field.
      "shardRange(metadata.uid," + lo + "," + hi + ")",
      "shardRange(object.metadata.uid," + lo + "," + hi + ") ||",
      "shardRange(object.metadata.uid," + lo + "," + hi +
          ") || shardRange(object.metadata.namespace," + lo + "," + hi + ")",
      "shardRange(object.metadata.uid," + lo + "," + hi + ") && true",
      "shardRange(object.metadata.uid,'\\x30x0000000000000000'," + hi + ")",  // Escapes.
      "shardRange(object.metadata.uid,r" + lo + "," + hi + ")",
      "shardRange(object.metadata.uid," + lo + "," + hi + ") // comment",
      "shardRange(object.metadata.uid," + lo + "," + hi + ",'x')",
      "(shardRange(object.metadata.uid," + lo + "," + hi + ")",
  };
  for (const std::string& bad : refused) {
    INFO(bad);
    CHECK_FALSE(ShardSelector::Parse(bad).ok());
  }
  std::string many;
  for (size_t i = 0; i <= ShardSelector::kMaxRanges; ++i) {
    if (i > 0) many += "||";
    many += "shardRange(object.metadata.uid," + lo + "," + hi + ")";
  }
  CHECK_FALSE(ShardSelector::Parse(many).ok());
}

}  // namespace
}  // namespace kf
