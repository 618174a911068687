#include "common/histogram.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

namespace kf::metrics {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("a histogram's buckets are cumulative, with +Inf, its sum in seconds and its count") {
  Histogram h;
  h.Observe(microseconds(500));
  h.Observe(milliseconds(1));  // On a bound: in that bucket (le).
  h.Observe(milliseconds(3));
  h.Observe(seconds(20));  // Past the last bound.
  CHECK(h.count() == 4);
  Writer w;
  h.Write(w, "kf_test_seconds", "A test.");
  const std::string text = w.Take();
  CHECK(text.find("# TYPE kf_test_seconds histogram\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_bucket{le=\"0.001\"} 2\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_bucket{le=\"0.0025\"} 2\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_bucket{le=\"0.005\"} 3\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_bucket{le=\"10\"} 3\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_bucket{le=\"+Inf\"} 4\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_sum 20.0045\n") != std::string::npos);
  CHECK(text.find("kf_test_seconds_count 4\n") != std::string::npos);
}

TEST_CASE("a histogram adds a tally of observations as if observed one by one") {
  Histogram one_by_one, tallied;
  Histogram::Tally tally;
  for (std::chrono::nanoseconds d :
       {std::chrono::nanoseconds(microseconds(500)), std::chrono::nanoseconds(milliseconds(30)),
        std::chrono::nanoseconds(milliseconds(30)), std::chrono::nanoseconds(seconds(11))}) {
    one_by_one.Observe(d);
    tally.Count(d);
  }
  tallied.Add(tally);
  Writer a, b;
  one_by_one.Write(a, "kf_test_seconds", "A test.");
  tallied.Write(b, "kf_test_seconds", "A test.");
  CHECK(a.Take() == b.Take());
  CHECK(tallied.count() == 4);
}

}  // namespace
}  // namespace kf::metrics
