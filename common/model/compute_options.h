// ComputeOptions: where a model computes and in what dtype (the run config's model.device
// and model.compute_dtype), built once when the config loads (config::RunConfig's
// model.compute) and handed to everything that builds or runs a model: LlamaModel, the
// quantization session, the stage worker (so plan application and calibration), the
// evaluator's head, `eval` and the actor's reported device. Nothing else decides a device.
// No torch here, so that any Options struct may carry one; llama_model.h maps it to torch
// (TorchDevice).
#ifndef WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_
#define WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_

#include <string>

namespace windquant::model {

// The dtype a forward computes in (hidden states, activations, dequantized linears).
// float32 only, for now: weights stay in their stored dtype and are widened per layer.
enum class ComputeDtype { kFloat32 };

struct ComputeOptions {
  // "cpu", "cuda" (the current CUDA device) or "cuda:N"; checked when the config loads
  // (names) and before work starts (config::CheckThisMachine: a device this machine has).
  std::string device = "cpu";
  ComputeDtype dtype = ComputeDtype::kFloat32;

  bool cuda() const { return device.rfind("cuda", 0) == 0; }
};

// The config's name of a compute dtype ("float32").
inline const char* ComputeDtypeName(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kFloat32:
      return "float32";
  }
  return "?";
}

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_
