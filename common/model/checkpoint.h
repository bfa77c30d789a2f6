// Checkpoint: a Hugging Face LLaMA checkpoint directory (config.json plus
// model.safetensors, or model.safetensors.index.json + shards), memory-mapped.
// Loads only what is asked for: the tensors of decoder layers [a, b) and, on
// request, embeddings / final norm / lm_head, so a process that owns 10 of 80
// layers reads only those bytes. F32, F16 and BF16 tensors are loaded in their
// stored dtype (a BF16 checkpoint costs 2 bytes per weight in memory; LlamaModel
// widens a layer at a time when it computes) unless LoadRequest::widen_to_float32.
// Each tensor is copied out of the mapping and its pages are released, so the
// process does not hold the file's pages and the copy at once.
// Thread-compatible; the loaded tensors own their memory.
#ifndef WINDQUANT_COMMON_MODEL_CHECKPOINT_H_
#define WINDQUANT_COMMON_MODEL_CHECKPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_config.h"
#include "common/model/llama_weights.h"

namespace windquant::model {

struct LoadRequest {
  int64_t first_layer = 0;
  int64_t end_layer = -1;         // exclusive; -1 = num_hidden_layers
  bool embeddings = true;         // embed_tokens
  bool head = true;               // final norm + lm_head (tied -> embed_tokens)
  bool widen_to_float32 = false;  // convert every tensor to float32 (4 bytes per weight)
};

class Checkpoint {
 public:
  // Opens `dir`: parses config.json and the safetensors headers (not the
  // data). Every error is one line naming the file and, where it applies, the
  // tensor: truncated file, header length beyond the file, invalid JSON,
  // offsets outside the data or overlapping, unknown dtype, missing shard.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  virtual ~Checkpoint() = default;

  virtual const LlamaConfig& config() const = 0;
  virtual const std::string& directory() const = 0;
  // Names of every tensor in the checkpoint (all shards).
  virtual std::vector<std::string> TensorNames() const = 0;
  // Loads one tensor as float32 with the expected shape (empty = any shape).
  // Errors: missing tensor, dtype unknown, shape disagreeing with `shape`.
  virtual absl::StatusOr<at::Tensor> LoadTensor(const std::string& name,
                                                const std::vector<int64_t>& shape) const = 0;
  // Loads the weights of a stage; shapes are checked against config.json.
  virtual absl::StatusOr<LlamaWeights> LoadWeights(const LoadRequest& request) const = 0;
  // Bytes of tensor data read (mapped and converted) so far; used by tests to
  // show that a layer range reads only its own tensors.
  virtual int64_t bytes_read() const = 0;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_CHECKPOINT_H_
