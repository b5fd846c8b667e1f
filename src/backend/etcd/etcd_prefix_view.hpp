#pragma once
// What -status -watch knows of an etcd prefix: its queue as of one revision, kept current by
// applying a watch's events in order. Every state the prefix goes through is seen, not only the
// latest, and a quiet prefix costs no request.
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
PrefixStatus status_of(const std::string& prefix, const std::vector<Contender>& by_revision);

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
  std::string prefix_;
  std::map<std::string, Contender> contenders_;  // by key
  std::int64_t read_at_ = 0, revision_ = 0;
};

}  // namespace lk
