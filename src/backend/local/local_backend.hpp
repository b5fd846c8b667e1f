#pragma once
#include <string>

#include "backend/backend.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// The embedded default: file locks on this machine, under one state directory.
class LocalBackend : public Backend {
 public:
  // `state_path` as the user gave it, empty for the default. `only_look`: for status only, so a
  // missing state directory is not created.
  LocalBackend(const std::string& state_path, bool only_look);
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued& queued) override;
  // Who holds `prefix` and who waits: the status reader the registry names.
  PrefixStatus read_status(const std::string& prefix, const Wake* wake);
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override;

 private:
  std::string state_path_;
  bool must_be_private_;
  UniqueFd state_;
};

}  // namespace lk
