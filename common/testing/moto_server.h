// MotoServer: a moto_server child process (an S3 lookalike, from the
// machine's Python) on a free loopback port, in its own process group, for
// integration tests of the S3 store. Not thread-safe.
#ifndef WINDQUANT_COMMON_TESTING_MOTO_SERVER_H_
#define WINDQUANT_COMMON_TESTING_MOTO_SERVER_H_

#include <sys/types.h>

#include <map>
#include <string>

namespace windquant::testing {

class MotoServer {
 public:
  MotoServer() = default;
  ~MotoServer() { Stop(); }
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  // Starts `binary` on a free port, output to `log_path`, and waits (bounded)
  // until it accepts connections. False when it did not come up.
  bool Start(const std::string& binary, const std::string& log_path,
             const std::map<std::string, std::string>& env = {});
  // SIGTERM to the group, SIGKILL after a bounded wait. Idempotent.
  void Stop();

  std::string endpoint() const;

  // Dummy credentials and settings for moto and the aws client in this process's
  // environment (moto accepts any key; no config files, no EC2 metadata lookups).
  static void SetDummyAwsEnvironment();

  // The start of an S3 test suite: finds moto_server and aws on PATH (their
  // paths into *moto_bin and *aws_bin), sets the dummy AWS environment and
  // starts the server with its output in `log_path`. Empty when it is up, else
  // why not (the suite fails each test with it).
  std::string StartForSuite(const std::string& log_path, std::string* moto_bin,
                            std::string* aws_bin);

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_MOTO_SERVER_H_
