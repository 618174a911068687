// StormEpisode: turns the running totals of overload refusals (handshake timeouts, handshake
// queue drops, connections refused near the descriptor limit, 429s for want of a review,
// admission 429s) into a bounded number of log lines: one when the first refusal comes after a
// quiet period, a summary every `summary_every` while they keep coming, and one when `quiet`
// has passed without any, each with the counts by cause since the episode began. A storm of any
// size thus logs 2 + (its length / summary_every) lines.
//
// Pure: fed the totals as their metrics show them and the time (an injected clock), by one
// caller (Server::StormLogLoop, on the main thread); not thread-safe.
#ifndef KUBE_FANOUT_SERVER_STORM_EPISODE_H_
#define KUBE_FANOUT_SERVER_STORM_EPISODE_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kf {

// What an overloaded kube-fanout refuses, each counted by one metric (StormCauseMetric).
enum class StormCause : size_t {
  kTlsHandshakeTimeout,
  kHandshakeQueue,
  kFdHeadroom,
  kTokenReviewUnavailable,
  kAccessReviewUnavailable,
  kTokenReviewThrottled,
  kAdmissionRejected,
  kPassthroughRejected,
  kCount
};
inline constexpr size_t kStormCauses = static_cast<size_t>(StormCause::kCount);
using StormCounts = std::array<uint64_t, kStormCauses>;

// The log field a cause's count is written under.
std::string_view StormCauseName(StormCause cause);
// The metric (and label) the count comes from.
std::string_view StormCauseMetric(StormCause cause);

class StormEpisode {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::seconds quiet{10};          // This long without a refusal ends an episode.
    std::chrono::seconds summary_every{30};  // A summary this often while it lasts.
  };
  enum class Phase { kBegan, kLasting, kEnded };
  struct Line {
    Phase phase;
    StormCounts counts;      // By cause, since the episode began.
    Clock::duration lasted;  // From its first refusal to now (kEnded: to its last).
  };

  explicit StormEpisode(Options options) : options_(options) {}
  StormEpisode() : StormEpisode(Options{}) {}

  // `totals`: each cause's counter now (counters never go down; one that did is read as no
  // change). Returns the line to log, if any. The first call compares with zeros, so refusals
  // made before it count too.
  std::optional<Line> Observe(Clock::time_point now, const StormCounts& totals);

  bool in_episode() const { return in_episode_; }

 private:
  Options options_;
  StormCounts last_{};    // The totals at the previous call.
  StormCounts counts_{};  // This episode's, by cause.
  bool in_episode_ = false;
  Clock::time_point began_, last_refusal_, last_line_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_STORM_EPISODE_H_
