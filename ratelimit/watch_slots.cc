#include "ratelimit/watch_slots.h"

#include "common/strings.h"

namespace kf {

WatchSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(*this);
}

WatchSlots::Refused WatchSlots::Take(std::string_view user, Slot* slot) {
  if (open_.fetch_add(1, std::memory_order_relaxed) >= max_total_ && max_total_ > 0) {
    open_.fetch_sub(1, std::memory_order_relaxed);
    refused_total_.fetch_add(1, std::memory_order_relaxed);
    return Refused::kTotal;
  }
  if (max_per_user_ > 0) {
    absl::MutexLock lock(&mu_);
    int64_t& n = per_user_[ToAbsl(user)];
    if (n >= max_per_user_) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      refused_per_user_.fetch_add(1, std::memory_order_relaxed);
      return Refused::kPerUser;
    }
    ++n;
    slot->user_ = std::string(user);
    slot->per_user_ = true;
  }
  slot->owner_ = this;
  return Refused::kNone;
}

void WatchSlots::Release(const Slot& slot) noexcept {
  open_.fetch_sub(1, std::memory_order_relaxed);
  if (!slot.per_user_) return;
  absl::MutexLock lock(&mu_);
  auto it = per_user_.find(slot.user_);
  if (it != per_user_.end() && --it->second <= 0) per_user_.erase(it);
}

}  // namespace kf
