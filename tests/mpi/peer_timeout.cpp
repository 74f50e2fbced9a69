// SPDX-License-Identifier: Apache-2.0
// A peer that never makes the call: rank 1 skips a reduction that rank 0 makes. Rank 0 must report
// a distributed_error naming the call within TESSERA_MPI_TIMEOUT instead of hanging, and its
// finalize() must end the job (MPI_Abort) rather than wait for the lost peer. ctest (mpi label)
// runs it with 2 ranks and a 2 s timeout and passes on rank 0's line below.
#include <tessera/distributed.hpp>
#include <tessera/tessera.hpp>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) {
  using namespace tessera;
  distributed::init(argc, argv);
  const Array<float, 1> a = ones<float>({1000});
  if (distributed::rank() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)sum(a);
      std::cout << "rank 0: no error (wrong)\n";
    } catch (const distributed_error& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "rank 0: distributed_error after " << static_cast<int>(s) << " s: " << e.what() << '\n' << std::flush;
      try {
        (void)sum(a);  // the layer is broken now: refused at once, no second wait
      } catch (const distributed_error& again) {
        std::cout << "rank 0: next call refused: " << again.what() << '\n' << std::flush;
      }
    }
  }
  distributed::finalize();  // rank 0: MPI_Abort (a collective was abandoned); rank 1 is taken down
  return 0;
}
