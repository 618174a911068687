// ExpiringCache: answers kept until they expire, in a table a client can fill (one entry per
// credential and question), so it is bounded: a full table loses the eighth of its entries
// nearest their expiry, never everything at once (evict.h). Used by the access-review and
// identity caches. Not thread-safe (one per worker thread).
#ifndef KUBE_FANOUT_COMMON_EXPIRING_CACHE_H_
#define KUBE_FANOUT_COMMON_EXPIRING_CACHE_H_

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "common/evict.h"

namespace kf {

template <typename V>
class ExpiringCache {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    V value;
    Clock::time_point expires;
    bool fresh(Clock::time_point now) const { return expires > now; }
  };

  explicit ExpiringCache(size_t max_entries) : max_entries_(max_entries) {}

  // The entry for `key`, expired or not; null if there is none.
  const Entry* Find(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void Erase(const std::string& key) { entries_.erase(key); }
  void Put(const std::string& key, V value, Clock::time_point expires) {
    if (entries_.size() >= max_entries_ && !entries_.contains(key)) {
      EvictLowest(entries_, std::max<size_t>(1, entries_.size() / 8),
                  [](const Entry& e) { return e.expires; });
    }
    entries_[key] = Entry{std::move(value), expires};
  }
  size_t size() const { return entries_.size(); }

 private:
  size_t max_entries_;
  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_EXPIRING_CACHE_H_
