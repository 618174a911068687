// NodeShape: a node's authorization question with the node's own name taken out, so that every
// node asks it once between them instead of once each.
//
// The apiserver's Node authorizer (plugin/pkg/auth/authorizer/node/node_authorizer.go) decides
// by comparing the request with the asking node's name: its own Node by name (get) or by
// `metadata.name` (list, watch), its pods by `spec.nodeName`, its Lease and CSINode by name,
// ResourceSlices by `nodeName`; every other resource by static rules the same for all nodes;
// secrets, configmaps, volumes and claims by its graph (what the node's pods reference). RBAC
// grants to a group (system:nodes, or any further group of the node's) apply to every member
// alike, and neither ever denies (no opinion at most). So a question asked by node A is
// answered for A as it is for node B in the same groups when every whole value equal to A's
// name is B's name instead, except where the graph decides (a graph's yes for one node says
// nothing of another) and except for grants to one node's user. A probe node (a name generated
// at start, unguessable, in no binding and in the graph of nothing), in exactly the asking
// node's groups, asks the shape: its yes is every such node's (the graph and single-user
// grants can only add yeses, never take one away); its no says nothing, and the node is asked
// about itself.
//
// Pure functions; value types.
#ifndef KUBE_FANOUT_UPSTREAM_NODE_SHAPE_H_
#define KUBE_FANOUT_UPSTREAM_NODE_SHAPE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/edge/request.h"
#include "proxy/upstream/access_attributes.h"

namespace kf {

// The node's name when `user` is a node whose questions may be shared by shape: user
// "system:node:NAME" (NAME not empty) in the group system:nodes, no uid, no extra. Other groups
// may be there (a node certificate's further O values): the probe asks in exactly the node's
// groups (ProbeNodeUser), so a grant to a group is every member's, the probe's as the node's,
// and nodes whose groups differ never share an answer. Else nullopt.
std::optional<std::string_view> SharableNodeName(const Identity& user);

// `attrs` with `node` replaced by `probe` wherever it is a whole value: the name, a field
// selector term's value (spec.nodeName=NODE, metadata.name=NODE). nullopt when `node` is left
// anywhere else (the namespace, a label selector, a selector's key, part of a value, the path)
// or `probe` is already there: such a question is not the same for every node.
std::optional<AccessAttributes> NodeShape(const AccessAttributes& attrs, std::string_view node,
                                          std::string_view probe);

// The probe node's user for a node in `groups`: system:node:PROBE in exactly those groups.
Identity ProbeNodeUser(std::string_view probe, const std::vector<std::string>& groups);

// A new probe node name: "kube-fanout-probe-" and 16 hex digits from the system's random
// source (a valid node name nobody binds or schedules to).
std::string NewProbeNodeName();

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_NODE_SHAPE_H_
