#!/usr/bin/env bash
# Installs every Debian package the build and the tests need, fetches the
# default model, and builds the release binary. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config g++ clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libcli11-dev nlohmann-json3-dev libxxhash-dev libssl-dev
  curl ca-certificates
  # etcd: the discovery tests (tests/integration/etcd_test.cpp) start their own
  # on ephemeral ports; a daemon the package may start is not used.
  etcd-server
  # The web UI's browser test (tests/browser/web_ui.mjs, playwright-core drives it headless;
  # it never downloads a browser of its own).
  chromium
  # systemd-analyze verify on deploy/systemd/ (tests/integration/deploy_test.cpp).
  systemd
  # MPI: tensor parallelism (serve/generate --tensor-parallel under mpirun); optional in
  # CMake, and its tests skip without mpirun.
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# promtool checks the /metrics page (tests/unit/server/serving_metrics_test.cpp) and
# deploy/prometheus/; the prometheus server scrapes a cell and a router in
# tests/integration/deploy_test.cpp (its own, on an ephemeral port). Debian packages both in
# prometheus; without its recommends (node exporter and the like). A daemon the package may
# start is not used.
if ! command -v promtool >/dev/null; then
  echo "setup: installing prometheus (for promtool)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

# The test oracles (tests/oracle/*.mjs) are npm packages: ajv (JSON-schema validation of
# structured output), openai (the official client), @huggingface/jinja,
# the reference renderer the chat-template tests compare against; and the web UI's: esbuild
# (bundles web/ at build time), playwright-core and axe-core (the browser test). Node.js comes
# with the machine; Debian's nodejs and npm are the fallback.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
# Reinstall when the lock file changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci (web UI bundler, test oracles)"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

# The default model: stories260K (MIT), from ../shared when it is there.
SHA256=270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d
mkdir -p models
if [ ! -f models/default.gguf ] || ! echo "$SHA256  models/default.gguf" | sha256sum -c --quiet 2>/dev/null; then
  shared="${TOKENHIVE_SHARED:-../shared}"
  if [ -f "$shared/models/stories260K.gguf" ]; then
    cp "$shared/models/stories260K.gguf" models/default.gguf.tmp
  else
    echo "setup: downloading stories260K.gguf"
    curl -fsSL -o models/default.gguf.tmp \
      "https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
  fi
  echo "$SHA256  models/default.gguf.tmp" | sha256sum -c --quiet || {
    echo "setup: models/default.gguf has the wrong sha256" >&2
    rm -f models/default.gguf.tmp
    exit 1
  }
  mv models/default.gguf.tmp models/default.gguf
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build
echo "setup: done; try: build/tokenhive generate -p 'Once upon a time' -n 128"
