#include "common/store/background_uploader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace windquant::store {

BackgroundUploader::BackgroundUploader(UploaderOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

BackgroundUploader::~BackgroundUploader() { Stop(absl::ZeroDuration()); }

void BackgroundUploader::Enqueue(UploadJob job) {
  std::string dropped;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      dropped = absl::StrCat(job.name, " (the uploader has stopped)");
      ++stats_.dropped;
    } else {
      ++enqueued_;
      auto same = job.coalesce_key.empty()
                      ? queue_.end()
                      : std::find_if(queue_.begin(), queue_.end(), [&](const UploadJob& q) {
                          return q.coalesce_key == job.coalesce_key;
                        });
      if (same != queue_.end()) {
        *same = std::move(job);  // the older one is superseded, not lost
        ++finished_;
      } else {
        if (queue_.size() >= options_.max_queued) {
          // A coalesced job is never the victim: its key bounds it already.
          auto victim = std::find_if(queue_.begin(), queue_.end(), [](const UploadJob& q) {
            return !q.essential && q.coalesce_key.empty();
          });
          if (victim != queue_.end()) {
            dropped = absl::StrCat(victim->name, " (queue full: ", queue_.size(), " jobs)");
            queue_.erase(victim);
            ++finished_;
            ++stats_.dropped;
          }
        }
        queue_.push_back(std::move(job));
      }
      stats_.queued = static_cast<int64_t>(queue_.size()) + (running_job_ ? 1 : 0);
    }
  }
  if (!dropped.empty() && options_.log) options_.log(absl::StrCat("store: dropped ", dropped));
}

bool BackgroundUploader::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const int64_t target = enqueued_;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= target || stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return finished_ >= target;
}

void BackgroundUploader::Stop(absl::Duration drain) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;  // stopped before
  }
  if (drain > absl::ZeroDuration()) Flush(drain);
  int64_t abandoned = 0;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    abandoned = static_cast<int64_t>(queue_.size());
    stats_.abandoned += abandoned;
    finished_ += abandoned;
    queue_.clear();
    stats_.queued = 0;
  }
  if (abandoned > 0 && options_.log) {
    options_.log(absl::StrCat("store: stopped with ", abandoned, " upload(s) not done"));
  }
}

UploaderStats BackgroundUploader::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void BackgroundUploader::Loop() {
  while (true) {
    UploadJob job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
    }
    absl::Duration backoff = options_.initial_backoff;
    int attempt = 0;
    while (true) {
      ++attempt;
      const absl::Status st = job.run();
      absl::MutexLock lock(&mu_);
      if (st.ok() || st.code() == absl::StatusCode::kInvalidArgument) {
        ++finished_;
        running_job_ = false;
        stats_.queued = static_cast<int64_t>(queue_.size());
        if (st.ok()) {
          ++stats_.uploaded;
          if (attempt > 1 && options_.log) {
            options_.log(
                absl::StrCat("store: ", job.name, " uploaded after ", attempt, " attempts"));
          }
        } else {
          ++stats_.failed_attempts;
          ++stats_.dropped;
          if (options_.log) {
            options_.log(absl::StrCat("store: ", job.name, " given up: ", st.message()));
          }
        }
        break;
      }
      ++stats_.failed_attempts;
      if (options_.log) {
        options_.log(absl::StrCat("store: ", job.name, " failed (attempt ", attempt,
                                  "), retrying in ", absl::FormatDuration(backoff), ": ",
                                  st.message()));
      }
      auto stopping = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), backoff);
      backoff = std::min(backoff * 2, options_.max_backoff);
      const bool superseded = !job.coalesce_key.empty() &&
                              std::any_of(queue_.begin(), queue_.end(), [&](const UploadJob& q) {
                                return q.coalesce_key == job.coalesce_key;
                              });
      if (stop_ || superseded) {
        // Stopping: counted with the abandoned ones; superseded: the newer one goes.
        running_job_ = false;
        ++finished_;
        stats_.queued = static_cast<int64_t>(queue_.size());
        if (stop_) {
          ++stats_.abandoned;
          if (options_.log) options_.log(absl::StrCat("store: ", job.name, " abandoned (stopped)"));
          return;
        }
        break;
      }
    }
  }
}

}  // namespace windquant::store
