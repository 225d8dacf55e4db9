#!/usr/bin/env bash
# Build (once per CPU kind) and print the folder holding a llama-cpp-python wheel compiled for the
# widest x86 vector instructions this CPU has, never AMX.
#
# Why not pip's own wheel cache: it keys a built wheel by the source archive only, so a wheel built
# with other CMAKE_ARGS (or on another CPU sharing the cache) is handed back silently. Here the
# folder is named by version and instruction set, so an AVX-512 wheel is never installed where the
# CPU lacks it. Why not -march=native: on a CPU with AMX it emits tile instructions that containers
# and VMs often do not enable (SIGILL at the first prompt, seen on a Sapphire Rapids sandbox).
# Measured on a 2-core AMD EPYC with AVX-512 (Qwen2.5-Coder-1.5B Q4_K_M): prompt evaluation
# 1.5-1.8x the AVX2 build's, decoding unchanged (benchmarks/bench_engine.py).
#
# Usage: tools/llama-wheel.sh PYTHON VERSION      (LLAMA_CPU=v3|v4 forces the instruction set)
set -euo pipefail
PY=$1
VERSION=$2
flags=$(grep -m1 -w '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
cpu=${LLAMA_CPU:-auto}
if [[ $cpu == auto ]]; then
  cpu=v3
  if has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512cd; then cpu=v4; fi
fi
cmake="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
name=$cpu
if [[ $cpu == v4 ]]; then
  cmake+=" -DGGML_AVX512=ON"
  if has avx512vbmi; then cmake+=" -DGGML_AVX512_VBMI=ON"; name+="-vbmi"; fi
  if has avx512_vnni; then cmake+=" -DGGML_AVX512_VNNI=ON"; name+="-vnni"; fi
  if has avx512_bf16; then cmake+=" -DGGML_AVX512_BF16=ON"; name+="-bf16"; fi
fi
cmake+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
dir="$("$PY" -m pip cache dir 2>/dev/null || echo "${XDG_CACHE_HOME:-$HOME/.cache}/pip")/derivaudit-llama/$VERSION-$name"
if ! ls "$dir"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION for $name (once; about 10-15 minutes on 2 cores)" >&2
  mkdir -p "$dir.tmp"
  CMAKE_ARGS="$cmake" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$PY" -m pip wheel -q --no-cache-dir --no-deps \
    -w "$dir.tmp" "llama-cpp-python==$VERSION" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
