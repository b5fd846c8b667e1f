#pragma once
// A held slot of the local backend: its record and fencing token, the watch on its file's path,
// and its release.
#include <memory>
#include <optional>

#include "backend/backend.hpp"
#include "backend/local/local_ticket.hpp"
#include "backend/local/prefix_dir.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// Step 4, with the meta lock held: a new fencing token, the record of who holds, the hold. On
// failure, closing `fd` gives the slot back (LocalBackend::acquire tidies the prefix).
std::unique_ptr<Hold> hold_slot(PrefixDir& dir, int slot, UniqueFd fd, std::optional<Ticket> place,
                                HolderRecord record, Deadline deadline, const Interrupt& interrupt);

}  // namespace lk
