#pragma once
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "cli/options.hpp"

namespace lk {

// Whether this executable carries `backend`: the static lock carries only the local one and
// hands the others over to a companion (companion.hpp).
bool built_in(const std::string& backend);

// The backend the options ask for; throws Error with the reason when it cannot be had.
std::unique_ptr<Backend> make_backend(const Options& options);

}  // namespace lk
