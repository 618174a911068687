// PassthroughBudget: how many consistent GETs of one cached resource go to the apiserver at once
// instead of waiting for a freshness proof (Reflector::TakeConsistentGetPassthrough): up to a
// rate, in bursts of up to one second's worth. A consistent GET costs the apiserver one object
// read from etcd; the proof that would serve it from the cache is a LIST (below 500 objects the
// metadata of every one: 690 KB and ~100 ms for 460 pods on a busy two-core machine, where the
// GET takes ~5 ms), so a proof shared by few reads costs the apiserver more than the reads, and
// each read waits for it, and for the proof already in flight when it came. A kubelet's status
// manager GETs each pod before it writes the pod's status, one pod after another: those waits
// add up to its pods' start. Past the budget, reads share proofs as before, so a fleet's
// consistent GETs cost the apiserver at most the budget plus the proofs.
//
// The generic cell rate algorithm over one atomic: thread-safe, without a lock. Times are
// steady-clock nanoseconds, given by the caller.
#ifndef KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_
#define KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace kf {

class PassthroughBudget {
 public:
  // True: this read may go to the apiserver now, at `per_second` (0: never) at `now_ns`.
  bool Take(uint32_t per_second, int64_t now_ns);

 private:
  // When the budget is next full again ("theoretical arrival time"), steady-clock ns.
  std::atomic<int64_t> full_at_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_PASSTHROUGH_BUDGET_H_
