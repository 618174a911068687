#include "proxy/serve/gzip_cache.h"

namespace kf {

GzipCache::Bytes GzipCache::Get(const std::string& key, absl::FunctionRef<std::string()> compress,
                                bool wait) {
  bool registered = false;  // In `compressing_`: others wait for this thread's bytes.
  {
    absl::MutexLock lock(&mu_);
    // The same answer being compressed by another thread: its bytes, once they are there.
    while (wait && compressing_.contains(key)) done_.Wait(&mu_);
    if (const auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++shared_;
      return it->second->bytes;
    }
    registered = compressing_.insert(key).second;
  }
  Bytes bytes;
  try {
    bytes = std::make_shared<const std::string>(compress());
  } catch (...) {
    absl::MutexLock lock(&mu_);
    if (registered) compressing_.erase(key);
    done_.SignalAll();
    throw;
  }
  absl::MutexLock lock(&mu_);
  if (registered) compressing_.erase(key);
  ++compressed_;
  KeepLocked(key, bytes);
  done_.SignalAll();
  return bytes;
}

void GzipCache::KeepLocked(const std::string& key, Bytes bytes) {
  // An identity's key counts too: a target of kilobytes must not make a small answer free.
  // Nothing (a compressor that could not start) is not kept either, nor a second copy (a
  // caller that did not wait may finish after the one it did not wait for).
  const size_t size = key.size() + bytes->size();
  if (bytes->empty() || size > max_bytes_ || index_.contains(key)) return;
  bytes_ += size;
  lru_.push_front(Entry{key, std::move(bytes)});
  index_[key] = lru_.begin();
  while (bytes_ > max_bytes_) {
    const Entry& oldest = lru_.back();
    bytes_ -= oldest.key.size() + oldest.bytes->size();
    index_.erase(oldest.key);
    lru_.pop_back();
    ++evicted_;
  }
}

GzipCache::Stats GzipCache::GetStats() const {
  absl::MutexLock lock(&mu_);
  return Stats{.shared = shared_,
               .compressed = compressed_,
               .evicted = evicted_,
               .entries = lru_.size(),
               .bytes = bytes_};
}

}  // namespace kf
