// WatchSlots: the cached watches open at once, bounded in all (--max-watchers) and per user
// (--max-watchers-per-user). A watch past either bound is refused before it starts, as the
// apiserver refuses a request when it is overloaded: 429 TooManyRequests with Retry-After, so
// the client (a reflector) backs off and watches again. The exempt priority level is not
// counted (as --max-passthrough-in-flight).
//
// Shared by every worker; the total is an atomic, the per-user counts a map under a mutex (one
// lock per watch start and end, only when a per-user bound is set).
#ifndef KUBE_FANOUT_SERVE_WATCH_SLOTS_H_
#define KUBE_FANOUT_SERVE_WATCH_SLOTS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kf {

class WatchSlots {
 public:
  // 0: no bound.
  WatchSlots(int64_t max_total, int64_t max_per_user)
      : max_total_(max_total), max_per_user_(max_per_user) {}
  WatchSlots(const WatchSlots&) = delete;
  WatchSlots& operator=(const WatchSlots&) = delete;

  enum class Refused { kNone, kTotal, kPerUser };

  // Held by a watch while it is open; released when destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept
        : owner_(other.owner_), user_(std::move(other.user_)), per_user_(other.per_user_) {
      other.owner_ = nullptr;
    }
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class WatchSlots;
    WatchSlots* owner_ = nullptr;
    std::string user_;
    bool per_user_ = false;
  };

  // A slot for a watch by `user`, or the bound it would pass (`*slot` untouched then).
  Refused Take(std::string_view user, Slot* slot);

  int64_t open() const { return open_.load(std::memory_order_relaxed); }
  uint64_t refused(Refused why) const {
    return why == Refused::kTotal     ? refused_total_.load(std::memory_order_relaxed)
           : why == Refused::kPerUser ? refused_per_user_.load(std::memory_order_relaxed)
                                      : 0;
  }

 private:
  void Release(const Slot& slot) noexcept;

  const int64_t max_total_;
  const int64_t max_per_user_;
  std::atomic<int64_t> open_{0};
  std::atomic<uint64_t> refused_total_{0}, refused_per_user_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> per_user_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_SLOTS_H_
