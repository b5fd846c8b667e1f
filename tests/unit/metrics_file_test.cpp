// -metrics-file: the text node_exporter reads, the last success carried over from the file's
// previous version, and the atomic replacement.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runner/metrics_file.hpp"
#include "util/error.hpp"

using lk::Outcome;
using lk::RunFacts;

namespace {

// The "now" the reader of the last success is given: later than every time these tests write.
constexpr double kNow = 1800000000;

RunFacts facts(std::string prefix = "cron/backup") {
  RunFacts run;
  run.prefix = std::move(prefix);
  run.backend = "local";
  run.started = 1700000000.25;
  run.waited = 0.5;
  return run;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "metrics-test-XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("a running run: its outcome, wait and start, no child status or end yet") {
  std::string text = lk::metrics_text(facts());
  CHECK(text.find("# TYPE lock_run_outcome gauge\n") != std::string::npos);
  CHECK(text.find(
            "lock_run_outcome{prefix=\"cron/backup\",backend=\"local\",outcome=\"running\"} 1\n") !=
        std::string::npos);
  CHECK(
      text.find("lock_run_outcome{prefix=\"cron/backup\",backend=\"local\",outcome=\"ran\"} 0\n") !=
      std::string::npos);
  CHECK(text.find("lock_run_wait_seconds{prefix=\"cron/backup\",backend=\"local\"} 0.500\n") !=
        std::string::npos);
  CHECK(text.find("lock_run_start_timestamp_seconds{prefix=\"cron/backup\",backend=\"local\"} "
                  "1700000000.250\n") != std::string::npos);
  CHECK(text.find("lock_run_child_exit_status") == std::string::npos);
  CHECK(text.find("lock_run_end_timestamp_seconds") == std::string::npos);
  CHECK(text.find("lock_last_success_timestamp_seconds{prefix=\"cron/backup\",backend=\"local\"} "
                  "0.000\n") != std::string::npos);
}

TEST_CASE("an ended run: one outcome set, the child's status and the end") {
  RunFacts run = facts();
  run.outcome = Outcome::lost;
  run.child_status = 143;
  run.ended = 1700000060;
  std::string text = lk::metrics_text(run);
  for (const char* other : {"running", "ran", "conflict", "error", "interrupted", "unhealthy"})
    CHECK(text.find(std::string("outcome=\"") + other + "\"} 0\n") != std::string::npos);
  CHECK(text.find("outcome=\"lost\"} 1\n") != std::string::npos);
  run.outcome = Outcome::unhealthy;  // -check gave the lock up
  text = lk::metrics_text(run);
  CHECK(text.find("outcome=\"unhealthy\"} 1\n") != std::string::npos);
  CHECK(text.find("outcome=\"lost\"} 0\n") != std::string::npos);
  CHECK(
      text.find("lock_run_child_exit_status{prefix=\"cron/backup\",backend=\"local\"} 143.000\n") !=
      std::string::npos);
  CHECK(text.find("lock_run_end_timestamp_seconds{prefix=\"cron/backup\",backend=\"local\"} "
                  "1700000060.000\n") != std::string::npos);
}

TEST_CASE("label values are quoted as the exposition format wants, and stay UTF-8") {
  CHECK(lk::metrics_text(facts(R"(a"b\c)")).find(R"(prefix="a\"b\\c")") != std::string::npos);
  CHECK(lk::metrics_text(facts("caf\xc3\xa9")).find("prefix=\"caf\xc3\xa9\"") != std::string::npos);
  // Not UTF-8: as lock's messages show it, \xff with its backslash escaped once more.
  CHECK(lk::metrics_text(facts("a\xff")).find(R"(prefix="a\\xff")") != std::string::npos);
}

TEST_CASE("the last success is read back from the series of the same prefix and backend only") {
  RunFacts run = facts();
  run.last_success = 1699999999.5;
  std::string text = lk::metrics_text(run);
  CHECK(lk::last_success_in(text, facts(), kNow) == doctest::Approx(1699999999.5));
  CHECK(lk::last_success_in(text, facts("cron/other"), kNow) == 0);
  RunFacts etcd = facts();
  etcd.backend = "etcd";
  CHECK(lk::last_success_in(text, etcd, kNow) == 0);
  std::string series =
      "lock_last_success_timestamp_seconds{prefix=\"cron/backup\",backend=\"local\"} ";
  for (const char* bad : {"", "x", "-5", "nan", "inf", "1e400", "12 34", "12\r"})
    CHECK(lk::last_success_in(series + bad + "\n", facts(), kNow) == 0);
  CHECK(lk::last_success_in("garbage\n" + series + "42", facts(), kNow) == 42);
  CHECK(lk::last_success_in("", facts(), kNow) == 0);
}

TEST_CASE("a last success later than now is none: it would keep the alert on its age quiet") {
  std::string series =
      "lock_last_success_timestamp_seconds{prefix=\"cron/backup\",backend=\"local\"} ";
  for (const char* future : {"1e300", "9e18", "1800000000.001"})
    CHECK(lk::last_success_in(series + future + "\n", facts(), kNow) == 0);
  CHECK(lk::last_success_in(series + "1800000000\n", facts(), kNow) == kNow);
  CHECK(lk::last_success_in(series + "1700000000.5\n", facts(), 1700000000.5) == 1700000000.5);
  CHECK(lk::last_success_in(series + "1700000000.5\n", facts(), 1700000000) == 0);
}

TEST_CASE("replace_file puts the whole text in place and leaves no temporary file") {
  TempDir dir;
  auto path = (dir.path / "job.prom").string();
  lk::replace_file(path, "first\n");
  lk::replace_file(path, "second\n");
  CHECK(read(path) == "second\n");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 1);
}

TEST_CASE("replace_file names the file it cannot write, and leaves nothing behind") {
  TempDir dir;
  auto missing = (dir.path / "no" / "job.prom").string();
  CHECK_THROWS_WITH_AS(lk::replace_file(missing, "x"),
                       doctest::Contains(("cannot write " + missing + ": No such file").c_str()),
                       lk::Error);
  // A directory where the file should be: created, written, then the rename fails.
  std::filesystem::create_directory(dir.path / "job.prom");
  std::filesystem::create_directory(dir.path / "job.prom" / "inside");
  CHECK_THROWS_WITH_AS(lk::replace_file((dir.path / "job.prom").string(), "x"),
                       doctest::Contains("cannot write "), lk::Error);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 1);
}

TEST_CASE("replace_file ignores a link planted at PATH.<pid>.tmp: its temporary name is random") {
  TempDir dir;
  auto path = (dir.path / "job.prom").string();
  auto victim = dir.path / "victim";
  std::ofstream(victim) << "theirs\n";
  // The name a temporary file of this process's would have if it were named after its pid.
  auto planted = dir.path / ("job.prom." + std::to_string(getpid()) + ".tmp");
  std::filesystem::create_symlink(victim, planted);
  lk::replace_file(path, "ours\n");
  CHECK(read(path) == "ours\n");
  CHECK(read(victim) == "theirs\n");
  CHECK(std::filesystem::is_symlink(planted));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 3);
}

TEST_CASE("replace_file's file is readable by all, whatever the umask: node_exporter reads it") {
  TempDir dir;
  auto path = (dir.path / "job.prom").string();
  struct RestoreUmask {
    mode_t old = umask(077);
    ~RestoreUmask() { umask(old); }
  } restore;
  lk::replace_file(path, "x\n");
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
}
