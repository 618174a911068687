#include "proxy/serve/wakeups.h"

#include <boost/asio/post.hpp>

#include "proxy/edge/batched_sends.h"

namespace kf {

NotifySink::Ref Wakeups::Register(Wakeable* w) {
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.wakeable = w;
  return Ref{slot, s.generation};
}

void Wakeups::Unregister(Ref ref) {
  if (ref.slot >= slots_.size()) return;
  Slot& s = slots_[ref.slot];
  if (s.generation != ref.generation || s.wakeable == nullptr) return;
  s.wakeable = nullptr;
  ++s.generation;  // Wake-ups still pending for it find another generation.
  free_.push_back(ref.slot);
}

void Wakeups::Notify(std::span<const Ref> refs) {
  if (refs.empty()) return;
  bool post = false;
  {
    absl::MutexLock lock(&mu_);
    pending_.insert(pending_.end(), refs.begin(), refs.end());
    post = !posted_;
    posted_ = true;
  }
  if (post) asio::post(exec_, [this] { Drain(); });
}

void Wakeups::Drain() {
  {
    absl::MutexLock lock(&mu_);
    running_.swap(pending_);
    posted_ = false;
  }
  // Each wake-up reads a different watch's objects, mostly cache misses, each found through the
  // one before. So they are fetched in stages while earlier watches are served: the slot kSlot
  // ahead, the watch kFar ahead, what its lines point to kNear ahead (Prefetch), and what those
  // point to kDeep ahead (PrefetchDeep). A watch is looked up again when its turn comes: an
  // earlier wake-up may have ended it.
  constexpr size_t kSlot = 16;
  constexpr size_t kFar = 8;
  constexpr size_t kNear = 4;
  constexpr size_t kDeep = 2;
  const size_t n = running_.size();
  auto live = [this](const Ref& r) -> Wakeable* {
    if (r.slot >= slots_.size()) return nullptr;
    const Slot& s = slots_[r.slot];
    return s.generation == r.generation ? s.wakeable : nullptr;
  };
  auto slot_at = [this](const Ref& r) {
    if (r.slot < slots_.size()) __builtin_prefetch(&slots_[r.slot]);
  };
  {
    // The wake-ups' HTTP/1.1 writes go to the kernel together (BatchedSends), their
    // results told to each watch when the burst ends (before the drain's end, whatever happens).
    const BatchedSends::Burst burst;
    for (size_t i = 0; i < n && i < kSlot; ++i) slot_at(running_[i]);
    for (size_t i = 0; i < n && i < kFar; ++i) {
      if (const Wakeable* w = live(running_[i])) __builtin_prefetch(w);
    }
    for (size_t i = 0; i < n && i < kNear; ++i) {
      if (const Wakeable* w = live(running_[i])) w->Prefetch();
    }
    for (size_t i = 0; i < n && i < kDeep; ++i) {
      if (const Wakeable* w = live(running_[i])) w->PrefetchDeep();
    }
    for (size_t i = 0; i < n; ++i) {
      if (i + kSlot < n) slot_at(running_[i + kSlot]);
      if (i + kFar < n) {
        if (const Wakeable* w = live(running_[i + kFar])) __builtin_prefetch(w);
      }
      if (i + kNear < n) {
        if (const Wakeable* w = live(running_[i + kNear])) w->Prefetch();
      }
      if (i + kDeep < n) {
        if (const Wakeable* w = live(running_[i + kDeep])) w->PrefetchDeep();
      }
      if (Wakeable* w = live(running_[i])) w->Wake();
    }
  }
  running_.clear();
  if (after_drain_ != nullptr) after_drain_();
}

}  // namespace kf
