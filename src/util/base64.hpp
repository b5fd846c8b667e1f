#pragma once
// Standard base64 (RFC 4648, with padding): etcd's JSON gateway sends keys and values this way,
// and so does Consul's KV API; a holder record keeps in it the exact bytes of text that is not
// UTF-8, which JSON cannot hold.
#include <optional>
#include <string>
#include <string_view>

namespace lk {

std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);  // nullopt when malformed

}  // namespace lk
