// An object without metadata.managedFields, for the flows an operator names
// (`dropManagedFields: true` in a flow schema of --admission-config): log shippers, metadata
// enrichers and other agents that never read the field, which can be most of an object's bytes.
// The answer is the object as the apiserver encodes it with managedFields empty (Go omits the
// empty member in JSON; protobuf writes no field 17 of ObjectMeta): the object's own bytes with
// that member taken out, never re-encoded. Stateless.
#ifndef KUBE_FANOUT_CACHE_MANAGED_FIELDS_H_
#define KUBE_FANOUT_CACHE_MANAGED_FIELDS_H_

#include <optional>
#include <string>
#include <string_view>

namespace kf {

// The JSON object `object` without its top-level metadata's "managedFields" member; nullopt when
// it has none (or is not an object with a metadata object). Keys in any order (custom resources'
// are sorted); compact or not.
std::optional<std::string> JsonWithoutManagedFields(std::string_view object);

// The protobuf message of an object (field 1 its ObjectMeta) without ObjectMeta's field 17;
// nullopt when it has none or does not parse.
std::optional<std::string> ProtoWithoutManagedFields(std::string_view message);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_MANAGED_FIELDS_H_
