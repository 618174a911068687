// GzipMembers: one thread's watch frames compressed as gzip members, shared by the gzip watches
// on that thread. A compressed watch (WatchListCompression, watch_gzip.h) is a sequence of gzip
// members (RFC 1952 2.2: members simply follow one another); an event delivered to many
// watchers is compressed once per thread, not once per watcher.
//
// Keyed by the frame's bytes (address and size), which stay put while their owner lives: each
// entry holds a weak reference to the owner, so a frame freed and another allocated at the
// same address is never served the old member. Bounded by entries and compressed bytes; the
// oldest entries go first (live events are looked up by all their watchers within one fan-out).
// Touched only on its thread (owned by that thread's Wakeups).
#ifndef KUBE_FANOUT_SERVE_GZIP_MEMBERS_H_
#define KUBE_FANOUT_SERVE_GZIP_MEMBERS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "cache/watch_event.h"

namespace kf {

class GzipMembers {
 public:
  static constexpr size_t kMaxEntries = 4096;
  static constexpr size_t kMaxBytes = 8u << 20;

  GzipMembers() = default;
  GzipMembers(const GzipMembers&) = delete;
  GzipMembers& operator=(const GzipMembers&) = delete;

  // `frame` as one gzip member (edge/gzip.h's Gzip), compressed at most once while it is kept.
  // A frame without an owner is compressed anew each time.
  std::shared_ptr<const std::string> Get(const Piece& frame);

  size_t entries() const { return map_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  using Key = std::pair<const char*, size_t>;
  struct Entry {
    std::weak_ptr<const void> owner;
    std::shared_ptr<const std::string> member;
  };
  void Evict();

  absl::flat_hash_map<Key, Entry> map_;
  std::deque<Key> order_;  // Oldest first; a key replaced in place keeps its place.
  size_t bytes_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_GZIP_MEMBERS_H_
