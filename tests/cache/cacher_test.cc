#include "cache/cacher.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "rapidjson/document.h"
#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Filter;
using testing::Pod;
using testing::PodJson;
using testing::PodsType;

struct Seen {
  std::string type;
  std::string name;
  uint64_t rv;
};

// Decodes what a watcher has queued into (type, name, RV) per event.
std::vector<Seen> Drain(CacheWatcher& w) {
  std::string bytes;
  for (const Piece& p : w.Take().pieces) bytes.append(p.bytes);
  std::vector<Seen> out;
  size_t start = 0;
  while (start < bytes.size()) {
    const size_t nl = bytes.find('\n', start);
    REQUIRE(nl != std::string::npos);
    rapidjson::Document d;
    d.Parse(bytes.data() + start, nl - start);
    REQUIRE_FALSE(d.HasParseError());
    const auto& meta = d["object"]["metadata"];
    out.push_back({d["type"].GetString(), meta.HasMember("name") ? meta["name"].GetString() : "",
                   std::stoull(meta["resourceVersion"].GetString())});
    start = nl + 1;
  }
  return out;
}

struct Fixture {
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  int notified = 0;
  std::shared_ptr<CacheWatcher> Watch(WatchFilter f,
                                      Cacher::Start start = Cacher::Start::kInitialState,
                                      uint64_t rv = 0, size_t budget = 1 << 20) {
    auto w = cacher.Watch({std::move(f), start, rv, budget, [this] { ++notified; }});
    REQUIRE(w.ok());
    return *w;
  }
};

bool operator==(const Seen& a, const Seen& b) {
  return a.type == b.type && a.name == b.name && a.rv == b.rv;
}
std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << s.type << " " << s.name << "@" << s.rv;
}

TEST_CASE("Cacher starts a watch with the current state by key, then live events, no gap") {
  Fixture f;
  f.cacher.Replace({Pod("b", "x", 5), Pod("a", "y", 7), Pod("a-b", "z", 6)}, 10);
  auto w = f.Watch(Filter());
  CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "z", 6}, {"ADDED", "y", 7}, {"ADDED", "x", 5}});
  f.cacher.Apply(EventType::kModified, Pod("b", "x", 11));
  f.cacher.Apply(EventType::kDeleted, Pod("a", "y", 12));
  CHECK(f.notified >= 1);
  CHECK(Drain(*w) == std::vector<Seen>{{"MODIFIED", "x", 11}, {"DELETED", "y", 12}});
  CHECK(f.cacher.resource_version() == 12);
}

TEST_CASE(
    "A watcher removed and dropped by its session while an event notifies it is still "
    "alive for its notify") {
  // Each notify (run without the cache's lock) ends the other watch, as a session on another
  // thread may at that moment: it removes that watcher and drops the last reference it holds.
  // Whichever runs first, the other's notify then runs on a watcher only the dispatch holds
  // (were it not held, a freed one: ASan reports it, a plain build may crash).
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  cacher.Replace({}, 10);
  std::shared_ptr<CacheWatcher> w[2];
  int notified[2] = {0, 0};
  for (int i : {0, 1}) {
    auto made = cacher.Watch({Filter(), Cacher::Start::kAfterVersion, 10, 1 << 20, [&, i] {
                                ++notified[i];
                                if (w[1 - i] == nullptr) return;
                                cacher.RemoveWatcher(w[1 - i].get());
                                w[1 - i].reset();
                              }});
    REQUIRE(made.ok());
    w[i] = *std::move(made);
    w[i]->Take();  // What it started with: the next event notifies it.
  }
  cacher.Apply(EventType::kAdded, Pod("ns", "p", 11));
  CHECK(notified[0] == 1);
  CHECK(notified[1] == 1);
  CHECK(w[0] == nullptr);  // Each ended the other: the second on a watcher already removed.
  CHECK(w[1] == nullptr);
}

// A sink that records each hand-over.
struct RecordingSink final : NotifySink {
  std::vector<std::vector<Ref>> calls;
  void Notify(std::span<const Ref> refs) override { calls.emplace_back(refs.begin(), refs.end()); }
};

TEST_CASE("Cacher hands one event's notifications to each sink at once, by reference") {
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  cacher.Replace({}, 10);
  RecordingSink one, two;
  int by_function = 0;
  auto watch = [&](NotifySink* sink, uint32_t slot, WatchFilter filter = Filter()) {
    Cacher::WatchRequest r{std::move(filter), Cacher::Start::kAfterVersion, 10, 1 << 20};
    if (sink != nullptr) {
      r.sink = sink;
      r.sink_ref = {slot, slot + 100};
    } else {
      r.notify = [&] { ++by_function; };
    }
    auto w = cacher.Watch(std::move(r));
    REQUIRE(w.ok());
    return *std::move(w);
  };
  auto a = watch(&one, 1);
  auto b = watch(&two, 2);
  auto c = watch(&one, 3);
  auto d = watch(nullptr, 0);
  auto elsewhere = watch(&two, 4, Filter("other-ns"));
  for (auto* w : {&a, &b, &c, &d, &elsewhere}) (*w)->Take();
  cacher.Apply(EventType::kAdded, Pod("ns", "p", 11));
  // One call per sink, naming its watchers that got the event (in index order).
  REQUIRE(one.calls.size() == 1);
  REQUIRE(two.calls.size() == 1);
  std::vector<uint32_t> slots;
  for (const auto& ref : one.calls[0]) {
    CHECK(ref.generation == ref.slot + 100);
    slots.push_back(ref.slot);
  }
  std::sort(slots.begin(), slots.end());
  CHECK(slots == std::vector<uint32_t>{1, 3});
  REQUIRE(two.calls[0].size() == 1);  // Not the watcher of another namespace.
  CHECK(two.calls[0][0].slot == 2);
  CHECK(by_function == 1);
  // A second event before anyone took the first: notifications are pending, none is repeated.
  cacher.Apply(EventType::kModified, Pod("ns", "p", 12));
  CHECK(one.calls.size() == 1);
  CHECK(Drain(*a) == std::vector<Seen>{{"ADDED", "p", 11}, {"MODIFIED", "p", 12}});
  cacher.Apply(EventType::kModified, Pod("ns", "p", 13));
  REQUIRE(one.calls.size() == 2);  // Only the one that took its events.
  REQUIRE(one.calls[1].size() == 1);
  CHECK(one.calls[1][0].slot == 1);
  // Closing every watcher tells each one with no notification pending, through its sink.
  Drain(*a);
  Drain(*c);
  cacher.CloseAll();
  REQUIRE(one.calls.size() == 3);
  CHECK(one.calls[2].size() == 2);
  REQUIRE(two.calls.size() == 2);  // `elsewhere`; b's notification is still pending.
  CHECK(two.calls[1][0].slot == 4);
  CHECK(a->closed());
  CHECK(b->closed());
}

TEST_CASE("Cacher turns selector transitions into ADDED and DELETED with the new RV") {
  Fixture f;
  f.cacher.Replace({Pod("n", "p", 5, "", "web")}, 10);
  auto web = f.Watch(Filter("", "app=web"));
  CHECK(Drain(*web).size() == 1);
  f.cacher.Apply(EventType::kModified, Pod("n", "p", 11, "", "db"));  // Leaves app=web.
  const auto left = Drain(*web);
  REQUIRE(left.size() == 1);
  CHECK(left[0] == Seen{"DELETED", "p", 11});
  f.cacher.Apply(EventType::kModified, Pod("n", "p", 12, "", "web"));  // Comes back.
  CHECK(Drain(*web) == std::vector<Seen>{{"ADDED", "p", 12}});
}

TEST_CASE("Cacher delivers a pod to its node's watch when it is bound, and only there") {
  Fixture f;
  f.cacher.Replace({Pod("n", "p", 5)}, 10);
  auto node1 = f.Watch(Filter("", "", "spec.nodeName=node-1"));
  auto node2 = f.Watch(Filter("", "", "spec.nodeName=node-2"));
  CHECK(Drain(*node1).empty());
  f.cacher.Apply(EventType::kModified, Pod("n", "p", 11, "node-1"));
  CHECK(Drain(*node1) == std::vector<Seen>{{"ADDED", "p", 11}});
  CHECK(Drain(*node2).empty());
  f.cacher.Apply(EventType::kModified, Pod("n", "p", 12, "node-2"));  // Moves (for the test).
  CHECK(Drain(*node1) == std::vector<Seen>{{"DELETED", "p", 12}});
  CHECK(Drain(*node2) == std::vector<Seen>{{"ADDED", "p", 12}});
}

TEST_CASE("Cacher resumes a watch from a resourceVersion out of its window") {
  Fixture f;
  f.cacher.Replace({}, 10);
  for (uint64_t rv = 11; rv <= 15; ++rv) {
    f.cacher.Apply(EventType::kAdded, Pod("n", "p" + std::to_string(rv), rv));
  }
  auto w = f.Watch(Filter(), Cacher::Start::kAfterVersion, 13);
  CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "p14", 14}, {"ADDED", "p15", 15}});
  auto single = f.Watch(Filter("n", "", "metadata.name=p12"), Cacher::Start::kAfterVersion, 10);
  CHECK(Drain(*single) == std::vector<Seen>{{"ADDED", "p12", 12}});
}

TEST_CASE("Cacher answers 410 once the window no longer reaches back to the RV") {
  EventRingLimits limits;
  limits.max_events = 2;
  limits.min_history = std::chrono::seconds(0);
  Cacher cacher(PodsType(), limits, [] { return std::chrono::steady_clock::now(); });
  cacher.Replace({}, 10);
  for (uint64_t rv = 11; rv <= 15; ++rv) {
    cacher.Apply(EventType::kAdded, Pod("n", "p" + std::to_string(rv), rv));
  }
  auto w = cacher.Watch({WatchFilter{}, Cacher::Start::kAfterVersion, 11, 1 << 20, [] {}});
  CHECK(w.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(w.status().message() == "too old resource version: 11 (13)");
}

TEST_CASE("Cacher answers 410 for an RV before its last relist though nothing was evicted") {
  // Resuming from before a relist could miss a deletion the diff folded away, so it must not
  // be served the current state instead (the apiserver: getAllEventsSinceLocked).
  Fixture f;
  f.cacher.Replace({Pod("n", "a", 5)}, 10);
  f.cacher.Replace({Pod("n", "a", 5), Pod("n", "b", 30)}, 40);
  auto w = f.cacher.Watch({Filter(), Cacher::Start::kAfterVersion, 20, 1 << 20, [] {}});
  CHECK(w.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(w.status().message() == "too old resource version: 20 (40)");
  auto before_first = f.cacher.Watch({Filter(), Cacher::Start::kAfterVersion, 9, 1 << 20, [] {}});
  CHECK(before_first.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(f.cacher.Watch({Filter(), Cacher::Start::kAfterVersion, 40, 1 << 20, [] {}}).ok());
}

// A cache that began at a LIST at 20, with the upstream's events before it at hand.
struct FilledFixture : Fixture {
  FilledFixture() {
    cacher.Replace({Pod("n", "a", 12, "", "db"), Pod("n", "b", 18), Pod("n", "c", 3)}, 20);
    cacher.Apply(EventType::kModified, Pod("n", "c", 25));
  }
  absl::Status Fill(const std::vector<ObjectPtr>* at_10 = nullptr) {
    return cacher.InsertHistory(
        10, 20,
        {{EventType::kAdded, Pod("n", "gone", 11)},
         {EventType::kModified, Pod("n", "a", 12, "", "db")},  // Its state before: unknown.
         {EventType::kAdded, Pod("n", "b", 15, "", "db")},
         {EventType::kDeleted, Pod("n", "gone", 16)},
         {EventType::kModified, Pod("n", "b", 18)},   // Into app=web.
         {EventType::kModified, Pod("n", "c", 25)}},  // The window's own: not repeated.
        at_10);
  }
};

TEST_CASE("Cacher replays history filled in before its list, then its own events, in order") {
  FilledFixture f;
  CHECK(f.cacher.HistoryNeeded(10) == std::optional<uint64_t>(20));
  CHECK_FALSE(f.cacher.HistoryNeeded(20));
  REQUIRE(f.Fill().ok());
  CHECK_FALSE(f.cacher.HistoryNeeded(10));
  CHECK(f.cacher.window_start_rv() == 10);
  auto w = f.Watch(Filter(), Cacher::Start::kAfterVersion, 10);
  CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "gone", 11},
                                       {"MODIFIED", "a", 12},
                                       {"ADDED", "b", 15},
                                       {"DELETED", "gone", 16},
                                       {"MODIFIED", "b", 18},
                                       {"MODIFIED", "c", 25}});
  // The store is the list's: nothing of the history changed it.
  CHECK(f.cacher.object_count() == 3);
  CHECK(f.cacher.resource_version() == 25);
  // A watcher past the list is unaffected.
  auto after = f.Watch(Filter(), Cacher::Start::kAfterVersion, 20);
  CHECK(Drain(*after) == std::vector<Seen>{{"MODIFIED", "c", 25}});
}

TEST_CASE(
    "Cacher tells a selecting watcher a filled-in update only when it knows the state before") {
  FilledFixture f;
  REQUIRE(f.Fill().ok());
  // b's update at 18 follows its ADDED at 15: it entered app=web then.
  auto from_14 = f.Watch(Filter("", "app=web"), Cacher::Start::kAfterVersion, 14);
  CHECK(Drain(*from_14) ==
        std::vector<Seen>{{"DELETED", "gone", 16}, {"ADDED", "b", 18}, {"MODIFIED", "c", 25}});
  // a's update at 12 is its first: whether it was in app=db before is unknown, so a watcher
  // whose selection it could change gets the 410 it got before the fill.
  auto from_10 =
      f.cacher.Watch({Filter("", "app=db"), Cacher::Start::kAfterVersion, 10, 1 << 20, [] {}});
  CHECK(from_10.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(from_10.status().message() == "too old resource version: 10 (20)");
  // Nor can it vouch for such a watcher, nor list the state before it.
  CHECK_FALSE(f.cacher.NothingFor(Filter("", "app=other"), 10, 20));
  CHECK(f.cacher.NothingFor(Filter("other"), 10, 20));
  CHECK(f.cacher.ListPage(Filter(), {.at_rv = 10}).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(f.cacher.ListPage(Filter(), {.at_rv = 12})->items.size() == 3);  // a, c, gone.
  CHECK(f.cacher.ListPage(Filter(), {.at_rv = 20}).ok());
  // A snapshot keeps none of it.
  CHECK(f.cacher.ExportState()->window_start_rv == 20);
}

TEST_CASE("Cacher tells a selecting watcher every filled-in update given the state before") {
  FilledFixture f;
  const std::vector<ObjectPtr> at_10 = {Pod("n", "a", 9, "", "web"), Pod("n", "c", 3)};
  REQUIRE(f.Fill(&at_10).ok());
  // a moved from app=web into app=db at 12; b was added in app=db at 15 and left it at 18.
  auto db = f.Watch(Filter("", "app=db"), Cacher::Start::kAfterVersion, 10);
  CHECK(Drain(*db) ==
        std::vector<Seen>{{"ADDED", "a", 12}, {"ADDED", "b", 15}, {"DELETED", "b", 18}});
  auto page = f.cacher.ListPage(Filter(), {.at_rv = 10});
  REQUIRE(page.ok());
  REQUIRE(page->items.size() == 2);
  CHECK(page->items[0]->resource_version() == 9);
  CHECK(f.cacher.NothingFor(Filter("", "app=other"), 10, 20));
}

TEST_CASE("Cacher takes no history once a relist moved its window on") {
  FilledFixture f;
  f.cacher.Replace({Pod("n", "a", 12)}, 40);
  CHECK(f.Fill().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.cacher.HistoryNeeded(10) == std::optional<uint64_t>(40));
}

TEST_CASE("Cacher turns a relist's differences into events for open watches") {
  Fixture f;
  f.cacher.Replace({Pod("n", "keep", 5), Pod("n", "gone", 6), Pod("n", "changed", 7)}, 10);
  auto w = f.Watch(Filter());
  Drain(*w);
  f.cacher.Replace({Pod("n", "keep", 5), Pod("n", "changed", 30), Pod("n", "new", 25)}, 40);
  CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "new", 25},
                                       {"MODIFIED", "changed", 30},
                                       {"DELETED", "gone", 40}});
  CHECK(f.cacher.resource_version() == 40);
}

TEST_CASE("Cacher cuts a watcher past its byte budget without touching the others") {
  Fixture f;
  f.cacher.Replace({}, 10);
  auto slow = f.Watch(Filter(), Cacher::Start::kInitialState, 0, /*budget=*/3000);
  auto fast = f.Watch(Filter());
  for (uint64_t rv = 11; rv <= 30; ++rv) {
    f.cacher.Apply(EventType::kAdded, Pod("n", "p" + std::to_string(rv), rv));
    Drain(*fast);  // The fast one keeps up.
  }
  CacheWatcher::Batch b = slow->Take();
  CHECK(b.closed);
  CHECK(b.close_cause == CacheWatcher::CloseCause::kTooSlow);
  CHECK_FALSE(fast->closed());
  CHECK(f.cacher.watcher_count() == 1);
}

// Watchers of one or two caches sharing a process-wide QueueBudget.
struct Budgeted {
  explicit Budgeted(size_t limit) : budget(limit) {}
  QueueBudget budget;
  Cacher pods{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  Cacher other{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  int notified = 0;
  std::shared_ptr<CacheWatcher> Watch(Cacher& c, WatchFilter f = Filter()) {
    auto w = c.Watch(
        {std::move(f), Cacher::Start::kInitialState, 0, 1 << 20, [this] { ++notified; }, &budget});
    REQUIRE(w.ok());
    return *w;
  }
  // What the open watchers hold, as the gauges add it up (each frame once per watcher).
  size_t Held() const { return pods.GetStats().queued_bytes + other.GetStats().queued_bytes; }
};

// The entries of `watchers`' queues, as the process budget counts them besides the objects.
size_t Entries(std::initializer_list<const CacheWatcher*> watchers) {
  size_t n = 0;
  for (const CacheWatcher* w : watchers) n += w->entry_bytes();
  return n;
}

TEST_CASE("Cacher cuts the watcher furthest behind once all watchers pass the process budget") {
  Budgeted b(/*limit=*/4000);
  b.pods.Replace({}, 10);
  auto stalled = b.Watch(b.pods);
  auto lagging = b.Watch(b.pods);
  auto fast = b.Watch(b.pods);
  uint64_t rv = 11;
  size_t objects = 0;  // Bytes of the objects the stalled watcher holds (every one so far).
  for (; rv <= 40 && !stalled->closed(); ++rv) {
    ObjectPtr pod = Pod("n", "p" + std::to_string(rv), rv);
    objects += pod->bytes().size();
    b.pods.Apply(EventType::kAdded, pod);
    Drain(*fast);
    if (rv % 3 == 0) Drain(*lagging);  // Behind by up to three events, then catches up.
    if (stalled->closed()) break;
    // Memory, not lag: each object once, however many queues hold its frame.
    CHECK(b.budget.queued() == objects + Entries({stalled.get(), lagging.get(), fast.get()}));
  }
  REQUIRE(rv > 13);  // Events were delivered before the cut.
  CacheWatcher::Batch cut = stalled->Take();
  CHECK(cut.closed);
  CHECK(cut.close_cause == CacheWatcher::CloseCause::kTooSlow);
  CHECK(cut.pieces.empty());
  CHECK_FALSE(lagging->closed());
  CHECK_FALSE(fast->closed());
  const Cacher::Stats st = b.pods.GetStats();
  CHECK(st.watchers_cut_total_budget == 1);
  CHECK(st.watchers_cut == 0);  // Its own budget (1 MiB) was never reached.
  CHECK(b.budget.cuts() == 1);
  // Whether the cut came from a walk (a watcher with less queued found no room) or from the
  // stalled one finding no room itself depends on the order the index hands the three
  // watchers to the dispatch (pointer order): walks() is 0 or 1, and both are right.
  // The others go on, under the budget; the cut one's bytes are given back.
  for (uint64_t more = rv; more < rv + 10; ++more) {
    b.pods.Apply(EventType::kAdded, Pod("n", "p" + std::to_string(more), more));
    Drain(*fast);
    Drain(*lagging);
  }
  CHECK(b.budget.queued() == 0);
  CHECK(b.pods.GetStats().watchers_cut_total_budget == 1);
  CHECK(b.pods.GetStats().watchers == 2);  // The cut one left the index at its next event.
}

TEST_CASE("The process budget cuts a stalled watcher of another cache, counted by its own") {
  Budgeted b(/*limit=*/3000);
  b.pods.Replace({}, 10);
  b.other.Replace({}, 10);
  auto stalled = b.Watch(b.other);
  auto reader = b.Watch(b.pods);
  // The stalled watcher fills most of the budget from its own cache.
  for (uint64_t rv = 11; rv <= 16; ++rv) {
    b.other.Apply(EventType::kAdded, Pod("n", "o" + std::to_string(rv), rv));
  }
  REQUIRE_FALSE(stalled->closed());
  const size_t stalled_bytes = stalled->queued_bytes();
  REQUIRE(stalled_bytes > 1500);
  // The reader is behind by a few events of the other cache: room is made from the largest.
  for (uint64_t rv = 11; rv <= 16 && !stalled->closed(); ++rv) {
    b.pods.Apply(EventType::kAdded, Pod("n", "p" + std::to_string(rv), rv));
  }
  CHECK(stalled->closed());
  CHECK_FALSE(reader->closed());
  CHECK(b.other.GetStats().watchers_cut_total_budget == 1);
  CHECK(b.pods.GetStats().watchers_cut_total_budget == 0);
  CHECK(b.budget.queued() > 0);
  CHECK(b.budget.queued() <= 3000);
}

TEST_CASE("The process budget always lets a caught-up watcher have the next event") {
  Budgeted b(/*limit=*/100);  // Less than one event.
  b.pods.Replace({}, 10);
  auto one = b.Watch(b.pods);
  auto two = b.Watch(b.pods);
  b.pods.Apply(EventType::kAdded, Pod("n", "a", 11));
  CHECK(Drain(*one) == std::vector<Seen>{{"ADDED", "a", 11}});
  CHECK(Drain(*two) == std::vector<Seen>{{"ADDED", "a", 11}});
  CHECK(b.budget.queued() == 0);
  CHECK(b.budget.cuts() == 0);
  // Behind by one event with the budget spent: the next event has no room, and goes with it.
  b.pods.Apply(EventType::kAdded, Pod("n", "b", 12));
  Drain(*one);
  b.pods.Apply(EventType::kAdded, Pod("n", "c", 13));
  CHECK(Drain(*one) == std::vector<Seen>{{"ADDED", "c", 13}});
  CHECK(two->closed());
  CHECK(b.pods.GetStats().watchers_cut_total_budget == 1);
  CHECK(b.budget.walks() == 0);  // Nobody could be further behind than `two`: no walk.
}

TEST_CASE("A crowd one event behind with the process budget spent costs no walk per delivery") {
  Budgeted b(/*limit=*/1000);
  b.pods.Replace({}, 10);
  std::vector<std::shared_ptr<CacheWatcher>> crowd;
  for (int i = 0; i < 50; ++i) crowd.push_back(b.Watch(b.pods));
  b.pods.Apply(EventType::kAdded, Pod("n", "a", 11));  // Every one caught up: each gets it.
  for (const auto& w : crowd) REQUIRE_FALSE(w->closed());
  REQUIRE(b.budget.queued() > 1000);
  // No room and nobody further behind: each goes in turn until the rest fit.
  b.pods.Apply(EventType::kAdded, Pod("n", "b", 12));
  size_t cut = 0;
  for (const auto& w : crowd) {
    if (w->closed()) {
      ++cut;
    } else {
      CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "a", 11}, {"ADDED", "b", 12}});
    }
  }
  CHECK(cut >= 45);
  CHECK(cut < 50);
  CHECK(b.pods.GetStats().watchers_cut_total_budget == cut);
  CHECK(b.budget.walks() == 0);
  CHECK(b.budget.queued() == 0);
}

TEST_CASE("A watcher gives its queued bytes back to the process budget when it goes") {
  Budgeted b(/*limit=*/0);  // Counted, not bounded.
  b.pods.Replace({}, 10);
  auto w = b.Watch(b.pods);
  size_t objects = 0;
  for (uint64_t rv = 11; rv <= 15; ++rv) {
    ObjectPtr pod = Pod("n", "p" + std::to_string(rv), rv);
    objects += pod->bytes().size();
    b.pods.Apply(EventType::kAdded, pod);
  }
  REQUIRE(b.budget.queued() > 0);
  CHECK(b.budget.queued() == objects + w->entry_bytes());
  CHECK(w->entry_bytes() == 5 * CacheWatcher::EntryBytes(3));
  b.pods.RemoveWatcher(w.get());
  w.reset();
  CHECK(b.budget.queued() == 0);
  CHECK(b.budget.cuts() == 0);
}

TEST_CASE("The process budget counts a frame queued to many watchers once, as memory holds it") {
  Budgeted b(/*limit=*/0);  // Counted, not bounded.
  b.pods.Replace({}, 10);
  std::vector<std::shared_ptr<CacheWatcher>> crowd;
  for (int i = 0; i < 1000; ++i) crowd.push_back(b.Watch(b.pods));
  ObjectPtr big = Pod("n", "big", 11, "", std::string(1000, 'x'));  // About 1.2 KiB.
  const size_t object = big->bytes().size();
  REQUIRE(object > 1024);
  b.pods.Apply(EventType::kAdded, big);
  const size_t entry = CacheWatcher::EntryBytes(3);
  // Each watcher's own budget sees the frame whole; the process budget the object once.
  for (const auto& w : crowd) REQUIRE(w->queued_bytes() > object);
  CHECK(b.Held() == 1000 * crowd[0]->queued_bytes());
  CHECK(b.budget.queued() == object + 1000 * entry);
  CHECK(big->queue_holds().count() == 1000);
  // Half the crowd takes it: the object is still held, by the rest.
  for (size_t i = 0; i < 500; ++i) Drain(*crowd[i]);
  CHECK(b.budget.queued() == object + 500 * entry);
  // A second object, to the half that is behind and the half that is not.
  ObjectPtr second = Pod("n", "second", 12);
  b.pods.Apply(EventType::kAdded, second);
  CHECK(b.budget.queued() == object + second->bytes().size() + 1500 * entry);
  // A watcher cut (or gone) gives back its entries, and an object's bytes when it held it last.
  for (size_t i = 500; i < 1000; ++i) {
    b.pods.RemoveWatcher(crowd[i].get());
    crowd[i].reset();
  }
  CHECK(big->queue_holds().count() == 0);
  CHECK(b.budget.queued() == second->bytes().size() + 500 * entry);
  for (size_t i = 0; i < 500; ++i) Drain(*crowd[i]);
  CHECK(b.budget.queued() == 0);
  CHECK(second->queue_holds().count() == 0);
  CHECK(b.budget.cuts() == 0);
}

TEST_CASE("A crowd behind on the same frames fits a process budget its lag would pass") {
  // 100 watchers, each two events behind: 200 frames of lag (about 60 KB counted per watcher),
  // in memory two objects and 200 entries (about 21 KB). A 32 KiB budget cuts nobody; each
  // watcher's own budget still counts its frames whole and cuts one allowed less than two.
  Budgeted b(/*limit=*/32 * 1024);
  b.pods.Replace({}, 10);
  std::vector<std::shared_ptr<CacheWatcher>> crowd;
  for (int i = 0; i < 100; ++i) crowd.push_back(b.Watch(b.pods));
  ObjectPtr first = Pod("n", "a", 11);
  const size_t frame = first->bytes().size() + 30;  // About; the frame's bytes with its type.
  auto small = b.pods.Watch(
      {Filter(), Cacher::Start::kInitialState, 0, /*max_queue_bytes=*/frame, [] {}, &b.budget});
  REQUIRE(small.ok());
  b.pods.Apply(EventType::kAdded, first);
  b.pods.Apply(EventType::kAdded, Pod("n", "b", 12));
  REQUIRE(crowd[0]->queued_bytes() > frame);
  CHECK(b.Held() > 100 * 2 * first->bytes().size());
  CHECK(b.Held() > 32 * 1024);  // Counted as lag, the crowd would be past the budget.
  CHECK(b.budget.queued() <= 32 * 1024);
  CHECK(b.budget.cuts() == 0);
  for (const auto& w : crowd) {
    CHECK_FALSE(w->closed());
    CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "a", 11}, {"ADDED", "b", 12}});
  }
  CHECK((*small)->closed());  // Its own budget: two frames are more than it may hold.
  CHECK(b.pods.GetStats().watchers_cut == 1);
  CHECK(b.pods.GetStats().watchers_cut_total_budget == 0);
  CHECK(b.budget.queued() == 0);
}

TEST_CASE("Cacher ignores an upstream event it has already seen") {
  Fixture f;
  f.cacher.Replace({Pod("n", "p", 5)}, 10);
  auto w = f.Watch(Filter(), Cacher::Start::kAfterVersion, 10);
  f.cacher.Apply(EventType::kModified, Pod("n", "p", 9));
  CHECK(Drain(*w).empty());
}

TEST_CASE("Cacher calls version waiters once its RV reaches theirs") {
  Fixture f;
  f.cacher.Replace({}, 10);
  int ready = 0;
  f.cacher.WaitForVersion(10, [&] { ++ready; });
  CHECK(ready == 1);
  f.cacher.WaitForVersion(12, [&] { ++ready; });
  f.cacher.Bookmark(11);
  CHECK(ready == 1);
  f.cacher.Apply(EventType::kAdded, Pod("n", "p", 12));
  CHECK(ready == 2);
}

TEST_CASE("Cacher builds bookmarks from the upstream's template at the requested RV") {
  Fixture f;
  f.cacher.SetBookmarkTemplate(
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},"
      "\"spec\":{\"containers\":null},\"status\":{}}");
  CHECK(*f.cacher.BookmarkFrame(77) ==
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"resourceVersion\":\"77\"},\"spec\":{\"containers\":null},\"status\":{}}}\n");
  CHECK(*f.cacher.BookmarkFrame(78, true) ==
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"resourceVersion\":\"78\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},"
        "\"spec\":{\"containers\":null},\"status\":{}}}\n");
  // Every watcher of one form at one RV shares one frame; the end bookmark is not the periodic
  // one of the same RV.
  CHECK(f.cacher.BookmarkFrame(78, true) == f.cacher.BookmarkFrame(78, true));
  CHECK(f.cacher.BookmarkFrame(78) == f.cacher.BookmarkFrame(78));
  CHECK(*f.cacher.BookmarkFrame(78) != *f.cacher.BookmarkFrame(78, true));
  CHECK(f.cacher.BookmarkFrame(78, false, /*partial_metadata=*/true) !=
        f.cacher.BookmarkFrame(78, true, /*partial_metadata=*/true));
  CHECK(f.cacher.BookmarkFrame(79, true)->find("\"79\"") != std::string::npos);
}

TEST_CASE("Cacher lists one namespace in key order with selectors applied") {
  Fixture f;
  f.cacher.Replace({Pod("a", "z", 5, "", "web"), Pod("a", "y", 6, "", "db"),
                    Pod("ab", "x", 7, "", "web"), Pod("a", "w", 8, "", "web")},
                   10);
  auto list = f.cacher.List(Filter("a", "app=web"));
  REQUIRE(list.items.size() == 2);
  CHECK(list.items[0]->name() == "w");
  CHECK(list.items[1]->name() == "z");
  CHECK(list.resource_version == 10);
}

TEST_CASE("A watcher's reused batch keeps a few pieces of room, not a burst's") {
  CacheWatcher w(WatchFilter{}, 1 << 20, [] {});
  const auto frame = std::make_shared<const std::string>("event\n");
  const auto push = [&](int n) {
    std::vector<Piece> pieces(n, Piece{frame, *frame});
    w.Push(pieces, pieces.size() * frame->size(), 1);
  };
  CacheWatcher::Batch batch;
  // A burst (a watch's initial state): taken whole, its room let go once written.
  push(100);
  w.Take(&batch);
  CHECK(batch.pieces.size() == 100);
  CacheWatcher::Release(&batch);
  CHECK(batch.pieces.empty());
  CHECK(batch.pieces.capacity() <= CacheWatcher::kKeptPieces);
  CHECK(frame.use_count() == 1);  // No event kept alive by an idle watch.
  // One event at a time: the room goes back and forth between the queue and the batch.
  push(1);
  w.Take(&batch);
  REQUIRE(batch.pieces.size() == 1);
  const Piece* room = batch.pieces.data();
  CacheWatcher::Release(&batch);
  push(1);
  w.Take(&batch);  // The queue's vector (the first Take's small one) comes back.
  push(1);
  w.Take(&batch);
  CHECK(batch.pieces.data() == room);  // The same room again: no allocation per delivery.
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

TEST_CASE("Cacher starts a watch from an RV it has not reached after that RV") {
  Fixture f;
  f.cacher.Replace({}, 10);
  auto w = f.Watch(Filter(), Cacher::Start::kAfterVersion, 20);
  f.cacher.Apply(EventType::kAdded, Pod("n", "early", 15));  // In flight, below the RV.
  f.cacher.Apply(EventType::kAdded, Pod("n", "late", 21));
  CHECK(Drain(*w) == std::vector<Seen>{{"ADDED", "late", 21}});
}

}  // namespace
TEST_CASE("Cacher::NothingFor vouches only for a quiet stretch of its own window") {
  Cacher c{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  c.Replace({Pod("a", "x", 5), Pod("b", "y", 7, "", "db")}, 10);
  c.Apply(EventType::kAdded, Pod("a", "new", 11));                    // app=web
  c.Apply(EventType::kModified, Pod("b", "y", 12, "node-1", "web"));  // Leaves app=db.
  c.Apply(EventType::kAdded, Pod("c", "z", 14, "", "db"));
  REQUIRE(c.window_start_rv() == 10);
  // Namespace b's db pods: 11 is another's; 12 concerns it (it matched before).
  CHECK(c.NothingFor(Filter("b", "app=db"), 10, 11));
  CHECK_FALSE(c.NothingFor(Filter("b", "app=db"), 10, 12));
  CHECK(c.NothingFor(Filter("b", "app=db"), 12, 14));  // Namespace c's pod is not b's.
  CHECK_FALSE(c.NothingFor(Filter("", "app=db"), 12, 14));
  CHECK_FALSE(c.NothingFor(Filter(), 10, 11));
  // Before its window, or past what it has seen, it proves nothing.
  CHECK_FALSE(c.NothingFor(Filter("zzz"), 9, 11));
  CHECK_FALSE(c.NothingFor(Filter("zzz"), 10, 15));
  CHECK(c.NothingFor(Filter("zzz"), 10, 14));
}

}  // namespace kf

namespace kf {
namespace {

TEST_CASE("Cacher::ProveCurrent advances only a store equal to the upstream's list",
          "[shared_proof]") {
  struct Case {
    std::string name;
    std::vector<Cacher::Listed> listed;
    bool proven;
  };
  // The store at 10: a/x@5, a/y@7, b/z@9.
  const std::vector<Case> cases = {
      {"the same objects at the same versions", {{"a/x", 5}, {"a/y", 7}, {"b/z", 9}}, true},
      {"an object modified since", {{"a/x", 5}, {"a/y", 13}, {"b/z", 9}}, false},
      {"an object created since", {{"a/x", 5}, {"a/y", 7}, {"b/z", 9}, {"c/w", 14}}, false},
      {"an object deleted since", {{"a/x", 5}, {"b/z", 9}}, false},
      {"deleted and created again under the same name",
       {{"a/x", 5}, {"a/y", 15}, {"b/z", 9}},
       false},
      {"another object at the same count", {{"a/x", 5}, {"a/w", 7}, {"b/z", 9}}, false},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      Fixture f;
      f.cacher.Replace({Pod("a", "x", 5), Pod("a", "y", 7), Pod("b", "z", 9)}, 10);
      CHECK(f.cacher.ProveCurrent(20, c.listed) == c.proven);
      CHECK(f.cacher.resource_version() == (c.proven ? 20 : 10));
      CHECK(f.cacher.GetStats().content_proofs == (c.proven ? 1 : 0));
    }
  }
}

TEST_CASE("Cacher::ProveCurrent wakes reads waiting for the RV, and needs a synced cache",
          "[shared_proof]") {
  Fixture f;
  CHECK_FALSE(f.cacher.ProveCurrent(20, {}));  // Not synced: an empty store proves nothing.
  f.cacher.Replace({Pod("a", "x", 5)}, 10);
  bool woken = false;
  f.cacher.WaitForVersion(20, [&woken] { woken = true; });
  CHECK_FALSE(woken);
  CHECK(f.cacher.ProveCurrent(20, {{"a/x", 5}}));
  CHECK(woken);
  // Already there: true without comparing.
  CHECK(f.cacher.ProveCurrent(18, {}));
}

TEST_CASE("Cacher drops and counts events a content proof overtook, and serves the proven state",
          "[shared_proof]") {
  Fixture f;
  f.cacher.Replace({Pod("a", "x", 5)}, 10);
  auto w = f.Watch(Filter(), Cacher::Start::kAfterVersion, 10);
  REQUIRE(f.cacher.ProveCurrent(20, {{"a/x", 5}}));
  // A pod created and deleted between 10 and 20, whose events arrive after the proof: the
  // state at 20 never held it.
  f.cacher.Apply(EventType::kAdded, Pod("a", "t", 12));
  f.cacher.Apply(EventType::kDeleted, Pod("a", "t", 13));
  f.cacher.Apply(EventType::kModified, Pod("a", "x", 21));
  CHECK(Drain(*w) == std::vector<Seen>{{"MODIFIED", "x", 21}});
  CHECK(f.cacher.GetStats().events_after_proof == 2);
  // A resumed watch's replay of what the stream had delivered is not counted.
  f.cacher.Apply(EventType::kModified, Pod("a", "x", 21));
  CHECK(f.cacher.GetStats().events_after_proof == 2);
  CHECK(f.cacher.List(Filter()).items.size() == 1);
}

TEST_CASE("A metadata-only watcher gets each object's shared PartialObjectMetadata form") {
  Fixture f;
  f.cacher.Replace({Pod("a", "x", 5, "", "web")}, 10);
  WatchFilter partial = Filter("", "app=web");
  partial.partial_metadata = true;
  auto w = f.Watch(partial);
  auto full = f.Watch(Filter("", "app=web"));
  (void)full->Take();
  // The labels select (the object's), the frames carry the metadata form.
  f.cacher.Apply(EventType::kModified, Pod("a", "x", 11, "", "db"));
  std::string bytes;
  for (const Piece& p : w->Take().pieces) bytes.append(p.bytes);
  CHECK(bytes ==
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
        "\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"x\",\"namespace\":\"a\",\"uid\":\"u-x\","
        "\"resourceVersion\":\"5\",\"creationTimestamp\":\"2026-11-22T00:00:00Z\","
        "\"labels\":{\"app\":\"web\"}}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
        "\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"x\",\"namespace\":\"a\",\"uid\":\"u-x\","
        "\"resourceVersion\":\"11\",\"creationTimestamp\":\"2026-11-22T00:00:00Z\","
        "\"labels\":{\"app\":\"web\"}}}}\n");
  CHECK(Drain(*full) == std::vector<Seen>{{"DELETED", "x", 11}});
  // Built once per object and shared.
  const ObjectPtr obj = f.cacher.Get("a/x").first;
  CHECK(obj->PartialMetadata().get() == obj->PartialMetadata().get());
  CHECK(obj->PartialMetadata()->list_item().first.empty());
  // Bookmarks in that form too.
  f.cacher.SetBookmarkTemplate(
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"3\"},"
      "\"spec\":{\"containers\":null},\"status\":{}}");
  CHECK(*f.cacher.BookmarkFrame(12, partial, /*initial_events_end=*/true) ==
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
        "\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"12\",\"annotations\":{"
        "\"k8s.io/initial-events-end\":\"true\"}}}}\n");
  CHECK(*f.cacher.BookmarkFrame(12) ==
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"resourceVersion\":\"12\"},\"spec\":{\"containers\":null},\"status\":{}}}\n");
}

TEST_CASE("A watcher of a dropManagedFields flow gets each object's shared form without them") {
  Fixture f;
  f.cacher.Replace({}, 10);
  WatchFilter dropped = Filter("", "app=web");
  dropped.drop_managed_fields = true;
  WatchFilter dropped_metadata = dropped;
  dropped_metadata.partial_metadata = true;
  auto w = f.Watch(dropped);
  auto m = f.Watch(dropped_metadata);
  auto full = f.Watch(Filter("", "app=web"));
  const std::string managed = R"(,"managedFields":[{"manager":"kubectl","operation":"Update"}])";
  std::string json = PodJson("a", "x", 11);
  json.insert(json.find("}},\"spec\"") + 1, managed);
  auto pod = CachedObject::FromJson(PodsType(), json);
  REQUIRE(pod.ok());
  f.cacher.Apply(EventType::kAdded, *pod);
  auto frame = [](CacheWatcher& watcher) {
    std::string bytes;
    for (const Piece& p : watcher.Take().pieces) bytes.append(p.bytes);
    return bytes;
  };
  CHECK(frame(*w) == "{\"type\":\"ADDED\",\"object\":" + PodJson("a", "x", 11) + "}\n");
  CHECK(frame(*full) == "{\"type\":\"ADDED\",\"object\":" + json + "}\n");
  const std::string metadata = frame(*m);
  CHECK(metadata.find("PartialObjectMetadata") != std::string::npos);
  CHECK(metadata.find("managedFields") == std::string::npos);
}

TEST_CASE("A watcher's batch says when its oldest live event arrived, and nothing for its start") {
  using Clock = std::chrono::steady_clock;
  Clock::time_point now = Clock::now();
  Cacher cacher{PodsType(), EventRingLimits{}, [&now] { return now; }};
  cacher.Replace({Pod("b", "x", 5)}, 10);
  auto made = cacher.Watch({Filter(), Cacher::Start::kInitialState, 0, 1 << 20, [] {}});
  REQUIRE(made.ok());
  CacheWatcher& w = **made;
  CacheWatcher::Batch batch = w.Take();
  CHECK_FALSE(batch.pieces.empty());  // The initial state: not an event that arrived.
  CHECK(batch.oldest_received == Clock::time_point{});
  const Clock::time_point first = now;
  cacher.Apply(EventType::kModified, Pod("b", "x", 11));
  now += std::chrono::milliseconds(7);
  cacher.Apply(EventType::kModified, Pod("b", "x", 12));
  batch = w.Take();
  REQUIRE(batch.last_rv == 12);
  CHECK(batch.oldest_received == first);
  batch = w.Take();
  CHECK(batch.pieces.empty());
  CHECK(batch.oldest_received == Clock::time_point{});
  cacher.Apply(EventType::kModified, Pod("b", "x", 13));
  CHECK(w.Take().oldest_received == now);
}

}  // namespace
}  // namespace kf
