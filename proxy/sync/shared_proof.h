// SharedProof: which reads a resource's next freshness proof answers. Consistent reads (GET and
// LIST without resourceVersion, a WatchList's initial list) each need a proof of the upstream's
// current resourceVersion that started after they arrived; one proof serves every read that
// joined before it started, and a read that joins while a proof is in flight waits for the
// next one. So a resource costs the upstream at most one proof in flight and one batch queued,
// however many clients read it.
//
// Pure bookkeeping, no I/O: the Reflector runs the loop on its own thread (Join, then while
// Start(): prove, Finish). Not thread-safe.
#ifndef KUBE_FANOUT_SYNC_SHARED_PROOF_H_
#define KUBE_FANOUT_SYNC_SHARED_PROOF_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace kf {

class SharedProof {
 public:
  // Called with the proven resourceVersion, or nullopt when the proof failed or was abandoned.
  using Done = std::function<void(std::optional<uint64_t>)>;

  // Queues a read for the next proof that starts. True: no loop is running, the caller starts
  // one (which calls Start until it returns false).
  bool Join(Done done);
  // Takes every read queued so far as the batch of the proof about to start. False (and the
  // loop ends) when none is queued.
  bool Start();
  // Answers the batch of the proof that ended.
  void Finish(std::optional<uint64_t> rv);
  // Answers every read, queued or in flight, with nullopt; the loop ends at its next Start.
  void Abandon();

  // Whether the next proof should wait for the proof spacing: the last one answered more than
  // one read, so reads are arriving faster than proofs end and a pause costs each of them
  // little while it bounds the upstream's proofs per second. A lone sequential reader's proofs
  // answer one read each and follow each other at once: no more than one per read, as direct.
  bool spaced() const { return last_batch_ > 1; }
  bool running() const { return running_; }
  size_t queued() const { return queued_.size(); }
  size_t in_flight() const { return in_flight_.size(); }
  uint64_t proofs_started() const { return started_; }

 private:
  std::vector<Done> queued_;
  std::vector<Done> in_flight_;
  bool running_ = false;
  uint64_t started_ = 0;
  size_t last_batch_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_SHARED_PROOF_H_
