#!/usr/bin/env bash
# The main job on the embedded default model, from a fresh clone:
# installs dependencies, builds, trains the small default model once
# (cached in .cache/default-model), then quantizes it with WINDQuant to
# about 2 bits per weight and writes plan, report and quantized model to
# runs/default/. Extra arguments go to `windquant quantize`.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across clones (CI builds in a fresh folder).
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=true
bash scripts/install-deps.sh
# The project's Python tools (tokenizer references, moto, aws, manifest checks).
export PATH="$PWD/.venv/bin:$PATH"
cmake --preset dev >/dev/null
cmake --build build/dev -j"$(nproc)" --target windquant
bash scripts/default-model.sh build/dev/cli/windquant
mkdir -p runs  # output.dir's parent: windquant creates only runs/default itself
exec build/dev/cli/windquant quantize --config configs/default.yaml "$@"
