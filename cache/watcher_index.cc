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
                           std::vector<CacheWatcher*>* out) const {
  auto it = buckets_[b].find(key);
  if (it == buckets_[b].end()) return;
  for (const auto& [ptr, w] : it->second) out->push_back(ptr);
}

void WatcherIndex::Candidates(const CachedObject* object, const CachedObject* prev,
                              std::vector<CacheWatcher*>* out) const {
  // A watcher is in one bucket under one key: each (bucket, key) collected once gives each
  // watcher once, without touching the watchers themselves.
  Collect(kAll, "", out);
  if (object == nullptr) std::swap(object, prev);
  if (object == nullptr) return;
  Collect(kByName, object->name(), out);
  Collect(kByNamespace, object->namespace_(), out);
  const std::string node = node_field_.empty() ? std::string() : NodeOf(*object);
  if (!node_field_.empty()) Collect(kByNode, node, out);
  if (prev == nullptr) return;
  if (prev->name() != object->name()) Collect(kByName, prev->name(), out);
  if (prev->namespace_() != object->namespace_()) Collect(kByNamespace, prev->namespace_(), out);
  if (!node_field_.empty()) {
    const std::string prev_node = NodeOf(*prev);
    if (prev_node != node) Collect(kByNode, prev_node, out);
  }
}

}  // namespace kf
