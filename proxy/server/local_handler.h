// LocalHandler: what kube-fanout answers about itself: /healthz, /livez, /readyz (health.h)
// and /metrics (the Prometheus text format, rendered on demand by the server's function).
// Shared by every worker; HealthChecks is thread-safe, the render function must be too.
#ifndef KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_
#define KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_

#include <functional>
#include <string>

#include "proxy/edge/filter.h"
#include "proxy/server/health.h"
#include "proxy/upstream/access_review.h"
#include "proxy/upstream/identity.h"

namespace kf {

class LocalHandler : public Handler {
 public:
  LocalHandler(const HealthChecks& health, std::function<std::string()> metrics)
      : health_(health), metrics_(std::move(metrics)) {}

  static bool Serves(std::string_view path) {
    return path == "/metrics" || HealthChecks::Serves(path);
  }
  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  const HealthChecks& health_;
  std::function<std::string()> metrics_;
};

// ApiMetricsHandler: the local paths on the TLS API listener, where /metrics is authorized as the
// apiserver authorizes its own: a non-resource SubjectAccessReview (verb get, path /metrics) for
// the request's user. Allowed: kube-fanout's metrics. Anyone else (anonymous, a credential the
// apiserver rejects, a user RBAC does not allow, a review that got no answer) is declined and
// passes through, so the apiserver gives its own answer (its 401 or 403, byte for byte). Health
// paths are served to all, as the apiserver serves them (system:public-info-viewer). The
// --metrics-listen listener keeps LocalHandler itself, unauthenticated, for Prometheus, and so
// does the plain --listen, a loopback one (a sidecar's) that only its pod reaches.
//
// One per worker thread (the Authenticator, AccessReview and pool are that thread's).
class ApiMetricsHandler : public Handler {
 public:
  ApiMetricsHandler(Handler& local, Authenticator& authn, AccessReview& access,
                    UpstreamPool& own_pool)
      : local_(local), authn_(authn), access_(access), own_pool_(own_pool) {}

  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  Handler& local_;
  Authenticator& authn_;
  AccessReview& access_;
  UpstreamPool& own_pool_;
};

// NotFoundHandler: the --metrics-listen listener's answer to anything that is not one of
// LocalHandler's paths: Go's 404 "404 page not found", so that listener serves nothing else.
class NotFoundHandler : public Handler {
 public:
  asio::awaitable<bool> Serve(Exchange& x) override;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_
