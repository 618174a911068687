// The source tree's root, for tests that read committed files (tests/fuzz/corpus). Defined in a
// source CMake writes into the build tree (tests/cache/source_dir.cc.in): the tests' own
// compile commands then name no clone directory, and ccache serves them to any clone.
#ifndef KUBE_FANOUT_TESTS_CACHE_SOURCE_DIR_H_
#define KUBE_FANOUT_TESTS_CACHE_SOURCE_DIR_H_

namespace kf::testing {

extern const char kSourceDir[];

}  // namespace kf::testing

#endif  // KUBE_FANOUT_TESTS_CACHE_SOURCE_DIR_H_
