// The fuzz targets' seeds that a writer of kube-fanout's makes (tests/fuzz/corpus/TARGET/NAME):
// a test builds the bytes with the product's code and checks the committed seed is them, so a
// format change cannot leave the fuzzer starting from files the reader refuses. After such a
// change, KF_WRITE_FUZZ_SEEDS=1 kf_cache_tests rewrites them (then commit the files).
#ifndef KUBE_FANOUT_TESTS_CACHE_FUZZ_SEED_H_
#define KUBE_FANOUT_TESTS_CACHE_FUZZ_SEED_H_

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cache/source_dir.h"

namespace kf::testing {

inline void CheckFuzzSeed(const std::string& target, const std::string& name,
                          const std::string& bytes) {
  const std::string path =
      std::string(kf::testing::kSourceDir) + "/tests/fuzz/corpus/" + target + "/" + name;
  INFO("fuzz seed " << path << " (KF_WRITE_FUZZ_SEEDS=1 rewrites it)");
  if (std::getenv("KF_WRITE_FUZZ_SEEDS") != nullptr) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream seed;
  seed << in.rdbuf();
  CHECK(seed.str() == bytes);
}

}  // namespace kf::testing

#endif  // KUBE_FANOUT_TESTS_CACHE_FUZZ_SEED_H_
