// HealthChecks: kube-fanout's own /healthz, /livez and /readyz, answered the way the apiserver
// answers its own (k8s.io/apiserver/pkg/server/healthz): "ok" when every check passes, the
// verbose "[+]name ok" listing with ?verbose or on failure (HTTP 500), /<endpoint>/<check> for
// one check, 404 for an unknown one.
//
// Checks are registered before serving starts and never change after; the shutting-down flag is
// atomic. Handle() is safe from any thread.
#ifndef KUBE_FANOUT_SERVER_HEALTH_H_
#define KUBE_FANOUT_SERVER_HEALTH_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/api/query.h"

namespace kf {

class HealthChecks {
 public:
  using Check = std::function<absl::Status()>;
  enum class Endpoint { kHealthz, kLivez, kReadyz };

  HealthChecks();

  // Adds a check to the given endpoints. Call before serving.
  void Add(std::string name, std::vector<Endpoint> endpoints, Check check);

  // /readyz fails from now on (the server is draining).
  void SetShuttingDown() { shutting_down_.store(true, std::memory_order_relaxed); }
  bool shutting_down() const { return shutting_down_.load(std::memory_order_relaxed); }

  struct Response {
    int code;
    std::string body;
  };
  // The answer for `path` if it is one of ours, else nullopt.
  std::optional<Response> Handle(std::string_view path, const Query& query) const;
  // Whether `path` is one of the endpoints (Handle answers it).
  static bool Serves(std::string_view path);

 private:
  struct Entry {
    std::string name;
    std::vector<Endpoint> endpoints;
    Check check;
  };
  Response Run(Endpoint endpoint, std::string_view endpoint_name, std::string_view only,
               bool verbose, const Query& query) const;

  std::vector<Entry> checks_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_HEALTH_H_
