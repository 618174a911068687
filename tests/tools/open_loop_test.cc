#include "tests/tools/open_loop.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <vector>

namespace kf::tools {
namespace {

using std::chrono::duration;

std::vector<double> Gaps(uint32_t seed, int n) {
  PoissonGaps gaps(std::chrono::milliseconds(100), seed);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(duration<double>(gaps.Next()).count());
  return out;
}

TEST_CASE("Poisson gaps have the mean asked and vary as an exponential's") {
  const std::vector<double> gaps = Gaps(7, 20000);
  double sum = 0, squares = 0, shortest = 1;
  for (double g : gaps) {
    sum += g;
    squares += g * g;
    shortest = std::min(shortest, g);
  }
  const double mean = sum / static_cast<double>(gaps.size());
  const double sd = std::sqrt(squares / static_cast<double>(gaps.size()) - mean * mean);
  CHECK(mean == Approx(0.100).epsilon(0.03));
  // An exponential's standard deviation is its mean (evenly spaced writes: 0), and gaps much
  // shorter than the mean are common: writers meet by chance.
  CHECK(sd / mean == Approx(1.0).epsilon(0.05));
  CHECK(shortest < 0.001);
}

TEST_CASE("Poisson gaps are the seed's") {
  CHECK(Gaps(7, 50) == Gaps(7, 50));
  CHECK(Gaps(7, 50) != Gaps(8, 50));
}

TEST_CASE("a Poisson writer late by many gaps skips and counts them, and writes at once") {
  // Started an hour ago: every slot up to now is missed.
  OpenLoop loop(std::chrono::steady_clock::now() - std::chrono::hours(1), 0, 1, 10.0, 3u);
  std::atomic<bool> stop{false};
  uint64_t late = 0;
  REQUIRE(loop.Next(stop, &late));
  // About 36,000 slots in an hour at 10 a second.
  CHECK(late > 34000);
  CHECK(late < 38000);
  stop = true;
  CHECK_FALSE(loop.Next(stop, &late));
}

}  // namespace
}  // namespace kf::tools
