#include "proxy/serve/pass_reason.h"

namespace kf {

std::string_view PassReasonName(PassReason reason) {
  switch (reason) {
    case PassReason::kNone:
      return "none";
    case PassReason::kNotCacheable:
      return "not_cacheable";
    case PassReason::kNotCached:
      return "not_cached";
    case PassReason::kRepresentation:
      return "representation";
    case PassReason::kNotSynced:
      return "not_synced";
    case PassReason::kSelector:
      return "selector";
    case PassReason::kUnknownUser:
      return "unknown_user";
    case PassReason::kDenied:
      return "denied";
    case PassReason::kConsistentTurn:
      return "consistent_turn";
    case PassReason::kUnprovable:
      return "unprovable";
    case PassReason::kServeDeclined:
      return "serve_declined";
    case PassReason::kCount:
      break;
  }
  return "unknown";
}

}  // namespace kf
