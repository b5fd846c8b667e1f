// A prefix's holders in a table of this process: no waiting in line (a wait ends at its deadline
// or when it is interrupted, whichever comes first), no loss.
#include <poll.h>

#include <algorithm>
#include <map>

#include "memory_backend/memory_options.hpp"

namespace lk {
namespace {

struct Held {
  int limit = 0;
  std::vector<HolderRecord> holders;
};

// Table, then prefix.
std::map<std::string, std::map<std::string, Held>>& tables() {
  static std::map<std::string, std::map<std::string, Held>> all;
  return all;
}

std::uint64_t next_token() {
  static std::uint64_t token = 0;
  return ++token;
}

// Until `deadline`, or until `interrupt` says stop: false then.
bool wait_unless_stopped(Deadline deadline, const Interrupt& interrupt) {
  while (!deadline.passed()) {
    pollfd p{interrupt.fd, POLLIN, 0};
    timespec ts;
    if (ppoll(&p, 1, deadline.remaining(ts), nullptr) > 0 && !interrupt.keep_going()) return false;
  }
  return true;
}

class MemoryHold : public Hold {
 public:
  MemoryHold(Held& held, HolderRecord record) : held_(held), record_(std::move(record)) {}
  int loss_fd() const override { return -1; }
  std::optional<std::string> check_loss() override { return std::nullopt; }
  EnvVars child_env() const override {
    return {{"LOCK_FENCING_TOKEN", std::to_string(record_.token)}};
  }
  std::vector<int> child_fds() const override { return {}; }
  void hold_until(const std::string& until) override { record_.until = until; }
  void release() override {
    auto& h = held_.holders;
    h.erase(std::remove_if(h.begin(), h.end(),
                           [&](const HolderRecord& r) { return r.token == record_.token; }),
            h.end());
  }

 private:
  Held& held_;
  HolderRecord record_;
};

class MemoryBackend : public Backend {
 public:
  explicit MemoryBackend(std::string table) : table_(std::move(table)) {}

  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued&) override {
    Held& held = tables()[table_][spec.prefix];
    if (!held.holders.empty() && held.limit != spec.limit)
      throw limit_conflict(held.limit, spec.limit);
    // Nothing else in this process can free a slot meanwhile: the wait is for its end alone.
    if (static_cast<int>(held.holders.size()) >= spec.limit) {
      if (!wait_unless_stopped(deadline, interrupt))
        throw Interrupted("interrupted while waiting for the lock");
      throw AcquireTimeout("timed out waiting for prefix '" + spec.prefix + "'");
    }
    held.limit = spec.limit;
    HolderRecord record = HolderRecord::for_this_process(spec.prefix, spec.session_name);
    record.token = next_token();
    held.holders.push_back(record);
    return std::make_unique<MemoryHold>(held, record);
  }

  // Nothing changes a table while its only thread watches it.
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override {
    show(read_status(prefix));
    wait_unless_stopped(deadline, interrupt);
  }

  PrefixStatus read_status(const std::string& prefix) const {
    PrefixStatus s;
    auto table = tables().find(table_);
    if (table == tables().end()) return s;
    auto held = table->second.find(prefix);
    if (held == table->second.end() || held->second.holders.empty()) return s;
    return {held->second.limit, false, held->second.holders, {}};
  }

 private:
  std::string table_;
};

}  // namespace

std::unique_ptr<Backend> make_memory_backend(const BackendConfig& config) {
  return std::make_unique<MemoryBackend>(static_cast<const MemoryOptions&>(config).table);
}

PrefixStatus read_memory_status(const BackendConfig& config, const std::string& prefix,
                                const Wake*) {
  return MemoryBackend(static_cast<const MemoryOptions&>(config).table).read_status(prefix);
}

}  // namespace lk
