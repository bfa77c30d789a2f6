// TransitionStreams: a fleet of actors' StreamTransitions streams from one process,
// for load tests and distributed_bench. Each stream has its own channel (its own
// TCP connection, as each actor process has) and behaves like actor/rollout_loop.cc:
// write one TransitionBatch, wait for its ack, write the next. Stream s sends
// batches[(s + n) % batches.size()] as its n-th batch, with the episode id
// options.episode_id_base | (s + 1) << 32 | (n + 1), so that no two batches of a
// process share an id (the learner would refuse the second).
//
//   TransitionStreams streams(options, batches);   // encoded with rl::EncodeEpisode
//   streams.Start();
//   streams.WaitForAcks(100, absl::Seconds(30));
//   TransitionStreams::Result r = streams.Stop();  // r.ack_ms: one per acked batch
//
// Plaintext only (loopback). Ownership: owns its threads and channels.
// Thread-safety: Start and Stop from one thread; WaitForAcks and acks() from any.
#ifndef WINDQUANT_COMMON_TESTING_TRANSITION_STREAMS_H_
#define WINDQUANT_COMMON_TESTING_TRANSITION_STREAMS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "windquant/v1/learner.pb.h"

namespace windquant::testing {

struct TransitionStreamsOptions {
  std::string target;  // "127.0.0.1:port" of a Learner service
  int streams = 64;
  uint64_t episode_id_base = 0;  // the high 16 bits of every episode id
  int64_t max_message_bytes = 64 << 20;
  // A stream's call fails past this (each stream is one call for the whole run).
  absl::Duration call_deadline = absl::Hours(1);
};

class TransitionStreams {
 public:
  struct Result {
    int64_t sent = 0;                  // batches acked
    int64_t accepted = 0;              // acks with accepted = true
    int64_t transitions = 0;           // actions of the acked batches
    int64_t payload_bytes = 0;         // serialized TransitionBatch bytes of the acked batches
    double seconds = 0;                // from Start to Stop
    std::vector<double> ack_ms;        // write-to-ack time of every acked batch
    std::vector<int64_t> stream_sent;  // batches acked per stream
    std::vector<std::string> errors;   // one per stream that ended with an error
  };

  TransitionStreams(TransitionStreamsOptions options, std::vector<v1::TransitionBatch> batches);
  ~TransitionStreams();  // Stop
  TransitionStreams(const TransitionStreams&) = delete;
  TransitionStreams& operator=(const TransitionStreams&) = delete;

  // Opens every stream and starts writing.
  void Start();
  // Whether `n` batches were acked (all streams together) within `timeout`.
  bool WaitForAcks(int64_t n, absl::Duration timeout);
  int64_t acks() const;
  // Asks every stream to end after its batch in flight, closes them and returns the
  // totals. Idempotent (a second call returns an empty Result).
  Result Stop();

 private:
  void RunStream(int index);

  const TransitionStreamsOptions options_;
  const std::vector<v1::TransitionBatch> batches_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  absl::Time started_;
  mutable absl::Mutex mu_;
  Result result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_TRANSITION_STREAMS_H_
