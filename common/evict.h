// EvictLowest: make room in a bounded map without wiping it. Removes the `count` entries with
// the lowest score(value) (ties broken arbitrarily), in O(n). Used by the caches whose tables a
// client can fill (access reviews, identities, Event spam buckets): a full table loses the
// entries that matter least, never everything at once.
#ifndef KUBE_FANOUT_COMMON_EVICT_H_
#define KUBE_FANOUT_COMMON_EVICT_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kf {

template <typename Map, typename Score>
void EvictLowest(Map& map, size_t count, Score score) {
  if (count == 0 || map.empty()) return;
  if (count >= map.size()) {
    map.clear();
    return;
  }
  using S = decltype(score(map.begin()->second));
  std::vector<S> scores;
  scores.reserve(map.size());
  for (const auto& kv : map) scores.push_back(score(kv.second));
  std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(count - 1),
                   scores.end());
  const S threshold = scores[count - 1];
  // Everything below the threshold goes, then entries at it until `count` are gone.
  size_t below = 0;
  for (const S& s : scores) below += s < threshold ? 1 : 0;
  size_t at_threshold = count - below;
  absl::erase_if(map, [&](const auto& kv) {
    const S s = score(kv.second);
    if (s < threshold) return true;
    if (!(threshold < s) && at_threshold > 0) {
      --at_threshold;
      return true;
    }
    return false;
  });
}

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_EVICT_H_
