#include "proxy/serve/decision.h"

#include <catch2/catch.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace kf {
namespace {

using Verdict = Freshness::Verdict;

// Every fact learnt, and all of them say serve: a synced JSON cache, selectors that parse, a
// user allowed, a free watch slot, the cache fresh.
ServeFacts Ready(ReadVerb verb) {
  ServeFacts f;
  f.verb = verb;
  f.cacheable = true;
  f.watch_slots_bounded = true;
  f.cached = true;
  f.form = {Form::Cache::kJson, false};
  f.sync = Sync::kSynced;
  f.selects = true;
  f.who = Who::kUser;
  f.access = Access::kAllowed;
  f.slot = WatchSlots::Refused::kNone;
  f.consistent_turn = false;
  f.freshness = Verdict::kServe;
  return f;
}

Decision Next(Step step) { return {.step = step}; }
Decision Pass(PassReason reason, bool send_back = false) {
  return {.step = Step::kPass, .pass = reason, .send_back = send_back};
}
Decision Refuse(RefuseReason reason) { return {.step = Step::kRefuse, .refuse = reason}; }

struct Row {
  std::string name;
  ReadVerb verb;
  std::function<void(ServeFacts&)> facts;  // Changes to Ready(verb).
  Decision want;
};

void Check(const Row& row) {
  ServeFacts f = Ready(row.verb);
  row.facts(f);
  const Decision got = Decide(f);
  CHECK(static_cast<int>(got.step) == static_cast<int>(row.want.step));
  CHECK(static_cast<int>(got.pass) == static_cast<int>(row.want.pass));
  CHECK(static_cast<int>(got.refuse) == static_cast<int>(row.want.refuse));
  CHECK(got.send_back == row.want.send_back);
}

const auto kGet = ReadVerb::kGet;
const auto kList = ReadVerb::kList;
const auto kWatch = ReadVerb::kWatch;

// Each row one case, in the order the rules apply (as delegator_test.go enumerates
// shouldDelegateList's cases).
const Row kRows[] = {
    // The request itself and its cache.
    {"a query form the apiserver words its own answer for passes", kList,
     [](ServeFacts& f) { f.cacheable = false; }, Pass(PassReason::kNotCacheable)},
    {"not cacheable passes before the cache is looked for", kList,
     [](ServeFacts& f) { f = ServeFacts{.verb = ReadVerb::kList}; },
     Pass(PassReason::kNotCacheable)},
    {"a cacheable read first finds its cache", kList,
     [](ServeFacts& f) { f = ServeFacts{.verb = ReadVerb::kList, .cacheable = true}; },
     Next(Step::kFindCache)},
    {"a client the identity filter found unauthenticated passes before any cache is found", kWatch,
     [](ServeFacts& f) {
       f = ServeFacts{.verb = ReadVerb::kWatch, .cacheable = true};
       f.who = Who::kNoUser;
     },
     Pass(PassReason::kUnknownUser)},
    {"a kind not cached, or not started in time, passes", kGet,
     [](ServeFacts& f) { f.cached = false; }, Pass(PassReason::kNotCached)},
    {"a representation only the apiserver renders passes", kWatch,
     [](ServeFacts& f) {
       f.form = {};
       f.sync = Sync::kSyncing;
     },
     Pass(PassReason::kRepresentation)},
    {"a protobuf cache just started is waited for", kList,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
     },
     Next(Step::kWaitSynced)},
    {"a protobuf cache not started asks who the user is before it starts", kList,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
       f.selects.reset();
       f.who = Who::kUnasked;
       f.access.reset();
     },
     Next(Step::kAuthenticate)},
    {"a protobuf cache not started asks whether the user may read the kind", kWatch,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
       f.access.reset();
     },
     Next(Step::kReviewAccess)},
    {"an unknown client starts no protobuf cache: the apiserver answers it", kList,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
       f.who = Who::kNoUser;
       f.access.reset();
     },
     Pass(PassReason::kUnknownUser)},
    {"a user denied starts no protobuf cache", kWatch,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
       f.access = Access::kDenied;
     },
     Pass(PassReason::kDenied, /*send_back=*/true)},
    {"no protobuf cache starts while the TokenReview has no answer", kList,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kSyncing;
       f.who = Who::kUnavailable;
     },
     Refuse(RefuseReason::kTokenReviewUnavailable)},
    {"CBOR not known to be served: who asks is learnt before the upstream is asked", kGet,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_cbor = true;
       f.who = Who::kUnasked;
       f.access.reset();
     },
     Next(Step::kAuthenticate)},
    {"CBOR not known to be served: asked of the upstream for a user allowed", kGet,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_cbor = true;
     },
     Next(Step::kAskCbor)},
    {"CBOR not known to be served: an unknown client's request passes, nothing asked", kGet,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_cbor = true;
       f.who = Who::kNoUser;
     },
     Pass(PassReason::kUnknownUser)},
    {"CBOR not known to be served: a TokenReview with no answer passes, nothing asked", kGet,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_cbor = true;
       f.who = Who::kUnavailable;
     },
     Pass(PassReason::kRepresentation)},
    {"CBOR not known to be served: a review with no answer passes the request", kList,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_cbor = true;
       f.access = Access::kUnavailable;
     },
     Pass(PassReason::kRepresentation)},
    {"CBOR asked, its probe sent: the request passes", kGet, [](ServeFacts& f) { f.form = {}; },
     Pass(PassReason::kRepresentation)},
    {"CBOR not known to be served, JSON accepted too: asked for a user allowed", kList,
     [](ServeFacts& f) { f.ask_cbor = true; }, Next(Step::kAskCbor)},
    {"drop= with the upstream's answer not known: asked of the upstream for a user allowed", kList,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_drop = true;
     },
     Next(Step::kAskDrop)},
    {"drop= with the upstream's answer not known: an unknown client's request passes", kList,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_drop = true;
       f.who = Who::kNoUser;
     },
     Pass(PassReason::kUnknownUser)},
    {"drop= not known, a review that said no: the request passes, nothing asked", kWatch,
     [](ServeFacts& f) {
       f.form = {};
       f.ask_drop = true;
       f.access = Access::kDenied;
     },
     Pass(PassReason::kRepresentation)},
    {"a protobuf cache synced is not waited for", kList,
     [](ServeFacts& f) { f.form.cache = Form::Cache::kProtobuf; }, Next(Step::kServe)},
    // Not synced (KEP-4568): what the apiserver reads from etcd passes, the rest is refused
    // once the user is known to be allowed.
    {"a GET of a cache not synced passes (the apiserver reads etcd)", kGet,
     [](ServeFacts& f) { f.sync = Sync::kSyncing; }, Pass(PassReason::kNotSynced)},
    {"a protobuf cache waited out passes a limited LIST", kList,
     [](ServeFacts& f) {
       f.form.cache = Form::Cache::kProtobuf;
       f.sync = Sync::kWaitedOut;
     },
     Pass(PassReason::kNotSynced)},
    {"a watch of a cache whose LIST is refused passes, not sent back (it will not sync)", kWatch,
     [](ServeFacts& f) {
       f.sync = Sync::kSyncing;
       f.busy_while_initializing = true;
       f.list_refused = true;
     },
     Pass(PassReason::kNotSynced)},
    {"an unbounded LIST of a cache initializing is refused 429", kList,
     [](ServeFacts& f) {
       f.sync = Sync::kSyncing;
       f.busy_while_initializing = true;
     },
     Refuse(RefuseReason::kInitializing)},
    {"a watch of a cache initializing is refused 429 before a slot is taken", kWatch,
     [](ServeFacts& f) {
       f.sync = Sync::kSyncing;
       f.busy_while_initializing = true;
       f.slot.reset();
     },
     Refuse(RefuseReason::kInitializing)},
    {"a cache initializing still asks who the user is first", kList,
     [](ServeFacts& f) {
       f.sync = Sync::kSyncing;
       f.busy_while_initializing = true;
       f.who = Who::kUnasked;
       f.access.reset();
     },
     Next(Step::kAuthenticate)},
    {"a cache initializing passes a user denied", kWatch,
     [](ServeFacts& f) {
       f.sync = Sync::kSyncing;
       f.busy_while_initializing = true;
       f.access = Access::kDenied;
     },
     Pass(PassReason::kDenied, /*send_back=*/true)},
    // Selectors.
    {"selectors are parsed once the cache is synced", kList,
     [](ServeFacts& f) { f.selects.reset(); }, Next(Step::kSelect)},
    {"selectors the apiserver refuses, or a shard selector not known yet, pass", kWatch,
     [](ServeFacts& f) { f.selects = false; }, Pass(PassReason::kSelector)},
    // Who, and whether they may.
    {"the user is asked for", kGet,
     [](ServeFacts& f) {
       f.who = Who::kUnasked;
       f.access.reset();
     },
     Next(Step::kAuthenticate)},
    {"a lookup that got no answer is not asked again: 429", kGet,
     [](ServeFacts& f) {
       f.who = Who::kUnasked;
       f.lookup_unavailable = true;
       f.lookup_throttled = true;
     },
     Refuse(RefuseReason::kTokenReviewUnavailable)},
    {"a lookup not made for want of budget is not asked again: 429", kGet,
     [](ServeFacts& f) {
       f.who = Who::kUnasked;
       f.lookup_throttled = true;
     },
     Refuse(RefuseReason::kTokenReviewThrottled)},
    {"a TokenReview with no answer in time: 429", kList,
     [](ServeFacts& f) { f.who = Who::kUnavailable; },
     Refuse(RefuseReason::kTokenReviewUnavailable)},
    {"a new token with the TokenReview budget spent: 429", kList,
     [](ServeFacts& f) { f.who = Who::kThrottled; }, Refuse(RefuseReason::kTokenReviewThrottled)},
    {"no user: the apiserver's to refuse", kList, [](ServeFacts& f) { f.who = Who::kNoUser; },
     Pass(PassReason::kUnknownUser)},
    {"a watch with no user passes, not sent back (the apiserver's for good)", kWatch,
     [](ServeFacts& f) { f.who = Who::kNoUser; }, Pass(PassReason::kUnknownUser)},
    {"a user's access is reviewed", kWatch, [](ServeFacts& f) { f.access.reset(); },
     Next(Step::kReviewAccess)},
    {"a SubjectAccessReview with no answer in time: 429", kGet,
     [](ServeFacts& f) { f.access = Access::kUnavailable; },
     Refuse(RefuseReason::kAccessReviewUnavailable)},
    {"a denied GET passes", kGet, [](ServeFacts& f) { f.access = Access::kDenied; },
     Pass(PassReason::kDenied)},
    {"a denied watch passes, sent back", kWatch, [](ServeFacts& f) { f.access = Access::kDenied; },
     Pass(PassReason::kDenied, /*send_back=*/true)},
    // Watch bounds.
    {"a watch takes a slot", kWatch, [](ServeFacts& f) { f.slot.reset(); },
     Next(Step::kTakeWatchSlot)},
    {"a watch with no bounds, or at the exempt level, takes none", kWatch,
     [](ServeFacts& f) {
       f.slot.reset();
       f.watch_slots_bounded = false;
     },
     Next(Step::kServe)},
    {"a watch past --max-watchers: 429", kWatch,
     [](ServeFacts& f) { f.slot = WatchSlots::Refused::kTotal; },
     Refuse(RefuseReason::kWatchersTotal)},
    {"a watch past --max-watchers-per-user: 429", kWatch,
     [](ServeFacts& f) { f.slot = WatchSlots::Refused::kPerUser; },
     Refuse(RefuseReason::kWatchersPerUser)},
    {"a watch is served, whatever its resourceVersion (ServeWatch starts it)", kWatch,
     [](ServeFacts& f) {
       f.consistent = true;
       f.consistent_turn.reset();
       f.freshness.reset();
     },
     Next(Step::kServe)},
    // A GET's or LIST's resourceVersion.
    {"a consistent read takes its turn first", kList,
     [](ServeFacts& f) {
       f.consistent = true;
       f.consistent_turn.reset();
       f.freshness.reset();
     },
     Next(Step::kTakeConsistentTurn)},
    {"a consistent read whose turn it is goes upstream", kGet,
     [](ServeFacts& f) {
       f.consistent = true;
       f.consistent_turn = true;
     },
     Pass(PassReason::kConsistentTurn)},
    {"a read at a resourceVersion takes no turn", kGet,
     [](ServeFacts& f) {
       f.consistent_turn.reset();
       f.freshness.reset();
     },
     Next(Step::kRequireVersion)},
    {"a consistent read not sent upstream waits for the version", kList,
     [](ServeFacts& f) {
       f.consistent = true;
       f.freshness.reset();
     },
     Next(Step::kRequireVersion)},
    {"a cache the upstream cannot prove current passes", kList,
     [](ServeFacts& f) { f.freshness = Verdict::kPassThrough; }, Pass(PassReason::kUnprovable)},
    {"a resourceVersion not reached in time: 504", kGet,
     [](ServeFacts& f) { f.freshness = Verdict::kTooLarge; },
     Refuse(RefuseReason::kTooLargeResourceVersion)},
    {"a consistent read not proven current in time: 429", kList,
     [](ServeFacts& f) {
       f.consistent = true;
       f.freshness = Verdict::kUnproven;
     },
     Refuse(RefuseReason::kUnproven)},
    {"a fresh GET is served", kGet, [](ServeFacts&) {}, Next(Step::kServe)},
    {"a fresh LIST is served", kList, [](ServeFacts&) {}, Next(Step::kServe)},
};

TEST_CASE("Decide serves, passes or refuses a cached kind's read as the table says") {
  for (const Row& row : kRows) {
    SECTION(row.name) { Check(row); }
  }
}

TEST_CASE("Decide's table has a row for every step and every reason") {
  std::set<int> steps, passes, refusals;
  for (const Row& row : kRows) {
    ServeFacts f = Ready(row.verb);
    row.facts(f);
    const Decision d = Decide(f);
    steps.insert(static_cast<int>(d.step));
    passes.insert(static_cast<int>(d.pass));
    refusals.insert(static_cast<int>(d.refuse));
  }
  CHECK(steps.size() == static_cast<size_t>(Step::kRefuse) + 1);
  // All but kServeDeclined, the serving step's own.
  CHECK(passes.size() == static_cast<size_t>(PassReason::kCount) - 1);
  CHECK(refusals.size() == static_cast<size_t>(RefuseReason::kUnproven) + 1);
}

TEST_CASE("Decide asks for each fact at most once, and answers within kMaxLearnSteps") {
  // The longest path: a consistent LIST of a protobuf cache just started, everything unasked.
  ServeFacts f{.verb = ReadVerb::kList, .cacheable = true, .consistent = true};
  int steps = 0;
  std::set<int> asked;
  for (Decision d = Decide(f); d.step < Step::kServe; d = Decide(f), ++steps) {
    REQUIRE(asked.insert(static_cast<int>(d.step)).second);
    switch (d.step) {
      case Step::kFindCache:
        f.cached = true;
        f.form.cache = Form::Cache::kProtobuf;
        break;
      case Step::kWaitSynced:
        f.sync = Sync::kSynced;
        break;
      case Step::kSelect:
        f.selects = true;
        break;
      case Step::kAuthenticate:
        f.who = Who::kUser;
        break;
      case Step::kReviewAccess:
        f.access = Access::kAllowed;
        break;
      case Step::kTakeConsistentTurn:
        f.consistent_turn = false;
        break;
      case Step::kRequireVersion:
        f.freshness = Verdict::kServe;
        break;
      default:
        FAIL("not asked of a LIST");
    }
  }
  CHECK(Decide(f).step == Step::kServe);
  CHECK(steps == 7);
  CHECK(steps <= kMaxLearnSteps);
}

// The steps Decide asks for a read of a synced cache whose form waits on the upstream's answer
// (`unknown` sets what is not known at kFindCache, `answered` clears it at `ask`), every fact
// learnt as allowing, until it passes or is served.
std::vector<Step> WalkToProbe(ServeFacts& f, const std::function<void(ServeFacts&)>& unknown,
                              Step ask, const std::function<void(ServeFacts&)>& answered) {
  std::vector<Step> asked;
  for (Decision d = Decide(f); d.step < Step::kServe; d = Decide(f)) {
    asked.push_back(d.step);
    REQUIRE(asked.size() <= static_cast<size_t>(kMaxLearnSteps));
    if (d.step == Step::kFindCache) {
      f.cached = true;
      unknown(f);
      f.sync = Sync::kSynced;
    } else if (d.step == Step::kAuthenticate) {
      f.who = Who::kUser;
    } else if (d.step == Step::kReviewAccess) {
      f.access = Access::kAllowed;
    } else if (d.step == ask) {
      answered(f);
    } else {
      FAIL("not asked of a read with no form");
    }
  }
  return asked;
}

TEST_CASE("Decide asks whether the upstream serves CBOR once, after the review") {
  ServeFacts f{.verb = ReadVerb::kGet, .cacheable = true};
  // The request accepts CBOR only: no form until the upstream says.
  const std::vector<Step> asked = WalkToProbe(
      f, [](ServeFacts& g) { g.ask_cbor = true; }, Step::kAskCbor,
      [](ServeFacts& g) { g.ask_cbor = false; });
  CHECK(asked == std::vector<Step>{Step::kFindCache, Step::kAuthenticate, Step::kReviewAccess,
                                   Step::kAskCbor});
  const Decision last = Decide(f);
  CHECK(last.step == Step::kPass);
  CHECK(last.pass == PassReason::kRepresentation);
}

TEST_CASE("ChooseForm picks the cache of the negotiated representation") {
  struct Case {
    std::string name;
    ReadVerb verb;
    Representation r;
    bool has_protobuf, items_have_type_meta;
    Form::Cache want;
    bool partial;
  };
  using C = Conversion;
  using M = MediaChoice;
  const Case cases[] = {
      {"JSON", kList, {M::kJson, C::kNone}, true, false, Form::Cache::kJson, false},
      {"protobuf", kGet, {M::kProtobuf, C::kNone}, true, false, Form::Cache::kProtobuf, false},
      {"protobuf of a kind with none",
       kGet,
       {M::kProtobuf, C::kNone},
       false,
       false,
       Form::Cache::kNone,
       false},
      {"YAML, pretty JSON",
       kList,
       {M::kApiserver, C::kNone},
       true,
       false,
       Form::Cache::kNone,
       false},
      {"Table", kList, {M::kJson, C::kApiserver}, true, false, Form::Cache::kNone, false},
      {"PartialObjectMetadataList to a LIST",
       kList,
       {M::kProtobuf, C::kPartialMetadataList},
       true,
       false,
       Form::Cache::kProtobuf,
       true},
      {"PartialObjectMetadata to a GET",
       kGet,
       {M::kJson, C::kPartialMetadata},
       true,
       false,
       Form::Cache::kJson,
       true},
      {"PartialObjectMetadata to a WATCH",
       kWatch,
       {M::kJson, C::kPartialMetadata},
       true,
       false,
       Form::Cache::kJson,
       true},
      {"PartialObjectMetadata to a LIST: the apiserver's 406",
       kList,
       {M::kJson, C::kPartialMetadata},
       true,
       false,
       Form::Cache::kNone,
       false},
      {"PartialObjectMetadataList to a WATCH: the apiserver's 406",
       kWatch,
       {M::kJson, C::kPartialMetadataList},
       true,
       false,
       Form::Cache::kNone,
       false},
      {"a custom resource's metadata form",
       kGet,
       {M::kJson, C::kPartialMetadata},
       false,
       true,
       Form::Cache::kNone,
       false},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const Form got = ChooseForm(c.verb, c.r, c.has_protobuf, c.items_have_type_meta);
      CHECK(static_cast<int>(got.cache) == static_cast<int>(c.want));
      CHECK(got.partial_metadata == c.partial);
    }
  }
}

TEST_CASE("WhoOf ranks a review with no answer above a user it kept") {
  Authentication who;
  CHECK(WhoOf(who) == Who::kNoUser);
  who.user = UserInfo{};
  CHECK(WhoOf(who) == Who::kUser);
  who.throttled = true;
  CHECK(WhoOf(who) == Who::kThrottled);
  who.unavailable = true;
  CHECK(WhoOf(who) == Who::kUnavailable);
}

TEST_CASE("Every pass reason has its own name") {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(PassReason::kCount); ++i) {
    names.insert(PassReasonName(static_cast<PassReason>(i)));
  }
  CHECK(names.size() == static_cast<size_t>(PassReason::kCount));
  CHECK(PassReasonName(PassReason::kDenied) == "denied");
}

TEST_CASE("Decide asks what the upstream does with drop= once, after the review") {
  ServeFacts f{.verb = ReadVerb::kList, .cacheable = true};
  // drop= asked for, unknown upstream: no form until it says.
  const std::vector<Step> asked = WalkToProbe(
      f, [](ServeFacts& g) { g.ask_drop = true; }, Step::kAskDrop,
      [](ServeFacts& g) { g.ask_drop = false; });
  CHECK(asked == std::vector<Step>{Step::kFindCache, Step::kAuthenticate, Step::kReviewAccess,
                                   Step::kAskDrop});
  CHECK(Decide(f).pass == PassReason::kRepresentation);
  // An unknown client, or one denied, makes kube-fanout ask nothing.
  for (Access access : {Access::kDenied, Access::kUnavailable}) {
    ServeFacts denied{.verb = ReadVerb::kList, .cacheable = true, .cached = true};
    denied.ask_drop = true;
    denied.who = Who::kUser;
    denied.access = access;
    CHECK(Decide(denied).step == Step::kPass);
    CHECK(Decide(denied).pass == PassReason::kRepresentation);
  }
  ServeFacts nobody{.verb = ReadVerb::kList, .cacheable = true, .cached = true};
  nobody.ask_drop = true;
  nobody.who = Who::kNoUser;
  CHECK(Decide(nobody).step == Step::kPass);
}

TEST_CASE("ChooseForm carries drop=metadata.managedFields to the form it chooses") {
  Representation r{.media = MediaChoice::kProtobuf,
                   .conversion = Conversion::kNone,
                   .drop_managed_fields = true};
  Form form = ChooseForm(ReadVerb::kGet, r, /*has_protobuf=*/true, false);
  CHECK(form.cache == Form::Cache::kProtobuf);
  CHECK(form.drop_managed_fields);
  r.media = MediaChoice::kApiserver;
  CHECK_FALSE(ChooseForm(ReadVerb::kGet, r, true, false).drop_managed_fields);
}

}  // namespace
}  // namespace kf
