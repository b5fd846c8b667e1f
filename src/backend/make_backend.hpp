#pragma once
#include <memory>

#include "backend/backend.hpp"
#include "cli/options.hpp"

namespace lk {

// The backend the options ask for; throws Error with the reason when it cannot be had.
std::unique_ptr<Backend> make_backend(const Options& options);

}  // namespace lk
