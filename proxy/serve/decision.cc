#include "proxy/serve/decision.h"

namespace kf {
namespace {

Decision StepTo(Step step) { return {.step = step}; }
Decision Pass(PassReason reason, bool send_back = false) {
  return {.step = Step::kPass, .pass = reason, .send_back = send_back};
}
Decision Refuse(RefuseReason reason) { return {.step = Step::kRefuse, .refuse = reason}; }

// Once the user may read it: a cache still initializing, the watch bounds, and for a GET or LIST
// the resourceVersion it must reflect (the apiserver's consistent read: delegator.go GetList).
Decision DecideAllowed(const ServeFacts& f, bool initializing) {
  if (f.ask_cbor) return StepTo(Step::kAskCbor);  // (Answered in another form meanwhile.)
  if (initializing) return Refuse(RefuseReason::kInitializing);
  if (f.verb == ReadVerb::kWatch) {
    if (f.watch_slots_bounded && !f.slot) return StepTo(Step::kTakeWatchSlot);
    if (f.slot == WatchSlots::Refused::kTotal) return Refuse(RefuseReason::kWatchersTotal);
    if (f.slot == WatchSlots::Refused::kPerUser) return Refuse(RefuseReason::kWatchersPerUser);
    return StepTo(Step::kServe);  // ServeWatch decides where it starts (RequiredVersion there).
  }
  if (f.consistent && !f.consistent_turn) return StepTo(Step::kTakeConsistentTurn);
  if (f.consistent_turn == true) return Pass(PassReason::kConsistentTurn);
  if (!f.freshness) return StepTo(Step::kRequireVersion);
  switch (*f.freshness) {
    case Freshness::Verdict::kServe:
      return StepTo(Step::kServe);
    case Freshness::Verdict::kPassThrough:
      return Pass(PassReason::kUnprovable);
    case Freshness::Verdict::kTooLarge:
      return Refuse(RefuseReason::kTooLargeResourceVersion);
    case Freshness::Verdict::kUnproven:
      return Refuse(RefuseReason::kUnproven);
  }
  return Pass(PassReason::kUnprovable);
}

// Who asks, and whether they may: the apiserver's answers (TokenReview, SubjectAccessReview).
// Unknown users and denied access are the apiserver's to refuse; a review with no answer is
// answered 429 here rather than turning kube-fanout's overload into the apiserver's. Nothing
// once the user is known to be allowed.
std::optional<Decision> Review(const ServeFacts& f) {
  const bool watch = f.verb == ReadVerb::kWatch;
  switch (f.who) {
    case Who::kUnasked:
      if (f.lookup_unavailable) return Refuse(RefuseReason::kTokenReviewUnavailable);
      if (f.lookup_throttled) return Refuse(RefuseReason::kTokenReviewThrottled);
      return StepTo(Step::kAuthenticate);
    case Who::kUnavailable:
      return Refuse(RefuseReason::kTokenReviewUnavailable);
    case Who::kThrottled:
      return Refuse(RefuseReason::kTokenReviewThrottled);
    case Who::kNoUser:
      // Anonymous, or a credential the apiserver refused: the apiserver's for good.
      return Pass(PassReason::kUnknownUser);
    case Who::kUser:
      break;
  }
  if (!f.access) return StepTo(Step::kReviewAccess);
  if (*f.access == Access::kUnavailable) return Refuse(RefuseReason::kAccessReviewUnavailable);
  // The apiserver's authorizer may say yes before the denial expires here: a watch comes back.
  if (*f.access != Access::kAllowed) return Pass(PassReason::kDenied, watch);
  return std::nullopt;
}

Decision DecideReviewed(const ServeFacts& f, bool initializing) {
  if (std::optional<Decision> d = Review(f)) return *d;
  return DecideAllowed(f, initializing);
}

// Whether the upstream serves CBOR, or what it does with drop=, is asked (LISTs upstream) for a
// user allowed to read the kind only: an unknown client makes kube-fanout ask the apiserver
// nothing. Meanwhile the request is the apiserver's.
Decision DecideProbe(const ServeFacts& f, Step ask) {
  if (std::optional<Decision> d = Review(f)) {
    return d->step == Step::kPass || d->step == Step::kRefuse ? Pass(PassReason::kRepresentation)
                                                              : *d;
  }
  return StepTo(ask);
}

// Which cache answers, and whether as PartialObjectMetadata (ChooseForm, drop= aside).
Form ChooseCache(ReadVerb verb, const Representation& r, bool has_protobuf,
                 bool items_have_type_meta) {
  const bool partial = r.conversion == Conversion::kPartialMetadata ||
                       r.conversion == Conversion::kPartialMetadataList;
  const bool list_form = r.conversion == Conversion::kPartialMetadataList;
  if (r.conversion == Conversion::kApiserver ||
      (partial && (items_have_type_meta || (verb == ReadVerb::kList) != list_form))) {
    return {};
  }
  switch (r.media) {
    case MediaChoice::kJson:
      return {Form::Cache::kJson, partial};
    case MediaChoice::kProtobuf:
      if (has_protobuf) return {Form::Cache::kProtobuf, partial};
      break;
    case MediaChoice::kCbor:  // From the JSON cache's objects; no metadata form in CBOR yet.
      if (!partial) return {Form::Cache::kJson, false, /*cbor=*/true};
      break;
    case MediaChoice::kApiserver:
      break;
  }
  return {};
}

}  // namespace

Form ChooseForm(ReadVerb verb, const Representation& r, bool has_protobuf,
                bool items_have_type_meta) {
  Form form = ChooseCache(verb, r, has_protobuf, items_have_type_meta);
  if (form.cache != Form::Cache::kNone) form.drop_managed_fields = r.drop_managed_fields;
  return form;
}

Who WhoOf(const Authentication& who) {
  if (who.unavailable) return Who::kUnavailable;
  if (who.throttled) return Who::kThrottled;
  return who.user ? Who::kUser : Who::kNoUser;
}

Decision Decide(const ServeFacts& f) {
  if (!f.cacheable) return Pass(PassReason::kNotCacheable);
  // Known already (the identity filter's answer) to be no user: the apiserver's at once, not
  // kept waiting for a cache starting.
  if (f.who == Who::kNoUser) return Pass(PassReason::kUnknownUser);
  if (!f.cached) return StepTo(Step::kFindCache);
  if (!*f.cached) return Pass(PassReason::kNotCached);
  if (f.form.cache == Form::Cache::kNone) {
    if (f.ask_cbor) return DecideProbe(f, Step::kAskCbor);
    return f.ask_drop ? DecideProbe(f, Step::kAskDrop) : Pass(PassReason::kRepresentation);
  }
  // A protobuf cache still starting is waited for, unless its reflector has failed. It is
  // started (a LIST and a watch upstream, and a cache's memory) for a user allowed to read the
  // kind only: an unknown client's request is the apiserver's to answer.
  if (f.form.cache == Form::Cache::kProtobuf && f.sync == Sync::kSyncing) {
    if (std::optional<Decision> d = Review(f)) return *d;
    return StepTo(Step::kWaitSynced);
  }
  // Not synced: the apiserver's answer while its own watch cache initializes (KEP-4568) once
  // the user is known to be allowed, or, for what it would read from etcd, the apiserver's.
  // A cache whose LIST is refused will not sync: the apiserver answers.
  const bool synced = f.sync == Sync::kSynced;
  const bool initializing = !synced && !f.list_refused && f.busy_while_initializing;
  // (A watch passes here only when its cache's LIST is refused: it would not come back.)
  if (!synced && !initializing) return Pass(PassReason::kNotSynced);
  if (!f.selects) return StepTo(Step::kSelect);
  if (!*f.selects) return Pass(PassReason::kSelector);
  return DecideReviewed(f, initializing);
}

}  // namespace kf
