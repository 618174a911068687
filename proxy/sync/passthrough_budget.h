// PassthroughBudget: which consistent GETs of one cached resource go to the apiserver at once
// instead of waiting for a freshness proof (Reflector::TakeConsistentGetPassthrough): those that
// arrive while the resource's consistent GETs, counted over about the last second, stay within
// a rate. A consistent GET costs the apiserver one object read from etcd; the proof that would
// serve it from the cache is a LIST (below 500 objects the metadata of every one: 690 KB and
// ~100 ms for 460 pods on a busy two-core machine, where the GET takes ~5-40 ms), so a proof
// shared by few reads costs the apiserver more than the reads, and each read waits for it, and
// for the proof already in flight when it came. A kubelet's status manager GETs each pod before
// it writes the pod's status, one pod after another: those waits add up to its pods' start.
// Reads that come faster than the rate share proofs well (a DaemonSet's lookups: ~25 a proof),
// so every read counts, passed or not, and past the rate none passes until they slow down: a
// storm of consistent GETs costs the apiserver at most one second's worth at its start.
//
// A generic cell rate algorithm over one atomic, counting refused reads too: thread-safe,
// without a lock. Times are steady-clock nanoseconds, given by the caller.
#ifndef KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_
#define KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace kf {

class PassthroughBudget {
 public:
  // Counts a read at `now_ns`. True: it may go to the apiserver, the reads of about the last
  // second (itself included) being at most `per_second` (0: never).
  bool Take(uint32_t per_second, int64_t now_ns);

 private:
  // When the reads counted are all spent ("theoretical arrival time"), steady-clock ns.
  std::atomic<int64_t> full_at_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_
