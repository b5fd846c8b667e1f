// The embedded default backend: the state directory and its prefixes' directories, the start
// over when they are taken away, and status. The recipe itself is in local_recipe.hpp.
#include "backend/local/local_backend.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "backend/local/local_options.hpp"
#include "backend/local/local_recipe.hpp"
#include "backend/local/local_record.hpp"
#include "backend/local/prefix_dir.hpp"
#include "backend/local/prefix_watch.hpp"
#include "backend/local/state_dir.hpp"
#include "backend/local/state_file.hpp"
#include "util/log.hpp"
#include "util/untrusted_file.hpp"

namespace lk {

std::unique_ptr<Backend> make_local_backend(const BackendConfig& config) {
  const auto& o = static_cast<const LocalOptions&>(config);
  return std::make_unique<LocalBackend>(o.state_dir, o.status_only);
}

// Without making the state directory: a missing one says that nobody has used any prefix.
PrefixStatus read_local_status(const BackendConfig& config, const std::string& prefix,
                               const Wake* wake) {
  return LocalBackend(static_cast<const LocalOptions&>(config).state_dir, true)
      .read_status(prefix, wake);
}

LocalBackend::LocalBackend(const std::string& state_path, bool only_look)
    : state_path_(state_path.empty() ? default_state_dir() : state_path),
      must_be_private_(state_path.empty()) {
  PrivateUmask creating;
  state_ = open_state_dir(state_path_, must_be_private_, !only_look);
}

std::unique_ptr<Hold> LocalBackend::acquire(const LockSpec& spec, Deadline deadline,
                                            const Interrupt& interrupt, const Queued& queued) {
  PrivateUmask creating;
  check_limit_fits(spec.limit);
  int start_overs = 0;  // bounded, so that a path that never leads back cannot make a busy loop
  for (;;) {
    std::optional<PrefixDir> dir;
    try {
      dir.emplace(PrefixDir::enter(state_.get(), state_path_, encode_prefix(spec.prefix), deadline,
                                   interrupt));
      if (auto hold = take_turn(*dir, spec, deadline, interrupt, queued)) return hold;
    } catch (const Error& e) {
      // A failure because the state or the prefix's directory was taken away meanwhile (a cleaner
      // of /tmp, rm -rf of the state directory): we were queued where nobody else looks, so
      // start over where newcomers go. Any other (out of space or inodes, say) is the run's end.
      bool gave_up =
          dynamic_cast<const AcquireTimeout*>(&e) || dynamic_cast<const Interrupted*>(&e);
      bool moved = dir ? dir->moved() : !leads_to(state_path_, state_.get());
      bool start_over = !gave_up && ++start_overs <= 10 && moved;
      // Our ticket and slot are closed by now; what this run created goes too, unless someone
      // else uses the prefix.
      if (dir) dir->tidy();
      if (!start_over) throw;
      verbose("{}; the state directory was removed or moved meanwhile: starting over", e.what());
      state_ = open_state_dir(state_path_, must_be_private_, /*create=*/true);
    } catch (...) {
      if (dir) dir->tidy();
      throw;
    }
  }
}

PrefixStatus LocalBackend::read_status(const std::string& prefix, const Wake*) {
  PrefixStatus status;
  if (!state_) return status;  // no state directory: nobody has used any prefix
  std::string name = encode_prefix(prefix);
  UniqueFd dir(openat(state_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return status;  // nobody has used it, or the last one out removed it
    throw sys_error("cannot open " + state_path_ + "/" + name);
  }
  for (const auto& text : locked_contents(dir.get(), "slot."))
    status.holders.push_back(parse_record(text));
  for (const auto& text : locked_contents(dir.get(), "q."))
    status.waiters.push_back(parse_record(text));
  if (status.holders.empty() && status.waiters.empty()) return status;
  UniqueFd meta = open_untrusted_file(dir.get(), "meta", O_RDONLY);
  auto text = meta ? read_state_file(meta.get()) : std::nullopt;
  if (auto m = text ? parse_meta(*text) : std::nullopt) status.limit = m->limit;
  return status;
}

void LocalBackend::watch_status(const std::string& prefix, Deadline deadline,
                                const Interrupt& interrupt,
                                const std::function<void(const PrefixStatus&)>& show) {
  using Woken = PrefixWatch::Woken;
  // A record is written just after its file is locked: a look in between sees a holder or a
  // waiter, and not yet who. The write is an event of its own, which comes at once; a record that
  // does not (another program's lock on a file of ours) is shown as it is after this long.
  constexpr auto kRecordDue = std::chrono::milliseconds(200);
  if (!state_) {  // made as any run makes it, so that the first prefix made in it is seen
    PrivateUmask creating;
    state_ = open_state_dir(state_path_, must_be_private_, true);
  }
  PrefixWatch watch(state_.get(), encode_prefix(prefix));
  for (Woken woken = Woken::event; woken == Woken::event;) {
    watch.arm();
    PrefixStatus s = read_status(prefix, nullptr);
    auto unwritten = [](const HolderRecord& r) { return !r.says_who(); };
    if (std::any_of(s.holders.begin(), s.holders.end(), unwritten) ||
        std::any_of(s.waiters.begin(), s.waiters.end(), unwritten)) {
      woken = watch.wait(Deadline::earlier(deadline, Deadline::after(kRecordDue)), interrupt);
      if (woken == Woken::event) continue;
      if (woken == Woken::stop || deadline.passed()) return;
    }
    show(s);
    woken = watch.wait(deadline, interrupt);
  }
}

}  // namespace lk
