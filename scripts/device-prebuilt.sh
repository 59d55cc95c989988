#!/usr/bin/env bash
# Packs what scripts/device-check.sh needs to run on a GPU machine without building there
# (a bare machine has no -dev packages and no registry): the release binaries of BUILD
# (default build/, configured with TH_CUDA on), stripped; the libraries they load besides
# glibc and cuBLAS (the GPU machine's image has cuBLAS); and the files of ../shared the
# tests and the benchmark read. Into DEST (default .dev/, which .git/info/exclude should
# name), about 40 MiB. Then, on the GPU machine: PREBUILT=.dev scripts/device-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
DEST="${DEST:-.dev}"
SHARED="${TOKENHIVE_SHARED:-../shared}"
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/libstd" "$DEST/shared/models" "$DEST/shared/testdata/tokenizer/llamacpp"
for b in tokenhive unit_tests conformance_tests; do strip -o "$DEST/bin/$b" "$BUILD/$b"; done
ldd "$DEST"/bin/* | awk '/=>/ {print $3}' | sort -u |
  grep -v 'libc\.so\|libm\.so\|ld-linux\|libcublas\|libpthread\|libdl\.so\|librt\.so\|linux-vdso' |
  while read -r lib; do
    case "$(basename "$lib")" in
      libstdc++*|libgcc_s*) cp -L "$lib" "$DEST/libstd/" ;;  # used only if the machine's are older
      *) cp -L "$lib" "$DEST/lib/" ;;
    esac
  done
cp "$SHARED/models/stories260K.gguf" "$SHARED/models/stories260K.greedy-from-bos.ids" "$DEST/shared/models/"
cp "$SHARED/testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf" \
   "$SHARED/testdata/tokenizer/llamacpp/ggml-vocab-deepseek-llm.gguf" "$DEST/shared/testdata/tokenizer/llamacpp/"
du -sh "$DEST"
