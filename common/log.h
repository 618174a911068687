// Logger: structured logs, one compact JSON object per line.
//
// Owned by main() and handed down by reference (no global logger). Thread-safe: a line is
// formatted on the caller's stack and written with a single write(2), so lines from different
// threads never interleave. Low-level code does not log; the edge (proxy/) decides what to say.
#ifndef KUBE_FANOUT_COMMON_LOG_H_
#define KUBE_FANOUT_COMMON_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace kf {

struct LogField {
  using Value = std::variant<std::string_view, int64_t, double, bool>;
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, int v) : key(k), value(int64_t{v}) {}
  LogField(std::string_view k, unsigned v) : key(k), value(int64_t{v}) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(static_cast<int64_t>(v)) {}
  LogField(std::string_view k, double v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  std::string_view key;
  Value value;
};

class Logger {
 public:
  enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

  // Writes to `fd` (not owned). Lines below `min_level` are dropped.
  explicit Logger(int fd = 2, Level min_level = Level::kInfo) : fd_(fd), min_level_(min_level) {}

  bool Enabled(Level level) const { return level >= min_level_; }
  void Log(Level level, std::string_view msg, std::initializer_list<LogField> fields = {}) const;

  void Info(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Log(Level::kInfo, msg, fields);
  }
  void Warning(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Log(Level::kWarning, msg, fields);
  }
  void Error(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    Log(Level::kError, msg, fields);
  }

  // Formats a line without writing it (used by tests).
  static std::string Format(Level level, std::string_view msg,
                            std::initializer_list<LogField> fields);

 private:
  int fd_;
  Level min_level_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_LOG_H_
