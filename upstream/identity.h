// WhoAmI: the user behind a request's credentials, for admission's flows (ByUser) and rules
// (users, groups). kube-fanout asks the apiserver with the client's own credentials
// (a SelfSubjectReview, authentication.k8s.io/v1) and caches the answer per credential, as the
// apiserver's webhook token authenticator caches. No credentials, or ones the apiserver
// rejects: unknown (admission then uses the user agent and address).
//
// One per worker thread; not thread-safe. Bounded.
#ifndef KUBE_FANOUT_UPSTREAM_IDENTITY_H_
#define KUBE_FANOUT_UPSTREAM_IDENTITY_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/expiring_cache.h"
#include "common/single_flight.h"
#include "edge/request.h"
#include "upstream/upstream_pool.h"

namespace kf {

using UserInfo = Identity;  // edge/request.h: who is asking, as the apiserver knows them.

class WhoAmI {
 public:
  WhoAmI(std::chrono::seconds ttl, std::chrono::seconds negative_ttl, size_t max_entries)
      : ttl_(ttl), negative_ttl_(negative_ttl), entries_(max_entries) {}

  // nullopt: unknown (no credentials, rejected, or the upstream unreachable).
  asio::awaitable<std::optional<UserInfo>> Lookup(UpstreamPool& pool,
                                                  const std::string& authorization);
  uint64_t reviews() const { return reviews_; }

  // Parses a SelfSubjectReview response body.
  static std::optional<UserInfo> ParseReview(std::string_view body);

 private:
  asio::awaitable<std::optional<UserInfo>> Review(UpstreamPool& pool,
                                                  const std::string& authorization);

  std::chrono::seconds ttl_, negative_ttl_;
  ExpiringCache<std::optional<UserInfo>> entries_;
  SingleFlight<std::optional<UserInfo>> flights_;  // Lookups on their way.
  uint64_t reviews_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_IDENTITY_H_
