// OpenLoop: the schedule of one of W writers sharing a rate, as the churn uses it.
// Writer k of W writes at start + (k + W*m) / rate; a slot missed by more than one period (the
// previous write took too long) is skipped and counted, never made up in a burst, so the
// offered load does not depend on how fast the server answers.
#ifndef KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_
#define KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace kf::tools {

class OpenLoop {
 public:
  using Clock = std::chrono::steady_clock;

  OpenLoop(Clock::time_point started, int index, int count, double rate)
      : period_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(count / rate))),
        start_(started + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(index / rate))) {}

  // Sleeps until the next slot (waking every 50 ms to notice `stop`); adds the slots skipped to
  // `*late`. False once `stop` is set.
  bool Next(const std::atomic<bool>& stop, uint64_t* late) {
    const auto slot = start_ + m_ * period_;
    while (!stop && Clock::now() < slot) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(slot - Clock::now(), std::chrono::milliseconds(50)));
    }
    if (stop) return false;
    const int64_t behind = (Clock::now() - slot) / period_;
    if (behind >= 1) {
      *late += static_cast<uint64_t>(behind);
      m_ += behind;
    }
    ++m_;
    return true;
  }

 private:
  const Clock::duration period_;
  const Clock::time_point start_;
  int64_t m_ = 0;
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_
