#include "proxy/server/storm_episode.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

namespace kf {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using StormPhase = StormEpisode::Phase;

StormCounts StormWith(StormCause cause, uint64_t n, StormCounts totals = {}) {
  totals[static_cast<size_t>(cause)] += n;
  return totals;
}

uint64_t StormCount(const StormEpisode::Line& line, StormCause cause) {
  return line.counts[static_cast<size_t>(cause)];
}

const StormEpisode::Clock::time_point kStormT0{};

TEST_CASE("StormEpisode says nothing while nothing is refused") {
  StormEpisode episode;
  for (int s = 0; s < 100; ++s) CHECK_FALSE(episode.Observe(kStormT0 + seconds(s), {}));
  CHECK_FALSE(episode.in_episode());
}

TEST_CASE("StormEpisode writes a line at the first refusal, with what was refused so far") {
  StormEpisode episode;
  CHECK_FALSE(episode.Observe(kStormT0, {}));
  auto totals = StormWith(StormCause::kTokenReviewUnavailable, 2);
  const auto line = episode.Observe(kStormT0 + seconds(1), totals);
  REQUIRE(line);
  CHECK(line->phase == StormPhase::kBegan);
  CHECK(StormCount(*line, StormCause::kTokenReviewUnavailable) == 2);
  CHECK(StormCount(*line, StormCause::kTlsHandshakeTimeout) == 0);
  CHECK(line->lasted == StormEpisode::Clock::duration::zero());
  CHECK(episode.in_episode());
}

TEST_CASE("StormEpisode counts refusals made before its first call") {
  StormEpisode episode;
  const auto line = episode.Observe(kStormT0, StormWith(StormCause::kFdHeadroom, 3));
  REQUIRE(line);
  CHECK(StormCount(*line, StormCause::kFdHeadroom) == 3);
}

TEST_CASE("StormEpisode writes a bounded number of lines for a burst of 10,000 refusals") {
  // 10,000 refusals over 100 s, one per 10 ms, observed after each: a line when it begins,
  // one every 30 s while it lasts, one 10 s after the last.
  StormEpisode episode;
  StormCounts totals{};
  std::vector<StormEpisode::Line> lines;
  auto now = kStormT0;
  for (int i = 0; i < 10000; ++i) {
    totals = StormWith(i % 2 ? StormCause::kTlsHandshakeTimeout : StormCause::kHandshakeQueue, 1,
                       totals);
    if (auto line = episode.Observe(now, totals)) lines.push_back(*line);
    now += milliseconds(10);
  }
  for (int s = 0; s < 20; ++s) {
    if (auto line = episode.Observe(now + seconds(s), totals)) lines.push_back(*line);
  }
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].phase == StormPhase::kBegan);
  CHECK(lines[1].phase == StormPhase::kLasting);
  CHECK(lines[1].lasted == seconds(30));
  CHECK(lines[2].lasted == seconds(60));
  CHECK(lines[3].lasted == seconds(90));
  CHECK(lines[4].phase == StormPhase::kEnded);
  // The summary's counts: everything since the episode began, by cause.
  CHECK(StormCount(lines[4], StormCause::kTlsHandshakeTimeout) == 5000);
  CHECK(StormCount(lines[4], StormCause::kHandshakeQueue) == 5000);
  CHECK(StormCount(lines[1], StormCause::kTlsHandshakeTimeout) == 1500);
  CHECK(lines[4].lasted == milliseconds(99990));
  CHECK_FALSE(episode.in_episode());
}

TEST_CASE("StormEpisode ends an episode after 10 s without a refusal, not before") {
  StormEpisode episode;
  auto totals = StormWith(StormCause::kAdmissionRejected, 1);
  REQUIRE(episode.Observe(kStormT0, totals));
  totals = StormWith(StormCause::kAdmissionRejected, 4, totals);
  CHECK_FALSE(episode.Observe(kStormT0 + seconds(5), totals));
  CHECK_FALSE(episode.Observe(kStormT0 + seconds(14), totals));
  const auto end = episode.Observe(kStormT0 + seconds(15), totals);
  REQUIRE(end);
  CHECK(end->phase == StormPhase::kEnded);
  CHECK(StormCount(*end, StormCause::kAdmissionRejected) == 5);
  CHECK(end->lasted == seconds(5));
}

TEST_CASE("StormEpisode begins a new episode, counted from zero, after a quiet period") {
  StormEpisode episode;
  auto totals = StormWith(StormCause::kPassthroughRejected, 7);
  REQUIRE(episode.Observe(kStormT0, totals)->phase == StormPhase::kBegan);
  REQUIRE(episode.Observe(kStormT0 + seconds(10), totals)->phase == StormPhase::kEnded);
  CHECK_FALSE(episode.Observe(kStormT0 + seconds(60), totals));
  totals = StormWith(StormCause::kAccessReviewUnavailable, 1, totals);
  const auto again = episode.Observe(kStormT0 + seconds(61), totals);
  REQUIRE(again);
  CHECK(again->phase == StormPhase::kBegan);
  CHECK(StormCount(*again, StormCause::kAccessReviewUnavailable) == 1);
  CHECK(StormCount(*again, StormCause::kPassthroughRejected) == 0);
}

TEST_CASE("StormEpisode reads a counter that went down as no refusal") {
  StormEpisode episode;
  REQUIRE(episode.Observe(kStormT0, StormWith(StormCause::kAdmissionRejected, 9)));
  const auto end =
      episode.Observe(kStormT0 + seconds(10), StormWith(StormCause::kAdmissionRejected, 2));
  REQUIRE(end);
  CHECK(end->phase == StormPhase::kEnded);
  CHECK(StormCount(*end, StormCause::kAdmissionRejected) == 9);
}

TEST_CASE("StormEpisode names each cause's log field and metric once") {
  std::set<std::string> names, metrics;
  for (size_t i = 0; i < kStormCauses; ++i) {
    names.emplace(StormCauseName(static_cast<StormCause>(i)));
    metrics.emplace(StormCauseMetric(static_cast<StormCause>(i)));
  }
  CHECK(names.size() == kStormCauses);
  CHECK(metrics.size() == kStormCauses);
  CHECK(StormCauseMetric(StormCause::kHandshakeQueue) ==
        "kube_fanout_requests_refused_total{reason=\"handshake_queue\"}");
}

}  // namespace
}  // namespace kf
