#!/usr/bin/env python3
"""Checks a GGUF file windquant wrote with llama.cpp's own Python package (PyPI `gguf`):
its reader opens the file and gguf.quants.dequantize decodes every tensor to exactly
(bit for bit) what windquant's decoder gave, and every decoder linear equals the plan's
weights outside the salient entries (docs/gguf.md).

usage: gguf_check.py FILE DUMP_DIR
  DUMP_DIR holds, per tensor NAME of FILE, in GGUF row order, raw little-endian:
    NAME.decoded.f32   windquant's decode of the tensor (exporter::gguf::GgufFile::Decode)
    NAME.plan.f32      (linears) the weights the plan applies
    NAME.salient.u8    (linears) 1 where the plan keeps a salient INT8 entry
Prints one JSON object (tensors, types, bit-equal tensors, salient entries that differ);
exit 1 with one line saying what differs, 3 when the gguf or numpy module is missing.
"""
import json
import os
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # the same exit code as tokenizer_ref.py's missing modules
    print(f"gguf_check.py: {e}: run bash scripts/install-deps.sh", file=sys.stderr)
    sys.exit(3)


def load(path, dtype, shape):
    a = np.fromfile(path, dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise SystemExit(f"{path}: {a.size} values, the tensor has {int(np.prod(shape))}")
    return a.reshape(shape)


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    path, dump = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(path)
    fields = reader.fields
    arch = fields["general.architecture"].contents()
    if arch != "llama":
        raise SystemExit(f"{path}: architecture {arch!r}")
    vocab = fields["llama.vocab_size"].contents()
    tokens = fields["tokenizer.ggml.tokens"].contents()
    if len(tokens) != vocab:
        raise SystemExit(f"{path}: {len(tokens)} tokens for llama.vocab_size {vocab}")
    types, bit_equal, salient_changed, linears = {}, 0, 0, 0
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))  # rows first
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        decoded = load(os.path.join(dump, t.name + ".decoded.f32"), "<f4", shape)
        if not np.array_equal(values.view(np.uint32), decoded.view(np.uint32)):
            bad = int(np.count_nonzero(values.view(np.uint32) != decoded.view(np.uint32)))
            raise SystemExit(f"{t.name} ({t.tensor_type.name}): gguf.quants.dequantize differs "
                             f"from windquant's decoder in {bad} values")
        bit_equal += 1
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
        plan_path = os.path.join(dump, t.name + ".plan.f32")
        if not os.path.exists(plan_path):
            continue
        linears += 1
        plan = load(plan_path, "<f4", shape)
        salient = load(os.path.join(dump, t.name + ".salient.u8"), "u1", shape).astype(bool)
        differs = values != plan
        if np.any(differs & ~salient):
            bad = int(np.count_nonzero(differs & ~salient))
            raise SystemExit(f"{t.name} ({t.tensor_type.name}): {bad} non-salient values differ "
                             "from the plan's weights")
        salient_changed += int(np.count_nonzero(differs & salient))
    print(json.dumps({"tensors": len(reader.tensors), "bit_equal": bit_equal, "linears": linears,
                      "types": types, "salient_changed": salient_changed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
