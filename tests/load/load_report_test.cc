#include "tests/load/load_report.h"

#include <catch2/catch.hpp>

namespace kf::load {
namespace {

TEST_CASE("CdfPoints ascend to the maximum at fraction one") {
  tools::LatencyHistogram h;
  CHECK(CdfPoints(h).empty());
  for (int64_t us = 1; us <= 10000; ++us) h.RecordNanos(us * 1000);
  const auto points = CdfPoints(h);
  REQUIRE(points.size() >= 30);
  CHECK(points.size() <= 45);
  for (size_t i = 1; i < points.size(); ++i) {
    CHECK(points[i].first > points[i - 1].first);
    CHECK(points[i].second > points[i - 1].second);
  }
  CHECK(points.back().first == 10000);
  CHECK(points.back().second == 1.0);
  CHECK(points.front().second > 0);
}

TEST_CASE("CdfPoints of one repeated value is a single point") {
  tools::LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.RecordNanos(5000);
  const auto points = CdfPoints(h);
  REQUIRE(points.size() == 1);
  CHECK(points[0].first == 5);
  CHECK(points[0].second == 1.0);
}

}  // namespace
}  // namespace kf::load
