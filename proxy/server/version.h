// kube-fanout's version as --version prints it: the project version and, in a build from a git
// checkout, `git describe` at configure time. Defined in a source CMake writes into the build
// tree (proxy/server/version.cc.in), so a new commit recompiles that one line, not main.cc.
#ifndef KUBE_FANOUT_PROXY_SERVER_VERSION_H_
#define KUBE_FANOUT_PROXY_SERVER_VERSION_H_

namespace kf {

extern const char kVersion[];

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_SERVER_VERSION_H_
