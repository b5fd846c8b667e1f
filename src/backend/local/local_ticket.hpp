#pragma once
#include <cstdint>
#include <string>

#include "backend/holder_record.hpp"
#include "backend/local/prefix_dir.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// A place in the queue, kept for as long as we wait (with a limit of 1, as long as we hold). Its
// name is removed or renamed only while it still names our file: in a shared state directory,
// another user may have put something of theirs in its place.
class Ticket {
 public:
  // Call with the meta lock held, so that a ticket is locked before anyone can see it. Takes the
  // next number from `meta` (and writes it back).
  Ticket(const PrefixDir& dir, Meta& meta, const HolderRecord& waiter);
  Ticket(Ticket&&) = default;
  ~Ticket() { leave(); }

  std::uint64_t number() const { return number_; }
  // Renamed, it no longer counts as waiting (lock status, the last one out) but stays locked, and
  // whoever waits on it waits on the same open file. If the rename fails (something is in the
  // way), the ticket keeps its name and does the same job; only lock status counts it as a
  // waiter for a while.
  void hold();
  void leave();

 private:
  int dir_fd_;  // the PrefixDir's, which outlives us
  std::uint64_t number_ = 0;
  std::string file_;
  UniqueFd fd_;
};

}  // namespace lk
