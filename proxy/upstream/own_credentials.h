// OwnCredentials: the Authorization header for kube-fanout's own upstream requests, from a
// static token or a token file re-read once a minute (projected ServiceAccount tokens rotate),
// as client-go does. Thread-safe.
#ifndef KUBE_FANOUT_UPSTREAM_OWN_CREDENTIALS_H_
#define KUBE_FANOUT_UPSTREAM_OWN_CREDENTIALS_H_

#include <chrono>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "proxy/upstream/upstream_config.h"

namespace kf {

class OwnCredentials {
 public:
  explicit OwnCredentials(const UpstreamConfig& config)
      : token_(config.token), token_file_(config.token_file) {}

  // "Bearer <token>", or "" when kube-fanout authenticates by client certificate only.
  std::string Header() {
    absl::MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    if (!token_file_.empty() && now >= next_read_) {
      if (auto t = ReadFile(token_file_); t.ok())
        token_ = std::string(absl::StripAsciiWhitespace(*t));
      next_read_ = now + std::chrono::minutes(1);
    }
    return token_.empty() ? std::string() : "Bearer " + token_;
  }

 private:
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  const std::string token_file_;
  std::chrono::steady_clock::time_point next_read_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_OWN_CREDENTIALS_H_
