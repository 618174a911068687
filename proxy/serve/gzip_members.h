// GzipMembers: one thread's watch batches compressed as gzip members, shared by the gzip watches
// on that thread. A compressed watch (WatchListCompression, watch_gzip.h) is a sequence of gzip
// members (RFC 1952 2.2: members simply follow one another); an event batch delivered to many
// watchers (the same frame pieces: an event's type prefix, its object's shared bytes, the tail)
// is compressed once per thread, not once per watcher.
//
// Keyed by the pieces' bytes (addresses and sizes), which stay put while their owners live:
// each entry holds weak references to the owners, so pieces freed and others allocated at the
// same addresses are never served the old member; a piece without an owner is static data
// (Piece). Bounded by entries and compressed bytes; the oldest entries go first (a live event
// is looked up by all its watchers within one fan-out). Touched only on its thread (owned by
// that thread's Wakeups).
#ifndef KUBE_FANOUT_SERVE_GZIP_MEMBERS_H_
#define KUBE_FANOUT_SERVE_GZIP_MEMBERS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

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

  // `pieces`, in order, as one gzip member (edge/gzip.h's Gzip), compressed at most once while
  // it is kept.
  std::shared_ptr<const std::string> Get(std::span<const Piece> pieces);
  std::shared_ptr<const std::string> Get(const Piece& piece) { return Get({&piece, 1}); }

  size_t entries() const { return map_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  using Key = std::vector<std::pair<const char*, size_t>>;
  struct Entry {
    std::vector<std::weak_ptr<const void>> owners;  // Of the pieces that have one.
    std::shared_ptr<const std::string> member;
    bool Live() const;
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
