// RequestInfo: what a request asks for, parsed once from its method and target and read by every
// later stage (routing, the cache, admission, logs).
//
// Mirrors kube-apiserver's RequestInfoFactory (k8s.io/apiserver/pkg/endpoints/request/
// requestinfo.go): the API prefixes "api" (groupless) and "apis", the special path verbs "watch"
// and "proxy", the namespace subresources "status" and "finalize", GET without a name becoming
// "list" or "watch", DELETE without a name becoming "deletecollection", and a metadata.name field
// selector naming the object of a list or watch. Value type.
#ifndef KUBE_FANOUT_COMMON_API_REQUEST_INFO_H_
#define KUBE_FANOUT_COMMON_API_REQUEST_INFO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/api/query.h"

namespace kf {

struct RequestInfo {
  bool is_resource_request = false;
  std::string path;  // Decoded URL path.
  std::string verb;  // get list watch create update patch delete deletecollection proxy, or the
                     // lower-cased HTTP method for non-resource requests.
  std::string api_prefix;  // "api" or "apis".
  std::string api_group;   // "" for the core group.
  std::string api_version;
  std::string namespace_;
  std::string resource;
  std::string subresource;
  std::string name;
  std::vector<std::string> parts;     // Path parts from the resource on.
  bool verb_via_path_prefix = false;  // Legacy /watch/... or /proxy/... paths.
  bool name_from_field_selector = false;
  std::string label_selector;  // Raw, for list/watch/deletecollection requests.
  std::string field_selector;
  Query query;

  // Parses an HTTP method and request target ("/api/v1/pods?watch=1"). Fails only for the one
  // case the apiserver rejects: a special verb with nothing after it ("/api/v1/watch").
  static absl::StatusOr<RequestInfo> Parse(std::string_view method, std::string_view target);

  // "pods", "deployments.apps", ... : resource and group, as the apiserver names them in messages.
  std::string GroupResource() const;
  // The verb of a collection request (list, watch, deletecollection) and the selectors
  // authorization sees; part of Parse.
  void ResolveCollectionVerb();
  // Events, core or events.k8s.io (a separate upstream may carry them; the spam filter judges
  // their creations).
  bool IsEvents() const { return IsEventsResource(api_group, resource); }
  bool IsEventCreation() const { return verb == "create" && IsEvents(); }
  static bool IsEventsResource(std::string_view group, std::string_view resource) {
    return resource == "events" && (group.empty() || group == "events.k8s.io");
  }
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_REQUEST_INFO_H_
