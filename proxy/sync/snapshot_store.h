// SnapshotStore: the files of --cache-snapshot-dir, one per cached resource, for a warm
// restart. At start, Load reads a resource's snapshot (before any upstream contact) and checks
// it: format and checksum, version, upstream, age; anything wrong is one log line and a count,
// and the resource lists as usual. While running, a writer thread writes each synced cache
// whose resourceVersion moved, at most once per interval, bounded in bytes per resource,
// atomically (temporary file, fsync, rename, fsync of the directory: a crash mid-write leaves
// the previous snapshot), and once more on a graceful stop. Secrets are written only when
// configured. A directory that group or others may access is refused (logged; no snapshots).
//
// Thread contract: Open and Load on the main thread before Start; Start/Stop once each.
#ifndef KUBE_FANOUT_SYNC_SNAPSHOT_STORE_H_
#define KUBE_FANOUT_SYNC_SNAPSHOT_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/cacher.h"
#include "cache/snapshot.h"
#include "common/log.h"

namespace kf {

struct SnapshotOptions {
  std::string dir;  // Empty: no snapshots.
  size_t max_bytes = 256u << 20;
  std::chrono::seconds interval{10};
  std::chrono::seconds max_age{600};
  bool include_secrets = false;
};

struct SnapshotStats {
  // Loads by outcome: loaded, missing, corrupt, version, stale, upstream (another upstream's),
  // invalid (objects that do not parse, a different type), refused (the directory's mode).
  enum Result { kLoaded, kMissing, kCorrupt, kVersion, kStale, kUpstream, kInvalid, kCount };
  static const char* ResultName(int result);
  std::atomic<uint64_t> loads[kCount] = {};
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> write_failures{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<bool> disabled{false};  // The directory was refused.
};

class SnapshotStore {
 public:
  SnapshotStore(SnapshotOptions options, const Logger& log);
  ~SnapshotStore();

  // Creates the directory (mode 0700) if missing; refuses one with group or other permissions.
  // False (logged, counted) when snapshots are off for this run.
  bool Open();

  struct Loaded {
    ResourceType type;
    Cacher::State state;
  };
  // The snapshot of group/version/resource's cache in `encoding` taken from `upstream`, if one
  // is there and valid. A protobuf cache without a file is not counted as missing (protobuf
  // caches run only once a client asked for protobuf).
  std::optional<Loaded> Load(const std::string& group, const std::string& version,
                             const std::string& resource, const std::string& upstream,
                             Encoding encoding = Encoding::kJson);

  struct Target {
    const Cacher* cacher;
    std::string upstream;
  };
  // Starts the writer thread over `targets` (which outlive Stop).
  void Start(std::vector<Target> targets);
  // Writes what moved once more and stops the writer.
  void Stop();

  const SnapshotStats& stats() const { return stats_; }
  bool enabled() const { return enabled_; }
  // Secrets are not written unless configured: whether this resource is written.
  bool Writes(const ResourceType& type) const;

 private:
  // What Load was asked for, that a snapshot's header must match.
  struct Expected {
    const std::string& group;
    const std::string& version;
    const std::string& resource;
    const std::string& upstream;
    Encoding encoding;
  };
  // Why a snapshot with header `h`, written `age` seconds ago, is not `want`'s (nullopt: it is).
  std::optional<std::pair<SnapshotStats::Result, std::string>> HeaderProblem(
      const SnapshotHeader& h, const Expected& want, int64_t age) const;
  std::string PathFor(const std::string& group, const std::string& version,
                      const std::string& resource, Encoding encoding) const;
  void WriterLoop();
  void WriteChanged();
  bool WriteOne(const Target& target, const Cacher::State& state);

  const SnapshotOptions options_;
  const Logger& log_;
  SnapshotStats stats_;
  bool enabled_ = false;
  std::vector<Target> targets_;
  std::vector<uint64_t> written_rv_;  // Per target; on the writer thread.
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // Guarded by mu_.
  std::thread writer_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_SNAPSHOT_STORE_H_
