#include "backend/local/prefix_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "backend/local/ofd_lock.hpp"
#include "backend/local/state_file.hpp"
#include "util/untrusted_file.hpp"

namespace lk {
namespace {

bool starts_with(std::string_view name, std::string_view prefix) {
  return name.starts_with(prefix);
}

// q.<n> or h.<n> with n in the 20 digits ticket_file() writes: any other name is nobody's ticket,
// whatever put it there, and is neither waited on nor shown.
bool is_ticket(std::string_view name, bool held_too) {
  if (name.size() != 22 || name[1] != '.' || !(name[0] == 'q' || (held_too && name[0] == 'h')))
    return false;
  return std::all_of(name.begin() + 2, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Calls fn(name) for every entry of the directory but "." and "..". getdents64 on a descriptor of
// its own (a listing starts at the top) rather than fdopendir, which adds an fstat and two fcntl
// calls to each of the few listings every run makes.
template <class Fn>
void for_each_entry(int dir_fd, Fn fn) {
  UniqueFd fd(openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw sys_error("cannot read lock directory");
  alignas(dirent64) char buf[8192];
  for (;;) {
    ssize_t n = getdents64(fd.get(), buf, sizeof buf);
    // A directory already removed (by a holder's cleanup, or by hand) lists as ENOENT: empty.
    if (n == 0 || (n < 0 && errno == ENOENT)) return;
    if (n < 0) throw sys_error("cannot read lock directory");
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + at);
      at += e->d_reclen;
      if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") fn(e->d_name);
    }
  }
}

}  // namespace

bool leads_to(const std::string& path, const struct stat& ours) {
  struct stat now;
  return stat(path.c_str(), &now) == 0 && ours.st_dev == now.st_dev && ours.st_ino == now.st_ino;
}

bool leads_to(const std::string& path, int fd) {
  struct stat ours;
  return fstat(fd, &ours) == 0 && leads_to(path, ours);
}

std::vector<std::string> locked_contents(int dir_fd, std::string_view kind) {
  std::vector<std::string> names, contents;
  for_each_entry(dir_fd, [&](const char* name) {
    if (starts_with(name, kind)) names.emplace_back(name);
  });
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    UniqueFd fd = open_untrusted_file(dir_fd, name.c_str(), O_RDONLY);
    if (!fd || !is_locked_elsewhere(fd.get())) continue;
    // Too large to be a record: shown as one that cannot be read.
    contents.push_back(read_state_file(fd.get()).value_or(""));
  }
  return contents;
}

PrefixDir PrefixDir::enter(int state_fd, const std::string& state_path, const std::string& name,
                           Deadline deadline, const Interrupt& interrupt) {
  for (;;) {
    PrefixDir d(state_fd, state_path + "/" + name, name);
    bool made = mkdirat(state_fd, name.c_str(), 0700) == 0;
    if (!made && errno != EEXIST) throw sys_error("cannot create " + d.path_);
    d.dir_.reset(openat(state_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d.dir_) {
      if (errno == ENOENT) continue;  // removed by a cleanup since our mkdir
      throw sys_error("cannot open " + d.path_);
    }
    d.meta_ = open_untrusted_file(d.dir_.get(), "meta", O_RDWR | O_CREAT);
    if (!d.meta_) {
      if (errno == ENOENT) continue;
      auto error = state_file_error(d.path("meta"));
      // Out of inodes, say: leave no empty directory behind (if another run has put its meta
      // file in it meanwhile, the removal fails, as it should).
      if (made) unlinkat(state_fd, name.c_str(), AT_REMOVEDIR);
      throw error;
    }
    LockTarget meta{d.meta_.get(), LockKind::exclusive};
    if (!lock_any({&meta, 1}, deadline, interrupt))
      throw AcquireTimeout("timed out waiting for " + d.path("meta"));
    struct stat st;
    if (fstat(d.meta_.get(), &st) < 0) throw sys_error("cannot inspect " + d.path("meta"));
    if (st.st_nlink > 0) return d;
    // A cleanup removed the prefix while we waited for its lock: start over.
  }
}

std::string PrefixDir::path(const std::string& file) const { return path_ + "/" + file; }

bool PrefixDir::lock_meta(Deadline deadline, const Interrupt& interrupt) {
  LockTarget meta{meta_.get(), LockKind::exclusive};
  return lock_any({&meta, 1}, deadline, interrupt).has_value();
}

void PrefixDir::unlock_meta() { unlock(meta_.get()); }

std::optional<Meta> parse_meta(std::string_view text) {
  Meta m;
  if (text.empty()) return m;
  // Fixed width (see write_meta): anything longer is not ours, and sscanf needs a terminator.
  char buf[128] = {};
  if (text.size() >= sizeof buf) return std::nullopt;
  text.copy(buf, text.size());
  if (std::sscanf(buf, "limit %d next %" SCNu64, &m.limit, &m.next_ticket) != 2 || m.limit < 0)
    return std::nullopt;
  return m;
}

Meta PrefixDir::read_meta() const {
  char buf[128];
  ssize_t n = pread(meta_.get(), buf, sizeof buf, 0);
  if (n < 0) throw sys_error("cannot read " + path("meta"));
  auto m = parse_meta(std::string_view(buf, static_cast<std::size_t>(n)));
  if (!m) throw Error(path("meta") + " is corrupt; remove " + path_ + " once nobody uses it");
  return *m;
}

std::string format_meta(const Meta& m) {
  char buf[80];
  int n = std::snprintf(buf, sizeof buf, "limit %10d next %20" PRIu64 "\n", m.limit, m.next_ticket);
  return std::string(buf, static_cast<std::size_t>(n));
}

void PrefixDir::write_meta(const Meta& m) const {
  std::string text = format_meta(m);
  if (pwrite(meta_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw sys_error("cannot write " + path("meta"));
}

std::string PrefixDir::ticket_file(std::uint64_t number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "q.%020" PRIu64, number);  // zero-padded: sorts by arrival
  return buf;
}

std::string PrefixDir::held_file(std::uint64_t number) {
  return "h" + ticket_file(number).substr(1);
}

std::uint64_t PrefixDir::ticket_number(const std::string& file) {
  return std::strtoull(file.c_str() + 2, nullptr, 10);
}

std::string PrefixDir::slot_file(int slot) { return "slot." + std::to_string(slot); }

std::vector<std::string> PrefixDir::tickets(bool held_too) const {
  std::vector<std::string> files;
  for_each_entry(dir_.get(), [&](const char* name) {
    if (is_ticket(name, held_too)) files.emplace_back(name);
  });
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return ticket_number(a) < ticket_number(b);  // q. and h. alike
  });
  return files;
}

bool PrefixDir::any_locked(std::string_view kind, std::vector<std::string>* seen) const {
  bool locked = false;
  for_each_entry(dir_.get(), [&](const char* name) {
    if (locked || std::string_view(name) == "meta" || !starts_with(name, kind)) return;
    // Anything but a regular file is no ticket or slot of ours: neither locked nor ours to remove.
    UniqueFd fd = open_untrusted_file(dir_.get(), name, O_RDONLY);
    if (!fd) return;
    if (seen) seen->emplace_back(name);
    if (is_locked_elsewhere(fd.get())) locked = true;
  });
  return locked;
}

bool PrefixDir::someone_waits() const { return any_locked("q."); }

bool PrefixDir::moved() const { return !leads_to(path_, dir_.get()); }

bool PrefixDir::remove_if_idle() {
  std::vector<std::string> names;  // one listing tells whether any is locked, and what to remove
  if (any_locked("", &names)) return false;
  for (const auto& name : names)
    if (starts_with(name, "q.") || starts_with(name, "h.") || starts_with(name, "slot."))
      remove_if_ours(dir_.get(), name.c_str());
  // Another user's meta file stays, and so does the prefix with it; so does their directory.
  if (!remove_if_ours(dir_.get(), "meta")) return false;
  // Fails harmlessly when a newcomer has just created a fresh meta file in it.
  remove_if_ours(state_fd_, name_.c_str(), AT_REMOVEDIR);
  return true;
}

void PrefixDir::tidy() noexcept {
  try {
    // Whoever holds the meta lock may be tidying too and have found us still there: wait for it
    // a moment rather than both leave the files behind, but not for a stopped process.
    LockTarget meta{meta_.get(), LockKind::exclusive};
    if (!meta_ || !lock_any({&meta, 1}, Deadline::after(std::chrono::milliseconds(200)), {}))
      return;
    remove_if_idle();
    unlock_meta();
  } catch (...) {
    // Only tidiness is lost: the next user of the prefix cleans up.
  }
}

}  // namespace lk
