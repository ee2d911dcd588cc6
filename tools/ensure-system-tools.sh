#!/usr/bin/env bash
# The Debian packages the test suite needs besides Python's: `make test` runs this
# first, so the suite passes on a fresh machine as in CI.
#
#   tools/ensure-system-tools.sh           install what is missing (root + apt-get)
#   tools/ensure-system-tools.sh --check   only list what is missing; exit 1 if anything is
#
# A tool that cannot be installed (not root, no apt-get, apt-get failed) is named on
# one line with the tests it affects, and the script still exits 0: those tests then
# fail with their own message, so nothing is skipped quietly.
set -uo pipefail

check=0
case "${1-}" in
    "") ;;
    --check) check=1 ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# package, the command it provides, and what needs it
tools=(
    "graphviz|dot|SVG/PNG state machine diagrams and the tests of them"
    "iproute2|ip|the network-namespace reliability tests"
    "iptables|iptables|packet loss in the network-namespace reliability tests"
    "chromium|chromium|the web demo's real-browser test"
    "openssl|openssl|the certificates the TLS tests make"
)

missing=()   # package names
described=() # "package ('command', for what needs it)"
for entry in "${tools[@]}"; do
    IFS='|' read -r package command purpose <<<"$entry"
    if ! command -v "$command" >/dev/null 2>&1; then
        missing+=("$package")
        described+=("$package ('$command', for $purpose)")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$check" = 1 ]; then
    for line in "${described[@]}"; do echo "needed: $line"; done
    exit 1
fi

joined() { local out="$1"; shift; for item in "$@"; do out+=", $item"; done; echo "$out"; }

if [ "$EUID" != 0 ]; then
    why="not root"
elif ! command -v apt-get >/dev/null 2>&1; then
    why="no apt-get"
else
    echo "ensure-system-tools: installing ${missing[*]} with apt-get" >&2
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null); then
        exit 0
    fi
    why="apt-get failed"
fi
echo "ensure-system-tools: missing $(joined "${described[@]}"); cannot install ($why), so the tests that need them will fail; install with: apt-get install ${missing[*]}" >&2
exit 0
