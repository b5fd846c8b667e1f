#pragma once
#include <string>

namespace lk {

// The token to send, as Consul's client picks it: `token_file`'s content, when given and not
// empty, wins over `token`. Throws Error when the file cannot be read, or is no token's.
std::string consul_token(const std::string& token, const std::string& token_file);

}  // namespace lk
