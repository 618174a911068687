#include "serve/watch_stream.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("WatchDeadline follows the apiserver's timeoutSeconds arithmetic without overflowing") {
  const auto now = std::chrono::steady_clock::now();
  CHECK(WatchDeadline(now, 5) == now + std::chrono::seconds(5));
  // Absent or 0: the apiserver's random default in [1800 s, 3600 s).
  const auto d = WatchDeadline(now, 0) - now;
  CHECK(d >= std::chrono::seconds(1800));
  CHECK(d < std::chrono::seconds(3600));
  // time.Duration(n) * time.Second wraps: a negative product has already passed...
  CHECK(WatchDeadline(now, 9223372037) == now);
  // ... the largest values end somewhere far away (capped), and nothing overflows.
  CHECK(WatchDeadline(now, 9223372036) > now + std::chrono::hours(24 * 365 * 99));
  CHECK(WatchDeadline(now, INT64_MAX) >= now);
  CHECK(WatchDeadline(now, 18446744074) >= now);
}

}  // namespace
}  // namespace kf
