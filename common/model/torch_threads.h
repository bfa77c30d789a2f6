// SetTorchThreads: how a process sets torch's intra-op threads (model.threads,
// eval --threads, the pretrainer's): at::set_num_threads(threads) for threads > 0,
// torch's default for 0. Under ThreadSanitizer one thread whatever is asked:
// Debian's libtorch runs at::parallel_for on libgomp, which is not instrumented,
// so TSan cannot see its fork/join barriers and reports every parallel body's
// writes against the caller's next read (scripts/test.sh runs that pool at one
// thread with OMP_NUM_THREADS=1, which a config's model.threads would override).
// Every thread of ours is still checked. Header-only (ATen/Parallel.h, not
// torch/torch.h).
#ifndef WINDQUANT_COMMON_MODEL_TORCH_THREADS_H_
#define WINDQUANT_COMMON_MODEL_TORCH_THREADS_H_

#include <ATen/Parallel.h>

namespace windquant::model {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

inline void SetTorchThreads(int threads) {
  if (threads <= 0) return;  // torch's default
  at::set_num_threads(kThreadSanitizer ? 1 : threads);
}

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_TORCH_THREADS_H_
