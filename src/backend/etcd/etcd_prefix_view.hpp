#pragma once
// What -status -watch knows of an etcd prefix: its queue as of one revision, kept current by
// applying a watch's events in order, so that every state the prefix goes through is seen, not
// only the latest.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_reply.hpp"

namespace lk {

// Who holds and who waits, for contenders in create-revision order: the limit is the first
// one's, and the first that many hold.
PrefixStatus status_of_queue(const std::string& prefix, const std::vector<Contender>& by_revision);

class EtcdPrefixView {
 public:
  explicit EtcdPrefixView(std::string prefix) : prefix_(std::move(prefix)) {}

  // Forgets everything for what one read saw, as of `revision`.
  void reset(const std::vector<Contender>& contenders, std::int64_t revision);
  // One watch event, in revision order; one the read already saw changes nothing. The events of
  // a revision are applied together, before revision() is trusted again.
  void apply(const WatchEvent& event);
  // Every revision up to this one is applied: a watch resumes just after it.
  std::int64_t revision() const { return revision_; }
  PrefixStatus status() const;

 private:
  // The record is read from the value once, as the key is written: a burst of writes shows the
  // prefix at each revision, and every look would otherwise read every record again.
  struct Entry {
    Contender contender;
    HolderRecord record;
  };

  std::string prefix_;
  std::map<std::string, Entry> contenders_;  // by key
  std::int64_t read_at_ = 0, revision_ = 0;
};

}  // namespace lk
