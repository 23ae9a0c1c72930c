# Sourced by the CLI tests (tests/cli/*.sh; this folder is not itself a test): the keyer binary
# under test, the test data, a failure helper, a temporary directory removed on exit, and a
# reader of the key=value lines `keyer probe` prints.
set -u
bin=${KEYER_BIN:?KEYER_BIN is not set}
data=${KEYER_TEST_DATA:?KEYER_TEST_DATA is not set}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { sed -n "s/^$1=//p"; }
