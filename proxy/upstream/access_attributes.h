// AccessAttributes: what a SubjectAccessReview asks about, as the apiserver's authorizer sees a
// request: verb, group, version, resource, namespace, name, and for list and watch the request's
// field and label selectors; or, for a non-resource request, verb and path. Value type.
#ifndef KUBE_FANOUT_UPSTREAM_ACCESS_ATTRIBUTES_H_
#define KUBE_FANOUT_UPSTREAM_ACCESS_ATTRIBUTES_H_

#include <string>

#include "common/api/request_info.h"

namespace kf {

// The authorizer's resource attributes, or its non-resource ones (`path` set: verb and path
// only, as for /metrics).
struct AccessAttributes {
  std::string verb, group, version, resource, namespace_, name;
  std::string field_selector, label_selector;  // Raw, as the request's query gave them.
  std::string path;                            // A non-resource request's URL path.

  // The request's attributes (selectors for list and watch only, as the apiserver's).
  static AccessAttributes Of(const RequestInfo& info);
  // The same verb on the whole resource: every namespace and name, no selectors.
  AccessAttributes WholeResource() const;
  bool IsWholeResource() const;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_ACCESS_ATTRIBUTES_H_
