// VersionDigest: what a resource's objects are, as names and versions: a digest of its (store
// key, resourceVersion) pairs, independent of their order, so the cache's sorted store and the
// upstream's pages give the same digest for the same state without either being copied or
// sorted. What the apiserver's DetectCacheInconsistency compares (its watch cache against etcd
// at one resourceVersion); kube-fanout's self-check (proxy/sync/self_check.h) compares a cache
// with the upstream's list at the cache's exact resourceVersion.
#ifndef KUBE_FANOUT_CACHE_VERSION_DIGEST_H_
#define KUBE_FANOUT_CACHE_VERSION_DIGEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kf {

// One object as a list names it: its store key ("ns/name") and resourceVersion.
struct KeyVersion {
  std::string key;
  uint64_t resource_version = 0;
};

class VersionDigest {
 public:
  void Add(std::string_view key, uint64_t resource_version);
  uint64_t count() const { return count_; }
  uint64_t sum() const { return sum_; }
  bool operator==(const VersionDigest& other) const = default;

 private:
  uint64_t count_ = 0;
  uint64_t sum_ = 0;  // Of each pair's 64-bit hash, modulo 2^64.
};

// A key whose version differs between two lists; 0: absent from that list.
struct VersionDifference {
  std::string key;
  uint64_t cached = 0;
  uint64_t upstream = 0;
};
// The keys `cached` and `upstream` disagree on (a different resourceVersion, or present in only
// one), in key order, at most `max` of them; `total` (if given) is set to how many there are.
std::vector<VersionDifference> DiffVersions(std::vector<KeyVersion> cached,
                                            std::vector<KeyVersion> upstream, size_t max,
                                            size_t* total = nullptr);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_VERSION_DIGEST_H_
