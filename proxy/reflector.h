// Reflector: the one upstream LIST + WATCH of one cached resource. Lists (paginated, consistent)
// into the Cacher, then watches from the list's resourceVersion with bookmarks on; a watch that
// drops or times out resumes from the cache's RV without relisting; only a 410 relists, and the
// Cacher turns the difference into events so downstream watches continue. Backs off with
// jitter between failures; endpoint failover is the pool's and keeps the RV.
//
// Runs as a coroutine on one io thread; uses kube-fanout's own credentials.
#ifndef KUBE_FANOUT_PROXY_REFLECTOR_H_
#define KUBE_FANOUT_PROXY_REFLECTOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "cache/cacher.h"
#include "common/log.h"
#include "proxy/upstream_client.h"

namespace kf {

struct ReflectorStats {
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> watches{0};  // Upstream watch requests made.
  std::atomic<uint64_t> relists{0};  // LISTs after the first.
  std::atomic<uint64_t> errors{0};
};

class Reflector {
 public:
  // `credentials` returns the Authorization header for kube-fanout's own requests.
  Reflector(Cacher& cacher, UpstreamPool& pool, std::function<std::string()> credentials,
            const Logger& log);

  asio::awaitable<void> Run();
  void Stop();

  const ReflectorStats& stats() const { return stats_; }
  // The collection path, e.g. "/apis/discovery.k8s.io/v1/endpointslices".
  std::string CollectionPath() const;

 private:
  enum class WatchEnd { kEnded, kExpired, kFailed };
  asio::awaitable<absl::Status> ListAll();
  asio::awaitable<WatchEnd> WatchOnce();
  asio::awaitable<void> ProbeBookmarkTemplate();
  asio::awaitable<void> Backoff();

  Cacher& cacher_;
  UpstreamPool& pool_;
  std::function<std::string()> credentials_;
  const Logger& log_;
  ReflectorStats stats_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::chrono::milliseconds backoff_{0};
  bool stopped_ = false;
  UpstreamWatch* active_ = nullptr;
  bool listed_once_ = false;
};

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_REFLECTOR_H_
