#include "proxy/sync/shared_proof.h"

#include <utility>

namespace kf {

bool SharedProof::Join(Done done) {
  queued_.push_back(std::move(done));
  if (running_) return false;
  running_ = true;
  return true;
}

bool SharedProof::Start() {
  if (queued_.empty()) {
    running_ = false;
    return false;
  }
  // Everyone queued now arrived before this proof starts: it answers them all. Those who
  // arrive from here on wait for the next.
  in_flight_ = std::exchange(queued_, {});
  ++started_;
  return true;
}

void SharedProof::Finish(std::optional<uint64_t> rv) {
  last_batch_ = in_flight_.size();
  for (Done& done : std::exchange(in_flight_, {})) done(rv);
}

void SharedProof::Abandon() {
  for (Done& done : std::exchange(in_flight_, {})) done(std::nullopt);
  for (Done& done : std::exchange(queued_, {})) done(std::nullopt);
}

}  // namespace kf
