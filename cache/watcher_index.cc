#include "cache/watcher_index.h"

namespace kf {

std::string WatcherIndex::NodeOf(const CachedObject& o) const {
  const std::string* v = o.fields().Get(node_field_);
  return v != nullptr ? *v : std::string();
}

void WatcherIndex::Add(const std::shared_ptr<CacheWatcher>& w) {
  const WatchFilter& f = w->filter();
  std::optional<std::string> node;
  if (!node_field_.empty()) node = f.fields.RequiresExactMatch(node_field_);
  if (f.name) {
    w->index_bucket = kByName;
    w->index_key = *f.name;
  } else if (node) {
    w->index_bucket = kByNode;
    w->index_key = *node;
  } else if (!f.namespace_.empty()) {
    w->index_bucket = kByNamespace;
    w->index_key = f.namespace_;
  } else {
    w->index_bucket = kAll;
    w->index_key.clear();
  }
  buckets_[w->index_bucket][w->index_key].emplace(w.get(), w);
  ++size_;
}

void WatcherIndex::Remove(CacheWatcher* w) {
  if (w->index_bucket < 0) return;
  auto& bucket = buckets_[w->index_bucket];
  auto it = bucket.find(w->index_key);
  if (it == bucket.end()) return;
  if (it->second.erase(w) > 0) --size_;
  if (it->second.empty()) bucket.erase(it);
  w->index_bucket = -1;
}

void WatcherIndex::Collect(Bucket b, const std::string& key,
                           absl::flat_hash_set<CacheWatcher*>* seen,
                           std::vector<std::shared_ptr<CacheWatcher>>* out) const {
  auto it = buckets_[b].find(key);
  if (it == buckets_[b].end()) return;
  for (const auto& [ptr, w] : it->second) {
    if (seen->insert(ptr).second) out->push_back(w);
  }
}

void WatcherIndex::Candidates(const CachedObject* object, const CachedObject* prev,
                              std::vector<std::shared_ptr<CacheWatcher>>* out) const {
  absl::flat_hash_set<CacheWatcher*> seen;
  Collect(kAll, "", &seen, out);
  for (const CachedObject* o : {object, prev}) {
    if (o == nullptr) continue;
    Collect(kByName, o->name(), &seen, out);
    Collect(kByNamespace, o->namespace_(), &seen, out);
    if (!node_field_.empty()) Collect(kByNode, NodeOf(*o), &seen, out);
  }
}

}  // namespace kf
