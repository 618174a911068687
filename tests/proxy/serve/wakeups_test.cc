#include "proxy/serve/wakeups.h"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kf {
namespace {

struct Recorded final : Wakeable {
  Recorded(std::vector<std::string>& into, std::string called)
      : log(into), name(std::move(called)) {}
  void Wake() override { log.push_back(name); }
  std::vector<std::string>& log;
  std::string name;
};

int drains = 0;
void CountDrain() { ++drains; }

TEST_CASE("Wakeups wakes the watches one hand-over names, in order, in one drain") {
  asio::io_context ioc;
  Wakeups wakeups(ioc.get_executor());
  drains = 0;
  wakeups.set_after_drain(&CountDrain);
  std::vector<std::string> log;
  Recorded a(log, "a"), b(log, "b"), c(log, "c");
  const auto ra = wakeups.Register(&a);
  const auto rb = wakeups.Register(&b);
  const auto rc = wakeups.Register(&c);
  CHECK(wakeups.registered() == 3);
  const std::vector<NotifySink::Ref> first{rc, ra};
  wakeups.Notify(first);
  const std::vector<NotifySink::Ref> second{rb};
  wakeups.Notify(second);  // Before the drain: the same post.
  CHECK(log.empty());      // Nothing runs on the notifying thread.
  CHECK(ioc.run() == 1);   // One task for both hand-overs.
  CHECK(log == std::vector<std::string>{"c", "a", "b"});
  CHECK(drains == 1);
}

TEST_CASE("Wakeups drops a wake-up for a watch that ended, even when its slot is reused") {
  asio::io_context ioc;
  Wakeups wakeups(ioc.get_executor());
  std::vector<std::string> log;
  Recorded old_watch(log, "old"), new_watch(log, "new"), other(log, "other");
  const auto old_ref = wakeups.Register(&old_watch);
  const auto other_ref = wakeups.Register(&other);
  const std::vector<NotifySink::Ref> refs{old_ref, other_ref};
  wakeups.Notify(refs);
  // The watch ends before the thread drains, and a new one takes its slot.
  wakeups.Unregister(old_ref);
  const auto new_ref = wakeups.Register(&new_watch);
  CHECK(new_ref.slot == old_ref.slot);
  CHECK(new_ref.generation != old_ref.generation);
  ioc.run();
  CHECK(log == std::vector<std::string>{"other"});  // Not "old", nor "new" in its place.
  // Unregistering twice, or with a stale reference, leaves the new watch registered.
  wakeups.Unregister(old_ref);
  CHECK(wakeups.registered() == 2);
  const std::vector<NotifySink::Ref> again{new_ref};
  wakeups.Notify(again);
  ioc.restart();
  ioc.run();
  CHECK(log == std::vector<std::string>{"other", "new"});
}

// A watch whose wake-up ends another one queued behind it in the same drain.
struct Ender final : Wakeable {
  Ender(Wakeups& w, std::vector<std::string>& into) : wakeups(w), log(into) {}
  void Wake() override {
    log.push_back("ender");
    wakeups.Unregister(victim);
  }
  Wakeups& wakeups;
  std::vector<std::string>& log;
  NotifySink::Ref victim;
};

TEST_CASE("Wakeups skips a watch an earlier wake-up of the same drain ended") {
  asio::io_context ioc;
  Wakeups wakeups(ioc.get_executor());
  std::vector<std::string> log;
  Ender ender(wakeups, log);
  // The victim is fetched ahead before the ender's wake-up ends it, and looked up again on its
  // turn.
  std::vector<std::unique_ptr<Recorded>> crowd;
  std::vector<NotifySink::Ref> refs{wakeups.Register(&ender)};
  for (int i = 0; i < 3; ++i) {
    crowd.push_back(std::make_unique<Recorded>(log, "w" + std::to_string(i)));
    refs.push_back(wakeups.Register(crowd.back().get()));
  }
  ender.victim = refs[2];
  wakeups.Notify(refs);
  ioc.run();
  CHECK(log == std::vector<std::string>{"ender", "w0", "w2"});
}

}  // namespace
}  // namespace kf
