// The commit the running binary was built from (cmake/build_commit.cmake writes it at every
// build): "<40 hex digits>", with "-dirty" when tracked files differed from that commit,
// or "unknown" when built outside a git checkout. Reports record it, so that a number can
// be traced to the code that produced it. Linked only by the binaries (wq_build_commit), so
// that a new commit relinks them and not every test.
#ifndef WINDQUANT_COMMON_BASE_BUILD_COMMIT_H_
#define WINDQUANT_COMMON_BASE_BUILD_COMMIT_H_

namespace windquant::base {

const char* BuildCommit();

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_BUILD_COMMIT_H_
