#include "proxy/sync/passthrough_budget.h"

#include <algorithm>

namespace kf {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
// How far past now the reads counted may reach: a storm stops counting there, so its reads
// pass again about a second after it ends.
constexpr int64_t kMemory = 2 * kSecond;

}  // namespace

bool PassthroughBudget::Take(uint32_t per_second, int64_t now_ns) {
  if (per_second == 0) return false;
  const int64_t step = kSecond / per_second;  // What one read counts for.
  int64_t full_at = full_at_.load(std::memory_order_relaxed);
  for (;;) {
    // Every read counts, passed or not: past the rate none passes.
    const int64_t next = std::min(std::max(full_at, now_ns) + step, now_ns + kMemory);
    if (full_at_.compare_exchange_weak(full_at, next, std::memory_order_relaxed)) {
      return next - now_ns <= kSecond;
    }
  }
}

}  // namespace kf
