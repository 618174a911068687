// Server::TlsListenerFull: when the TLS accept loop lets new clients wait in the listen queue.
#include <algorithm>

#include "proxy/server/server.h"

namespace kf {

bool Server::TlsListenerFull() {
  const bool full = std::all_of(
      workers_.begin(), workers_.begin() + static_cast<std::ptrdiff_t>(session_workers_),
      [](const std::unique_ptr<Worker>& w) {
        return w->handshakes_pending().load() >= Worker::kMaxHandshakesPending;
      });
  if (!full) return false;
  const uint64_t pauses = accept_paused_.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_pause_log_ >= std::chrono::seconds(10)) {
    last_pause_log_ = now;
    log_.Warning("TLS handshakes behind: new connections wait in the listen queue",
                 {{"handshakes_waiting_per_thread", Worker::kMaxHandshakesPending},
                  {"accept_pauses_so_far", static_cast<int64_t>(pauses)}});
  }
  return true;
}

}  // namespace kf
