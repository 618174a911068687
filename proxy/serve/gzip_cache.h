// GzipCache: compressed answers kept by their identity, so that a large LIST asked by many
// clients at the same resourceVersion is compressed once and its bytes shared. The identity is
// the caller's (for a LIST: resource, encoding, the list's RV, the request's target, the
// uncompressed length): the same identity must stand for the same uncompressed bytes, and the
// bytes kept are what Gzip (proxy/edge/gzip.h) made of them, so a shared answer is byte for byte
// the one its own compression would have made.
//
// Bounded by the bytes kept (compressed bytes and keys); the least recently used go first, and
// an answer larger than the whole bound is compressed but not kept. A caller asking for an identity
// another thread is compressing waits for that one instead of compressing it too (so Get may block:
// call it from the list pool's threads, list_pool.h), unless it asks not to wait (an I/O thread,
// when there is no pool): then it compresses too.
//
// Thread-safe.
#ifndef KUBE_FANOUT_SERVE_GZIP_CACHE_H_
#define KUBE_FANOUT_SERVE_GZIP_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace kf {

class GzipCache {
 public:
  using Bytes = std::shared_ptr<const std::string>;

  // `max_bytes` 0: nothing kept (every answer compressed anew, concurrent asks aside).
  explicit GzipCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  GzipCache(const GzipCache&) = delete;
  GzipCache& operator=(const GzipCache&) = delete;

  // The compressed bytes for `key`: kept ones, or `compress()`'s (then kept if they fit).
  // `wait` false: never blocks on another thread's compression of the same key.
  Bytes Get(const std::string& key, absl::FunctionRef<std::string()> compress, bool wait = true);

  struct Stats {
    uint64_t shared = 0;      // Answers served from kept bytes.
    uint64_t compressed = 0;  // Answers compressed.
    uint64_t evicted = 0;
    size_t entries = 0;
    size_t bytes = 0;  // Kept: compressed bytes and keys.
  };
  Stats GetStats() const;

 private:
  struct Entry {
    std::string key;
    Bytes bytes;
  };
  using Lru = std::list<Entry>;  // Most recently used first.

  void KeepLocked(const std::string& key, Bytes bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Lru::iterator> index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> compressing_ ABSL_GUARDED_BY(mu_);
  absl::CondVar done_;  // Signalled when an identity leaves `compressing_`.
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t shared_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t compressed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_GZIP_CACHE_H_
