#include "backend/make_backend.hpp"

#include "backend/local/local_backend.hpp"

namespace lk {

std::unique_ptr<Backend> make_backend(const Options& o) {
  if (o.backend == "local")
    return std::make_unique<LocalBackend>(o.state_dir, o.state_dir_is_default, o.status);
  throw Error("the " + o.backend + " backend is not available in this version of lock (" +
              o.backend_chosen_by + "); use -backend local");
}

}  // namespace lk
