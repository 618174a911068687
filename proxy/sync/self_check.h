// SelfCheck: kube-fanout's caches checking themselves against the upstream, as the apiserver's
// DetectCacheInconsistency checks its watch cache against etcd. Every `interval` each synced
// cache (a resource's JSON one, and its protobuf one once started) is compared with the
// upstream's list at the cache's exact resourceVersion (Reflector::CheckConsistency): a cache
// that differs is logged, counted and relisted.
//
// Bounded: one check at a time in the process, spread over the interval (a check every
// interval / caches), never on a cache that has not synced. Runs on the reflectors' thread.
#ifndef KUBE_FANOUT_SYNC_SELF_CHECK_H_
#define KUBE_FANOUT_SYNC_SELF_CHECK_H_

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <vector>

#include "proxy/sync/reflector.h"

namespace kf {

class SelfCheck {
 public:
  // `caches` names the reflectors whose caches to check, asked again every round (a protobuf
  // cache joins once started). `interval` > 0.
  SelfCheck(const asio::any_io_executor& executor, std::chrono::milliseconds interval,
            std::function<std::vector<Reflector*>()> caches);

  asio::awaitable<void> Run();
  void Stop();  // On the executor's thread.

 private:
  asio::steady_timer timer_;
  std::chrono::milliseconds interval_;
  std::function<std::vector<Reflector*>()> caches_;
  bool stopped_ = false;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_SELF_CHECK_H_
