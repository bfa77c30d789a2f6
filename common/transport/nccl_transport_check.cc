// nccl-transport-check: links the NCCL activation transport (proving it builds
// and links against libnccl + libcudart where they were found). With --probe
// it asks NCCL for a unique id (needs a GPU-capable machine); --help / no
// flags only print what it is.
#include <cstring>
#include <iostream>

#include "common/transport/nccl_activation_transport.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) {
    auto id = windquant::transport::NcclUniqueId();
    if (!id.ok()) {
      std::cerr << "nccl: " << id.status().message() << "\n";
      return 1;
    }
    std::cout << "nccl unique id: " << id->size() << " bytes\n";
    return 0;
  }
  std::cout << "usage: nccl-transport-check [--probe]\n"
               "Built with the NCCL activation transport (WQ_HAVE_NCCL).\n";
  return 0;
}
