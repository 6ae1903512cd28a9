#!/usr/bin/env bash
# Installs what r1infer needs to build and to run its tests on Debian/Ubuntu:
# the C libraries it links (PCRE2, utf8proc, jansson, libmicrohttpd), clang
# with libFuzzer for the fuzz targets, rsvg-convert for the bench chart, the
# corpus of the perplexity tests (debian-faq: the Debian FAQ as plain text), the
# aarch64 cross compiler, qemu and arm64 builds of those libraries for
# make test-arm, the OpenCL loader and headers with PoCL (the CPU as an
# OpenCL device, so the opencl backend is tested here and in CI), clinfo and
# CLBlast, chromium (the chat page's headless browser test, tests/page.sh),
# and the Python packages the tests drive it with (openai
# client, gguf-py).
# Idempotent and quiet when everything is already there. Needs root (or sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PKGS="build-essential make pkg-config libpcre2-dev libutf8proc-dev libjansson-dev \
libmicrohttpd-dev clang clang-format libclang-rt-dev librsvg2-bin curl python3 python3-pip \
gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user debian-faq \
ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers pocl-opencl-icd clinfo libclblast-dev \
chromium openmpi-bin libopenmpi-dev"
missing=""
for p in $APT_PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-deps: apt-get install$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# arm64 builds of the static libraries the model links (jansson, PCRE2,
# utf8proc), for make test-arm (the fixtures cross-built and run under qemu):
# unpacked into R1_ARM_ROOT, not installed, since a second installed instance
# of a -dev package makes `dpkg -s` above ambiguous.
ARM_ROOT=${R1_ARM_ROOT:-/usr/local/lib/r1infer-arm64}
ARM_LIBDIR="$ARM_ROOT/usr/lib/aarch64-linux-gnu"
if [ ! -f "$ARM_LIBDIR/libjansson.a" ] || [ ! -f "$ARM_LIBDIR/libpcre2-8.a" ] ||
    [ ! -f "$ARM_LIBDIR/libutf8proc.a" ]; then
    echo "install-deps: arm64 libjansson-dev libpcre2-dev libutf8proc-dev into $ARM_ROOT"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
        $SUDO apt-get update -qq
    fi
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq libjansson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 2>/dev/null) ||
        { $SUDO apt-get update -qq && (cd "$tmp" && apt-get download -qq libjansson-dev:arm64 \
            libpcre2-dev:arm64 libutf8proc-dev:arm64 2>/dev/null); }
    $SUDO mkdir -p "$ARM_ROOT"
    for d in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$d" "$ARM_ROOT"; done
    rm -rf "$tmp"
fi

# Python packages used only by tests (the engine itself needs none).
PY=${PYTHON:-python3}
PIP_PKGS="openai gguf numpy jsonschema"
need=""
for p in $PIP_PKGS; do
    $PY -c "import $p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    echo "install-deps: pip install$need"
    $PY -m pip install -q $need 2>/dev/null || $PY -m pip install -q --break-system-packages $need
fi
echo "install-deps: ok"
