// Decide: whether a read of a cached kind is served from the cache, passed through to the
// apiserver, or refused, as one pure function of what is known about it (ServeFacts). The
// apiserver's own version of this is its cacher's delegator (staging/src/k8s.io/apiserver/pkg/
// storage/cacher/delegator.go: shouldDelegateList, shouldDelegateListOnNotReadyCache, the
// consistent read); here the cache sits in front of the apiserver instead of in front of etcd,
// so "delegate" means "pass through", and who the client is and what it may read are asked of
// the apiserver first.
//
// Some facts cost an await (the cache starting, a TokenReview, a SubjectAccessReview, the wait
// for the cache to reach a resourceVersion) or take something (a watch slot, the turn of a
// consistent read sent upstream). Decide therefore also says which fact to learn next
// (Step::kFindCache ... kRequireVersion): CacheHandler::Serve learns it, records it in the
// facts and asks again, until the answer is kServe, kPass or kRefuse. The order of the rules
// is the order the facts are learnt in, so nothing is asked that an earlier rule settles.
// README.md draws the table. Stateless.
#ifndef KUBE_FANOUT_SERVE_DECISION_H_
#define KUBE_FANOUT_SERVE_DECISION_H_

#include <optional>
#include <string_view>

#include "proxy/edge/representation.h"
#include "proxy/serve/consistent_read.h"
#include "proxy/serve/pass_reason.h"
#include "proxy/upstream/access_review.h"
#include "ratelimit/watch_slots.h"

namespace kf {

enum class ReadVerb { kGet, kList, kWatch };

// Which of a resource's caches answers, in which form: the cache of the negotiated encoding,
// and whether as PartialObjectMetadata (as=PartialObjectMetadataList to a LIST,
// as=PartialObjectMetadata to a GET or WATCH). kNone: the apiserver's answer (YAML, pretty JSON,
// Table, a metadata form asked of the other kind of endpoint, which it refuses with 406, a
// custom resource's metadata form).
struct Form {
  enum class Cache { kNone, kJson, kProtobuf };
  Cache cache = Cache::kNone;
  bool partial_metadata = false;
  bool cbor = false;  // The JSON cache's objects in CBOR (negotiated only where it can be).
  // Objects without managedFields (Accept's drop=metadata.managedFields, read by the upstream).
  bool drop_managed_fields = false;
};
// `has_protobuf`: the resource has a protobuf cache (the built-in kinds); `items_have_type_meta`:
// its list items carry apiVersion and kind (custom resources), which PartialObjectMetadata
// does not convert.
Form ChooseForm(ReadVerb verb, const Representation& representation, bool has_protobuf,
                bool items_have_type_meta);

// The chosen cache's state when the request looks at it.
enum class Sync {
  kSynced,
  kSyncing,    // Not synced yet; a protobuf cache is then waited for (WaitSynced).
  kWaitedOut,  // Waited for and still not synced.
};

// Who the request is, as the Authenticator answered (kUnasked: not asked yet).
enum class Who { kUnasked, kUser, kNoUser, kUnavailable, kThrottled };
// A review that got no answer, or was not made, outranks a user it may have kept (a stale one).
Who WhoOf(const Authentication& who);

// What is known of one read. Facts set from the request come first; each later one is
// std::nullopt (or kUnasked) until its step has run.
struct ServeFacts {
  ReadVerb verb = ReadVerb::kGet;
  bool cacheable = false;  // Cacheable(): a query form the cache answers exactly.
  // BusyWhileInitializing(): while its cache syncs, the apiserver answers 429 rather than
  // reading etcd.
  bool busy_while_initializing = false;
  // A GET or LIST with no resourceVersion and no continue token.
  bool consistent = false;
  // The identity filter's lookup got no answer in time, or was not made for want of budget:
  // not asked again.
  bool lookup_unavailable = false, lookup_throttled = false;
  // --max-watchers or --max-watchers-per-user set, and the request not at the exempt level.
  bool watch_slots_bounded = false;

  std::optional<bool> cached;  // kFindCache: a cache of this kind started in time.
  Form form;                   // kFindCache: the cache chosen.
  Sync sync = Sync::kSyncing;  // kFindCache, kWaitSynced.
  bool list_refused = false;   // kFindCache, kWaitSynced: its reflector's LIST was refused.
  // kFindCache: CBOR asked for, and whether the upstream serves it not known yet (then the
  // form is another the request accepts, or none); kAskCbor: asked.
  bool ask_cbor = false;
  // kFindCache: drop= asked for, and what the upstream does with it not known yet (then the
  // form is none); kAskDrop: asked.
  bool ask_drop = false;
  std::optional<bool> selects;   // kSelect: the selectors parse as this kind's (FilterFor).
  Who who = Who::kUnasked;       // kAuthenticate.
  std::optional<Access> access;  // kReviewAccess.
  std::optional<WatchSlots::Refused> slot;      // kTakeWatchSlot.
  std::optional<bool> consistent_turn;          // kTakeConsistentTurn: sent upstream.
  std::optional<Freshness::Verdict> freshness;  // kRequireVersion.
};

// What to learn next, or what to do.
enum class Step {
  kFindCache,           // The kind's cache, once started (FindOnceStarted), and ChooseForm.
  kWaitSynced,          // A protobuf cache not synced: started (UseProtobuf), its LIST waited.
  kAskCbor,             // Reflector::AskCbor: whether the upstream serves CBOR for the kind.
  kAskDrop,             // Reflector::AskDrop: what the upstream does with drop=.
  kSelect,              // FilterFor.
  kAuthenticate,        // Authenticator (a TokenReview, or the client certificate).
  kReviewAccess,        // AccessReview (a SubjectAccessReview with the request's selectors).
  kTakeWatchSlot,       // WatchSlots::Take.
  kTakeConsistentTurn,  // Reflector::TakeConsistentPassthrough.
  kRequireVersion,      // RequiredVersion.
  kServe,               // Answer from the chosen cache (ServeFacts::form).
  kPass,                // Pass through, for `pass`.
  kRefuse,              // Answer the Status of `refuse`.
};

// Why a read of a cached kind is refused (answered with a Status, not passed through).
enum class RefuseReason {
  kNone,
  kTokenReviewUnavailable,   // 429: the TokenReview got no answer in time.
  kTokenReviewThrottled,     // 429: a new token, and the TokenReview budget spent.
  kAccessReviewUnavailable,  // 429: the SubjectAccessReview got no answer in time.
  kInitializing,             // 429 "storage is (re)initializing".
  kWatchersTotal,            // 429: --max-watchers.
  kWatchersPerUser,          // 429: --max-watchers-per-user.
  kTooLargeResourceVersion,  // 504 "Too large resource version".
  kUnproven,                 // 429: a consistent read not proven current in time.
};

struct Decision {
  Step step = Step::kPass;
  PassReason pass = PassReason::kNone;
  RefuseReason refuse = RefuseReason::kNone;
  // kPass of a watch whose review said no (the apiserver's authorizer may say yes before the
  // denial kept here expires): sent upstream with a shorter timeout (watch_return.h).
  bool send_back = false;
};

// The next step for a read with these facts.
Decision Decide(const ServeFacts& facts);

// The most steps Decide asks for before an answer (each learns one fact).
inline constexpr int kMaxLearnSteps = 8;

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_DECISION_H_
