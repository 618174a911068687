#include "proxy/edge/session_set.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

namespace kf::test {
namespace {

// A session that records its Stop and, like a real one, leaves the set when stopped.
struct CountedSession : Stoppable {
  SessionSet* set = nullptr;
  int stops = 0;
  void Stop() override {
    ++stops;
    set->Unregister(this);
  }
};

std::vector<std::unique_ptr<CountedSession>> RegisterSessions(SessionSet& set, int n) {
  std::vector<std::unique_ptr<CountedSession>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<CountedSession>());
    out.back()->set = &set;
    set.AddConnection();
    set.Register(out.back().get());
  }
  return out;
}

int StoppedCount(const std::vector<std::unique_ptr<CountedSession>>& sessions) {
  int n = 0;
  for (const auto& s : sessions) n += s->stops;
  return n;
}

}  // namespace

TEST_CASE("A spread stop ends its sessions a share at a time, each once", "[session_set]") {
  SessionSet set;
  auto sessions = RegisterSessions(set, 10);
  REQUIRE(set.connections() == 10);
  set.BeginSpread();
  set.StopShare(0.0);
  CHECK(StoppedCount(sessions) == 0);
  set.StopShare(0.25);  // Rounded up: 3 of 10.
  CHECK(StoppedCount(sessions) == 3);
  set.StopShare(0.25);
  CHECK(StoppedCount(sessions) == 3);
  set.StopShare(0.5);
  CHECK(StoppedCount(sessions) == 5);
  set.StopShare(1.0);
  CHECK(StoppedCount(sessions) == 10);
  CHECK(set.connections() == 0);
  for (const auto& s : sessions) CHECK(s->stops == 1);
}

TEST_CASE("A spread counts sessions that ended on their own as stopped", "[session_set]") {
  SessionSet set;
  auto sessions = RegisterSessions(set, 4);
  set.BeginSpread();
  sessions[3]->Stop();  // Ended by its client: the set no longer holds it.
  sessions[2]->Stop();
  set.StopShare(0.5);  // Two of four are gone already: nothing more to stop yet.
  CHECK(sessions[0]->stops + sessions[1]->stops == 0);
  set.StopShare(1.0);
  CHECK(sessions[0]->stops == 1);
  CHECK(sessions[1]->stops == 1);
  CHECK(sessions[2]->stops == 1);  // Not stopped a second time.
}

}  // namespace kf::test
