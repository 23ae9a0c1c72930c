#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (onnxruntime-node@1.30.0 and the onnxruntime-common it
# requires) from the npm registry into a cache directory outside the repository, and prints that
# directory. keyer never links or loads ONNX Runtime: it is only the oracle that computes the
# reference outputs committed under tests/data/onnx/ (tests/onnx/ort_run.js,
# tests/onnx/PROVENANCE.md there says how).
#
# Both package tarballs are fetched with `npm pack` and checked against the SHA-256 pinned below
# before anything is installed; then `npm install --ignore-scripts` installs the two checked
# tarballs (the package's postinstall script, which would download GPU builds, never runs; its
# two other dependencies, adm-zip and global-agent, serve only that script and are not loaded
# by ort_run.js). The linux-x64 libonnxruntime.so.1 ships inside the onnxruntime-node tarball.
#
# Usage: scripts/fetch-onnxruntime.sh [DIR]
#   DIR default: $KEYER_ORT_DIR, else $XDG_CACHE_HOME/keyer/onnxruntime-node-1.30.0
#   (~/.cache/... without XDG_CACHE_HOME). Run ort_run.js with NODE_PATH=DIR/node_modules.
# Environment: KEYER_NPM_CACHE  where package tarballs are kept (as scripts/fetch-models.sh)
# Safe to run again: an installation whose stamp matches the pinned checksums is kept.
set -euo pipefail
version=1.30.0
node_sha=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75   # onnxruntime-node-1.30.0.tgz
common_sha=7906c439e0d3e0f4048caa23b64cdfadc0f455c377f579ce1ab2a4b778f07d5f # onnxruntime-common-1.30.0.tgz

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/keyer
dest=${1:-${KEYER_ORT_DIR:-"$cache_root/onnxruntime-node-$version"}}
tgz_cache=${KEYER_NPM_CACHE:-"$cache_root/npm"}
stamp="onnxruntime-node-$version $node_sha onnxruntime-common-$version $common_sha"

fail() { echo "fetch-onnxruntime: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest/keyer-ort.stamp" ] && [ "$(cat "$dest/keyer-ort.stamp")" = "$stamp" ] &&
   [ -f "$dest/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" ]; then
    echo "$dest"
    exit 0
fi
command -v node >/dev/null || fail "node is not installed (scripts/setup.sh installs it)"
command -v npm >/dev/null || fail "npm is not installed (scripts/setup.sh installs it)"
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || fail "only linux x86-64 is set up (the tarball carries other builds; extend this script)"

mkdir -p "$tgz_cache" "$(dirname "$dest")"
work=$(mktemp -d "${TMPDIR:-/tmp}/keyer-ort.XXXXXX")
trap 'rm -rf "$work"' EXIT

tarball() { # $1 package name, $2 pinned sha256: prints the path of the checked tarball
    local tgz="$tgz_cache/$1-$version.tgz"
    if [ ! -f "$tgz" ] || [ "$(sha "$tgz")" != "$2" ]; then
        rm -f "$tgz"
        (cd "$work" && npm pack "$1@$version" --silent >/dev/null) || fail "npm pack $1@$version failed"
        local got; got=$(sha "$work/$1-$version.tgz")
        [ "$got" = "$2" ] || fail "$1-$version.tgz: checksum $got does not match the pinned $2"
        mv "$work/$1-$version.tgz" "$tgz.part.$$" && mv "$tgz.part.$$" "$tgz"
    fi
    echo "$tgz"
}
node_tgz=$(tarball onnxruntime-node "$node_sha")
common_tgz=$(tarball onnxruntime-common "$common_sha")

# Install into a fresh directory beside the destination, then rename: whole or not at all.
part="$dest.part.$$"
rm -rf "$part"
mkdir -p "$part"
echo '{"name":"keyer-ort-oracle","private":true}' > "$part/package.json"
(cd "$part" && npm install --ignore-scripts --no-audit --no-fund --no-package-lock --silent \
    "$common_tgz" "$node_tgz" >/dev/null) || { rm -rf "$part"; fail "npm install failed"; }
echo "$stamp" > "$part/keyer-ort.stamp"
rm -rf "$dest"
mv "$part" "$dest"
echo "$dest"
