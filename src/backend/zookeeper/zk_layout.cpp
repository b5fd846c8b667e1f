#include "backend/zookeeper/zk_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace lk {

std::string zk_path(const std::string& prefix) { return "/" + prefix; }

std::string new_protection_id() {
  std::random_device device;
  std::uniform_int_distribution<unsigned> byte(0, 255);
  unsigned char b[16];
  for (auto& x : b) x = static_cast<unsigned char>(byte(device));
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4, as UUID.randomUUID()
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
}

std::string protected_name(const std::string& id, std::string_view name) {
  return "_c_" + id + "-" + std::string(name);
}

std::optional<std::string> find_protected(const std::vector<std::string>& children,
                                          const std::string& id) {
  std::string start = "_c_" + id + "-";
  for (const auto& child : children)
    if (child.starts_with(start)) return child;
  return std::nullopt;
}

std::vector<std::string> curator_sorted(std::vector<std::string> children, std::string_view name) {
  auto key = [name](const std::string& child) {
    auto at = child.rfind(name);
    return at == std::string::npos ? std::string_view(child)
                                   : std::string_view(child).substr(at + name.size());
  };
  std::stable_sort(children.begin(), children.end(),
                   [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
  return children;
}

std::string node_data(const HolderRecord& record, int limit) {
  return limited_record_json(record, limit);
}

std::optional<NodeOwner> parse_node_data(std::string_view data) {
  if (data.empty() || data.front() != '{') return std::nullopt;
  return parse_limited_record(data);
}

}  // namespace lk
