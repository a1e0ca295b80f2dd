// EpGroup in a build without MPI: expert parallelism across processes is refused.
#ifndef DEEPINFER_HAVE_MPI
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::parallel {

bool EpGroup::launched_by_mpirun() { return false; }
bool EpGroup::available() { return false; }

Result<std::unique_ptr<EpGroup>> EpGroup::init(int expected_ranks) {
  return unsupported(
      "--ep {}: this build has no MPI (install libopenmpi-dev and openmpi-bin, then rebuild); "
      "use --ep 1",
      expected_ranks);
}

}  // namespace deepinfer::parallel
#endif
