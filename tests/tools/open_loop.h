// OpenLoop: the schedule of one of W writers sharing a rate, as the churn uses it.
// Writer k of W writes at start + (k + W*m) / rate; a slot missed by more than one period (the
// previous write took too long) is skipped and counted, never made up in a burst, so the
// offered load does not depend on how fast the server answers.
//
// Poisson (a seed given): the gaps between the writer's slots are drawn from an exponential
// distribution of the same mean (W / rate), so writers, and the kinds of the churn, write
// independently and meet only by chance, as a cluster's writers do; periodic writers of
// rates that divide each other write at the same instants every time.
#ifndef KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_
#define KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>

namespace kf::tools {

// Exponentially distributed gaps of a given mean, from a seeded generator: the arrivals of a
// Poisson process.
class PoissonGaps {
 public:
  PoissonGaps(std::chrono::steady_clock::duration mean, uint32_t seed) : mean_(mean), rng_(seed) {}
  std::chrono::steady_clock::duration Next() {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(mean_ * gap_(rng_));
  }

 private:
  std::chrono::steady_clock::duration mean_;
  std::mt19937 rng_;
  std::exponential_distribution<double> gap_{1.0};
};

class OpenLoop {
 public:
  using Clock = std::chrono::steady_clock;

  OpenLoop(Clock::time_point started, int index, int count, double rate,
           std::optional<uint32_t> poisson_seed = std::nullopt)
      : period_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(count / rate))),
        start_(started + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(index / rate))) {
    if (poisson_seed) {
      gaps_.emplace(period_, *poisson_seed);
      next_ = started + gaps_->Next();
    }
  }

  // Sleeps until the next slot (waking every 50 ms to notice `stop`); adds the slots skipped to
  // `*late`. False once `stop` is set.
  bool Next(const std::atomic<bool>& stop, uint64_t* late) {
    if (gaps_) return NextPoisson(stop, late);
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
  bool NextPoisson(const std::atomic<bool>& stop, uint64_t* late) {
    while (!stop && Clock::now() < next_) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(next_ - Clock::now(), std::chrono::milliseconds(50)));
    }
    if (stop) return false;
    // Slots missed by more than a mean gap are skipped and counted, as the periodic ones.
    for (const auto now = Clock::now(); now - next_ >= period_;) {
      next_ += gaps_->Next();
      ++*late;
    }
    next_ += gaps_->Next();
    return true;
  }

  const Clock::duration period_;
  const Clock::time_point start_;
  int64_t m_ = 0;
  std::optional<PoissonGaps> gaps_;
  Clock::time_point next_;  // Poisson: the next slot.
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_OPEN_LOOP_H_
