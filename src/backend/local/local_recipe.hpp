#pragma once
// The local recipe, a first-come-first-served semaphore built from kernel file locks:
//
//  1. Under the meta lock, check the limit. If nobody waits and a slot is free, take it and go to
//     step 4; otherwise take the next ticket (a file we keep locked).
//  2. Wait until every ticket ahead of ours is gone. Each waiter waits only on the live ticket
//     just ahead of it, so a departure wakes one process, not the herd, and order is kept.
//  3. At the head of the queue, take whichever of the `limit` slot files frees first.
//  4. Under the meta lock, take a fencing token and record who holds the slot. With a limit of 1
//     the ticket is kept, renamed from q.<n> to h.<n>, until the slot is let go: the next in line,
//     which waits on it, wakes once, to a free slot. With more slots, holders leave the queue here
//     and the head waits on the slots themselves.
//
// Every lock is released by the kernel when its holder dies, so no crash leaves the prefix stuck.
// The slot lock is inherited by the child tree: the slot stays taken until the last process of
// the tree has gone, even if `lock` itself is killed.
#include <memory>

#include "backend/backend.hpp"
#include "backend/local/prefix_dir.hpp"

namespace lk {

// Steps 1 to 4 in the prefix's directory, entered with its meta lock held. Null when the prefix
// carried a limit that nobody uses any more and was removed: the caller starts over.
std::unique_ptr<Hold> take_turn(PrefixDir& dir, const LockSpec& spec, Deadline deadline,
                                const Interrupt& interrupt, const Queued& queued);

// One descriptor and one waiting thread per slot: a limit the descriptor limit cannot carry is
// refused up front rather than failing while others wait.
void check_limit_fits(int limit);

}  // namespace lk
