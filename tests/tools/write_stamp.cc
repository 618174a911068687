#include "tests/tools/write_stamp.h"

#include <time.h>

namespace kf::tools {

int64_t UnixNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace kf::tools
