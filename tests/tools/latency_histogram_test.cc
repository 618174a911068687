#include "tests/tools/latency_histogram.h"

#include <catch2/catch.hpp>

namespace kf::tools {
namespace {

TEST_CASE("LatencyHistogram percentiles are within 2% of the exact values") {
  LatencyHistogram h;
  for (int64_t us = 1; us <= 100000; ++us) h.RecordNanos(us * 1000);
  CHECK(h.count() == 100000);
  CHECK(h.max_us() == 100000);
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = q * 100000;
    CAPTURE(q);
    CHECK(static_cast<double>(h.PercentileMicros(q)) == Approx(exact).epsilon(0.02));
  }
  CHECK(h.PercentileMicros(1.0) == 100000);
}

TEST_CASE("LatencyHistogram is exact below 128 µs, counts negatives as zero and merges") {
  LatencyHistogram a, b;
  a.RecordNanos(-5);
  a.RecordNanos(42'000);
  b.RecordNanos(42'999);
  b.RecordNanos(127'000);
  a.Merge(b);
  CHECK(a.count() == 4);
  CHECK(a.PercentileMicros(0.25) == 0);
  CHECK(a.PercentileMicros(0.75) == 42);
  CHECK(a.PercentileMicros(1.0) == 127);
  CHECK(LatencyHistogram().PercentileMicros(0.5) == 0);
}

}  // namespace
}  // namespace kf::tools
