#include "cache/version_digest.h"

#include <algorithm>

namespace kf {
namespace {

// FNV-1a over the key, a separator no key holds, and the version; then SplitMix64's finalizer,
// so that a sum of hashes does not let two changes cancel by their low bits.
uint64_t PairHash(std::string_view key, uint64_t rv) {
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : key) mix(static_cast<unsigned char>(c));
  mix(0);
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(rv >> (8 * i)));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

bool ByKey(const KeyVersion& a, const KeyVersion& b) { return a.key < b.key; }

}  // namespace

void VersionDigest::Add(std::string_view key, uint64_t resource_version) {
  ++count_;
  sum_ += PairHash(key, resource_version);
}

std::vector<VersionDifference> DiffVersions(std::vector<KeyVersion> cached,
                                            std::vector<KeyVersion> upstream, size_t max,
                                            size_t* total) {
  std::sort(cached.begin(), cached.end(), ByKey);
  std::sort(upstream.begin(), upstream.end(), ByKey);
  std::vector<VersionDifference> out;
  size_t n = 0;
  const auto note = [&](const std::string& key, uint64_t c, uint64_t u) {
    if (out.size() < max) out.push_back({key, c, u});
    ++n;
  };
  auto c = cached.begin();
  auto u = upstream.begin();
  while (c != cached.end() || u != upstream.end()) {
    if (u == upstream.end() || (c != cached.end() && c->key < u->key)) {
      note(c->key, c->resource_version, 0);
      ++c;
    } else if (c == cached.end() || u->key < c->key) {
      note(u->key, 0, u->resource_version);
      ++u;
    } else {
      if (c->resource_version != u->resource_version)
        note(c->key, c->resource_version, u->resource_version);
      ++c;
      ++u;
    }
  }
  if (total != nullptr) *total = n;
  return out;
}

}  // namespace kf
