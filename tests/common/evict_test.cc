#include "common/evict.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf {
namespace {

TEST_CASE("EvictLowest removes exactly the lowest-scored entries and keeps the rest") {
  absl::flat_hash_map<std::string, int> m;
  for (int i = 0; i < 100; ++i) m[std::to_string(i)] = i % 10;  // Ten of each score 0..9.
  EvictLowest(m, 25, [](int v) { return v; });
  REQUIRE(m.size() == 75);
  int at_two = 0;
  for (const auto& [k, v] : m) {
    CHECK(v >= 2);
    at_two += v == 2 ? 1 : 0;
  }
  CHECK(at_two == 5);  // Scores 0 and 1 all gone, then five of the ten at 2.
  EvictLowest(m, 0, [](int v) { return v; });
  CHECK(m.size() == 75);
  EvictLowest(m, 1000, [](int v) { return v; });
  CHECK(m.empty());
}

}  // namespace
}  // namespace kf
