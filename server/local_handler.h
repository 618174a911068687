// LocalHandler: what kube-fanout answers about itself: /healthz, /livez, /readyz (health.h)
// and /metrics (the Prometheus text format, rendered on demand by the server's function).
// Shared by every worker; HealthChecks is thread-safe, the render function must be too.
#ifndef KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_
#define KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_

#include <functional>
#include <string>

#include "edge/filter.h"
#include "server/health.h"

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

// NotFoundHandler: the --metrics-listen listener's answer to anything that is not one of
// LocalHandler's paths: Go's 404 "404 page not found", so that listener serves nothing else.
class NotFoundHandler : public Handler {
 public:
  asio::awaitable<bool> Serve(Exchange& x) override;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_LOCAL_HANDLER_H_
