#!/usr/bin/env bash
# A model whose checksum does not match the manifest is rejected with a message naming the file,
# and nothing (not even a partial file) is left in the models directory. Uses the npm tarball
# cache that scripts/setup.sh filled, so it needs no network.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep '^#' "$repo/models/manifest.tsv" > "$tmp/manifest.tsv"
# The real selfie line with its last hex digit of the checksum changed.
grep '^selfie_segmentation.tflite' "$repo/models/manifest.tsv" |
    awk -F'\t' 'BEGIN{OFS="\t"} {c=substr($6,64,1); $6=substr($6,1,63) (c=="0"?"1":"0"); print}' \
    >> "$tmp/manifest.tsv"
mkdir "$tmp/models"
out=$(KEYER_MODELS_MANIFEST="$tmp/manifest.tsv" "$repo/scripts/fetch-models.sh" "$tmp/models" 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] || { echo "FAIL: a wrong checksum was accepted"; exit 1; }
echo "$out" | grep -q 'selfie_segmentation.tflite: checksum' || { echo "FAIL: message does not name the file"; exit 1; }
left=$(ls -A "$tmp/models")
[ -z "$left" ] || { echo "FAIL: left in models/: $left"; exit 1; }
# The correct manifest line installs the file.
grep '^selfie_segmentation.tflite' "$repo/models/manifest.tsv" >> "$tmp/manifest.ok"
grep '^#' "$repo/models/manifest.tsv" | cat - "$tmp/manifest.ok" > "$tmp/manifest2.tsv"
KEYER_MODELS_MANIFEST="$tmp/manifest2.tsv" "$repo/scripts/fetch-models.sh" "$tmp/models" || { echo "FAIL: correct checksum rejected"; exit 1; }
[ -f "$tmp/models/selfie_segmentation.tflite" ] || { echo "FAIL: model not installed"; exit 1; }
echo "PASS"
