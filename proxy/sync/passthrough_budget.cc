#include "proxy/sync/passthrough_budget.h"

#include <algorithm>

namespace kf {

bool PassthroughBudget::Take(uint32_t per_second, int64_t now_ns) {
  if (per_second == 0) return false;
  constexpr int64_t kSecond = 1'000'000'000;
  const int64_t step = kSecond / per_second;  // What one read spends.
  int64_t full_at = full_at_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t base = std::max(full_at, now_ns);
    // A second's worth of reads at most ahead of now: the burst.
    if (base + step - now_ns > kSecond) return false;
    if (full_at_.compare_exchange_weak(full_at, base + step, std::memory_order_relaxed)) {
      return true;
    }
  }
}

}  // namespace kf
