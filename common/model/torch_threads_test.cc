// SetTorchThreads sets torch's intra-op threads as asked (0: leaves them), except
// under ThreadSanitizer, where it keeps one (libgomp's barriers are invisible to it).
#include "common/model/torch_threads.h"

#include "gtest/gtest.h"

namespace windquant::model {
namespace {

TEST(TorchThreadsTest, SetsTheThreadsAskedForExceptUnderThreadSanitizer) {
  SetTorchThreads(3);
  EXPECT_EQ(at::get_num_threads(), kThreadSanitizer ? 1 : 3);
  SetTorchThreads(0);  // torch's default: left as it is
  EXPECT_EQ(at::get_num_threads(), kThreadSanitizer ? 1 : 3);
  SetTorchThreads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
}

}  // namespace
}  // namespace windquant::model
