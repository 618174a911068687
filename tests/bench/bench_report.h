// BenchReport: the benchmark's output. Rows of (measure, value) printed as a Markdown table for
// people, and selected numbers as one `RESULT key=value ...` line for scripts that aggregate runs.
#ifndef KUBE_FANOUT_TESTS_BENCH_BENCH_REPORT_H_
#define KUBE_FANOUT_TESTS_BENCH_BENCH_REPORT_H_

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kf::bench {

// printf into a std::string.
std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

class BenchReport {
 public:
  void Section(std::string title) {
    sections_.push_back(rows_.size());
    rows_.push_back({std::move(title), ""});
  }
  void Row(std::string measure, std::string value) {
    rows_.push_back({std::move(measure), std::move(value)});
  }
  void Result(std::string key, std::string value) {
    results_.push_back({std::move(key), std::move(value)});
  }
  void Note(std::string text) { notes_.push_back(std::move(text)); }
  // Free text (e.g. another table) printed after the table.
  void Block(std::string text) { blocks_.push_back(std::move(text)); }

  void Print(std::FILE* out) const;

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
  std::vector<size_t> sections_;
  std::vector<std::pair<std::string, std::string>> results_;
  std::vector<std::string> notes_;
  std::vector<std::string> blocks_;
};

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_BENCH_REPORT_H_
