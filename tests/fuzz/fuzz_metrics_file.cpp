// -metrics-file's writer and its one reader (runner/metrics_file.hpp).
//
// Input: a line for the run (prefix, then backend, tab-separated; a third field of digits is the
// last success in milliseconds), then the text of a previous file. last_success_in must read any
// previous file without failing and give 0 or a time no later than the "now" it is given. What
// metrics_text writes for any prefix must be what node_exporter accepts: well-formed UTF-8, lines
// that are comments or one sample each ("name{labels} value"), the label values quoted and escaped
// so that they read back as the prefix (as printed, when it is not UTF-8) and the backend; and its
// last success must read back, also after another prefix's file text, or from the end of the
// earlier text, and read as none once "now" is earlier than it.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "runner/metrics_file.hpp"
#include "util/printable.hpp"

namespace {

// Later than any last success the input can give (12 digits of milliseconds).
constexpr double kNow = 2e9;

// The label values of one sample line, unescaped as the exposition format says; false when the
// line is not `name{label="value",...} number`.
bool sample(std::string_view line, std::vector<std::pair<std::string, std::string>>& labels) {
  auto open = line.find('{');
  if (open == std::string_view::npos || open == 0) return false;
  for (char c : line.substr(0, open))
    if (!(c == '_' || (c >= 'a' && c <= 'z'))) return false;
  std::size_t i = open + 1;
  while (true) {
    auto eq = line.find("=\"", i);
    if (eq == std::string_view::npos) return false;
    std::string name(line.substr(i, eq - i)), value;
    for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\n') return false;
      if (line[i] != '\\') {
        value += line[i];
        continue;
      }
      if (++i == line.size()) return false;
      if (line[i] == 'n') value += '\n';
      else if (line[i] == '\\' || line[i] == '"') value += line[i];
      else return false;
    }
    if (i == line.size()) return false;
    labels.emplace_back(name, value);
    if (++i < line.size() && line[i] == ',') {
      ++i;
      continue;
    }
    if (i >= line.size() || line[i] != '}') return false;
    auto number = line.substr(i + 1);
    return number.size() > 1 && number[0] == ' ' &&
           number.substr(1).find_first_not_of("0123456789.") == std::string_view::npos;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto newline = input.find('\n');
  std::string_view head = input.substr(0, newline);
  std::string_view previous = newline == std::string_view::npos ? "" : input.substr(newline + 1);
  auto fields = fuzz::split(head, '\t');
  fields.resize(std::max<std::size_t>(fields.size(), 3));

  lk::RunFacts run;
  run.prefix = fields[0];
  run.backend = fields[1];
  double old = lk::last_success_in(previous, run, kNow);
  FUZZ_CHECK_MSG(old == 0 || (old > 0 && old <= kNow), std::to_string(old));
  double earlier = old / 2;
  FUZZ_CHECK_MSG(lk::last_success_in(previous, run, earlier) <= earlier, std::to_string(old));

  std::string digits = fields[2].substr(0, 12);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) digits = "0";
  run.last_success = std::stod(digits) / 1000;
  run.outcome = static_cast<lk::Outcome>(size % 6);
  if (size % 2) {
    run.child_status = static_cast<int>(size % 256);
    run.ended = 1700000000.5;
  }
  std::string text = lk::metrics_text(run);
  FUZZ_CHECK_MSG(fuzz::utf8(text), fuzz::shown(text));

  std::string shown_prefix = lk::valid_utf8(run.prefix) ? run.prefix : lk::printable(run.prefix, SIZE_MAX);
  std::string shown_backend = lk::valid_utf8(run.backend) ? run.backend : lk::printable(run.backend, SIZE_MAX);
  int ones = 0;
  for (const auto& line : fuzz::split(text, '\n')) {
    if (line.empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
    std::vector<std::pair<std::string, std::string>> labels;
    FUZZ_CHECK_MSG(sample(line, labels), fuzz::shown(line));
    FUZZ_CHECK_MSG(labels.size() >= 2 && labels[0] == std::make_pair(std::string("prefix"), shown_prefix) &&
                       labels[1] == std::make_pair(std::string("backend"), shown_backend),
                   fuzz::shown(line));
    if (line.starts_with("lock_run_outcome{")) ones += line.ends_with("} 1");
  }
  FUZZ_CHECK_MSG(ones == 1, fuzz::shown(text));

  auto same = [&](double read) { return std::fabs(read - run.last_success) < 0.0006; };
  FUZZ_CHECK_MSG(same(lk::last_success_in(text, run, kNow)), fuzz::shown(text));
  if (run.last_success > 0)
    FUZZ_CHECK_MSG(lk::last_success_in(text, run, run.last_success / 2) == 0, fuzz::shown(text));
  lk::RunFacts other = run;
  other.prefix += "/other";
  std::string others = lk::metrics_text(other);
  FUZZ_CHECK_MSG(same(lk::last_success_in(others + text, run, kNow)), fuzz::shown(others + text));
  // The earlier text cannot take the place of ours when ours follows it line by line... unless
  // it records a success of this very series first, which the reader then takes as a file would.
  if (old == 0)
    FUZZ_CHECK_MSG(same(lk::last_success_in(std::string(previous) + "\n" + text, run, kNow)),
                   fuzz::shown(previous));
  return 0;
}
