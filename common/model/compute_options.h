// ComputeOptions: where a model computes and in what dtype (the run config's model.device
// and model.compute_dtype), built once when the config loads (config::RunConfig's
// model.compute) and handed to everything that builds or runs a model: LlamaModel, the
// quantization session, the stage worker (so plan application and calibration), the
// evaluator's head, `eval` and the actor's reported device. Nothing else decides a device.
// No torch here, so that any Options struct may carry one; llama_model.h maps it to torch
// (TorchDevice).
#ifndef WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_
#define WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_

#include <optional>
#include <string>

namespace windquant::model {

// The dtype a forward computes in (hidden states, norm weights, RoPE tables, the mask,
// activations, dequantized linears and hidden states on the wire). Weights stay in their
// stored dtype and are cast per layer when it differs. Softmax, RMSNorm statistics,
// logits and the loss are float32 whatever the compute dtype (as Hugging Face does).
enum class ComputeDtype { kFloat32, kBFloat16 };

struct ComputeOptions {
  // "cpu", "cuda" (the current CUDA device) or "cuda:N"; checked when the config loads
  // (names) and before work starts (config::CheckThisMachine: a device this machine has).
  std::string device = "cpu";
  // model.compute_dtype; when the config does not say, DefaultComputeDtype(device).
  ComputeDtype dtype = ComputeDtype::kFloat32;

  bool cuda() const { return device.rfind("cuda", 0) == 0; }
};

// float32 on the CPU (bit-identical to every earlier release), bfloat16 on CUDA.
inline ComputeDtype DefaultComputeDtype(const std::string& device) {
  return device.rfind("cuda", 0) == 0 ? ComputeDtype::kBFloat16 : ComputeDtype::kFloat32;
}

// The config's name of a compute dtype ("float32", "bfloat16").
inline const char* ComputeDtypeName(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kFloat32:
      return "float32";
    case ComputeDtype::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

// The dtype a config or flag names; nullopt for any other name.
inline std::optional<ComputeDtype> ParseComputeDtype(const std::string& name) {
  if (name == "float32") return ComputeDtype::kFloat32;
  if (name == "bfloat16") return ComputeDtype::kBFloat16;
  return std::nullopt;
}

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_COMPUTE_OPTIONS_H_
