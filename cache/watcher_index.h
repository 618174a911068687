// WatcherIndex: the watchers of one resource, bucketed by what they select on, so that
// dispatching an event visits only watchers that could match it: single-object watches by
// metadata.name, pods by spec.nodeName (each kubelet's watch), namespaced watches by
// namespace, and the rest. Not thread-safe: owned by a Cacher, under its lock.
#ifndef KUBE_FANOUT_CACHE_WATCHER_INDEX_H_
#define KUBE_FANOUT_CACHE_WATCHER_INDEX_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache/cache_watcher.h"

namespace kf {

class WatcherIndex {
 public:
  // `node_name_field` is the field indexed for this resource ("spec.nodeName" for pods, "" for
  // none).
  explicit WatcherIndex(std::string node_name_field) : node_field_(std::move(node_name_field)) {}

  void Add(const std::shared_ptr<CacheWatcher>& watcher);
  void Remove(CacheWatcher* watcher);

  // Watchers that could match `object` or `prev` (either may be null), each once (appended to
  // `out`). Valid while the index is not changed.
  void Candidates(const CachedObject* object, const CachedObject* prev,
                  std::vector<CacheWatcher*>* out) const;

  size_t size() const { return size_; }
  // Calls f on every watcher.
  template <class F>
  void ForEach(F f) const {
    for (const auto& bucket : buckets_) {
      for (const auto& [key, set] : bucket) {
        for (const auto& [ptr, w] : set) f(w);
      }
    }
  }

 private:
  enum Bucket { kByName = 0, kByNode = 1, kByNamespace = 2, kAll = 3, kNumBuckets = 4 };
  using Set = absl::flat_hash_map<CacheWatcher*, std::shared_ptr<CacheWatcher>>;
  void Collect(Bucket b, const std::string& key, std::vector<CacheWatcher*>* out) const;
  std::string NodeOf(const CachedObject& o) const;

  std::string node_field_;
  absl::flat_hash_map<std::string, Set> buckets_[kNumBuckets];
  size_t size_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_WATCHER_INDEX_H_
