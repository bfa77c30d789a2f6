// nccl-transport-check: links the NCCL pipe (proving it builds and links against
// libnccl + libcudart where they were found).
//   --probe  asks NCCL for a unique id (a machine with CUDA)
//   --pair   joins a pipe between cuda:0 (rank 0) and cuda:1 (rank 1) in two threads
//            and sends micro-batch frames both ways, bfloat16 and float32, checking
//            them bit for bit (a machine with two GPUs; NCCL refuses two ranks on one)
// --help / no flags only print what it is.
#include <cstring>
#include <iostream>
#include <thread>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "common/transport/nccl_pipe.h"

namespace windquant::transport {
namespace {

int Pair() {
  if (at::getNumGPUs() < 2) {
    std::cerr << "nccl --pair: needs two CUDA devices, this machine has " << at::getNumGPUs()
              << "\n";
    return 1;
  }
  auto down = NcclUniqueId(), up = NcclUniqueId();
  if (!down.ok() || !up.ok()) {
    std::cerr << "nccl: " << (down.ok() ? up.status() : down.status()).message() << "\n";
    return 1;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<NcclPipe>> ends[2];
  std::thread peer([&] { ends[1] = NcclPipe::Join(*down, *up, 1, 1, deadline, nullptr); });
  ends[0] = NcclPipe::Join(*down, *up, 0, 0, deadline, nullptr);
  peer.join();
  for (auto& e : ends) {
    if (!e.ok()) {
      std::cerr << "nccl join: " << e.status().message() << "\n";
      return 1;
    }
  }
  int failures = 0;
  for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    const at::Tensor x =
        at::randn({2, 64, 256}, at::TensorOptions().device(at::kCUDA, 0)).to(dtype);
    absl::StatusOr<MicroBatch> there, back;
    std::thread echo([&] {  // rank 1: receive, add one, send back
      const c10::cuda::CUDAGuard guard(1);
      there = RecvFrame(**ends[1], at::Device(at::kCUDA, 1), deadline);
      if (there.ok()) (void)SendFrame(**ends[1], MicroBatch{there->index, there->hidden + 1});
    });
    absl::Status s = SendFrame(**ends[0], MicroBatch{7, x});
    if (s.ok()) back = RecvFrame(**ends[0], at::Device(at::kCUDA, 0), deadline);
    echo.join();
    const bool ok = s.ok() && there.ok() && back.ok() && back->index == 7 &&
                    at::equal(there->hidden.to(x.device()), x) && at::equal(back->hidden, x + 1);
    std::cout << "nccl pair " << c10::toString(dtype) << ": " << (ok ? "ok" : "FAILED") << "\n";
    failures += ok ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace windquant::transport

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
  if (argc > 1 && std::strcmp(argv[1], "--pair") == 0) return windquant::transport::Pair();
  std::cout << "usage: nccl-transport-check [--probe | --pair]\n"
               "Built with the NCCL pipe for hidden states (WQ_HAVE_NCCL).\n";
  return 0;
}
