#pragma once
// Apache Curator's lock and semaphore layout in ZooKeeper, so that lock and a Java service using
// Curator contend for the same thing:
//
//   -n 1   InterProcessMutex on /<prefix>: every contender creates an EPHEMERAL_SEQUENTIAL node
//          /<prefix>/_c_<uuid>-lock-<10-digit sequence>; contenders sort by the text after the
//          last "lock-" and the first holds. A waiter watches only the node just ahead of it.
//   -n N   InterProcessSemaphoreV2 on /<prefix>: a contender first takes the mutex above on
//          /<prefix>/locks, then creates /<prefix>/leases/_c_<uuid>-lease-<sequence>. With at
//          most N children in leases it holds, and lets the internal mutex go; otherwise it
//          waits, still holding that mutex, for the children of leases to change.
//
// Parents are CONTAINER nodes, which the server removes once empty. "_c_<uuid>-" is Curator's
// protected mode: after a connection loss during a create, a contender finds its own node by the
// UUID instead of creating a second one. Curator stores the client's IP address in each node;
// lock stores its holder record with the limit, so that lock users can name holders and refuse
// a conflicting -n (against Curator, which stores no limit, a conflict cannot be seen).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/holder_record.hpp"

namespace lk {

inline constexpr std::string_view kLockName = "lock-";
inline constexpr std::string_view kLeaseName = "lease-";

// The node path for a prefix ("a/b" -> "/a/b").
std::string zk_path(const std::string& prefix);
// A random UUID in Java's text form, for protected mode.
std::string new_protection_id();
// "_c_<uuid>-<name>": what a create with protection and sequence asks for.
std::string protected_name(const std::string& id, std::string_view name);
// Our node among `children`, found by its protection id.
std::optional<std::string> find_protected(const std::vector<std::string>& children,
                                          const std::string& id);

// `children` in Curator's order: by the text after the last `name` ("lock-", "lease-"), or by
// the whole name for children that have none.
std::vector<std::string> curator_sorted(std::vector<std::string> children, std::string_view name);

// What lock writes into its nodes: the holder record with the limit.
std::string node_data(const HolderRecord& record, int limit);
using NodeOwner = LimitedRecord;
// nullopt for anything but lock's own data (Curator's address, another program's bytes).
std::optional<NodeOwner> parse_node_data(std::string_view data);

}  // namespace lk
