// An Admission of a YAML configuration, its clock stopped, and the AdmissionFilter asking it:
// for the tests of the filters that use admission.
#ifndef KUBE_FANOUT_TESTS_PROXY_FILTERS_ADMISSION_FIXTURE_H_
#define KUBE_FANOUT_TESTS_PROXY_FILTERS_ADMISSION_FIXTURE_H_

#include <stdexcept>
#include <string>
#include <string_view>

#include "proxy/filters/admission_filter.h"
#include "ratelimit/admission.h"

namespace kf::test {

struct AdmissionFixture {
  explicit AdmissionFixture(std::string_view yaml)
      : admission(Parsed(yaml), [] { return ratelimit::Admission::Clock::time_point{}; }) {}
  static ratelimit::Config Parsed(std::string_view yaml) {
    auto c = ratelimit::ParseConfig(yaml);
    if (!c.ok()) throw std::invalid_argument(std::string(c.status().message()));
    return *std::move(c);
  }
  asio::io_context ioc;
  ratelimit::Admission admission;
  AdmissionFilter filter{admission};
};

}  // namespace kf::test

#endif  // KUBE_FANOUT_TESTS_PROXY_FILTERS_ADMISSION_FIXTURE_H_
