#include "proxy/upstream/access_attributes.h"

namespace kf {

AccessAttributes AccessAttributes::Of(const RequestInfo& info) {
  AccessAttributes a;
  a.verb = info.verb;
  a.group = info.api_group;
  a.version = info.api_version;
  a.resource = info.resource;
  a.namespace_ = info.namespace_;
  a.name = info.name;
  // The apiserver hands selectors to its authorizers for list, watch and deletecollection only.
  if (info.verb == "list" || info.verb == "watch") {
    a.field_selector = std::string(info.query.First("fieldSelector").value_or(""));
    a.label_selector = std::string(info.query.First("labelSelector").value_or(""));
  }
  return a;
}

AccessAttributes AccessAttributes::WholeResource() const {
  return {.verb = verb, .group = group, .version = version, .resource = resource};
}

bool AccessAttributes::IsWholeResource() const {
  return namespace_.empty() && name.empty() && field_selector.empty() && label_selector.empty();
}

}  // namespace kf
