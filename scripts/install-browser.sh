#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the web UI's browser tests (tests/web), which
# run /usr/bin/chromium through /usr/bin/chromedriver: each is checked on its own (a machine
# often has the browser without the driver), and only what is missing is installed.
#
#   scripts/install-browser.sh          install what is missing with apt-get (only as root;
#                                       CI runs as root), else say what to install
#   scripts/install-browser.sh --check  print what is missing, install nothing; exit 1 if
#                                       anything is
#
# Elsewhere install Debian's `chromium chromium-driver` yourself; without them the browser
# tests are skipped saying what is missing (in CI they fail). CHROMIUM and CHROMEDRIVER
# override the paths looked at.
set -euo pipefail
chromium="${CHROMIUM:-/usr/bin/chromium}"
chromedriver="${CHROMEDRIVER:-/usr/bin/chromedriver}"

# The Debian packages of what is missing, one "package path" line each.
missing() {
  [ -x "$chromium" ] || echo "chromium $chromium"
  [ -x "$chromedriver" ] || echo "chromium-driver $chromedriver"
}

gaps="$(missing)"
if [ "${1:-}" = "--check" ]; then
  if [ -z "$gaps" ]; then
    echo "browser tests: $chromium and $chromedriver are installed"
    exit 0
  fi
  while read -r package path; do echo "missing: $path (Debian package $package)"; done <<<"$gaps"
  exit 1
fi
[ -z "$gaps" ] && exit 0
packages=()
while read -r package _; do packages+=("$package"); done <<<"$gaps"
if [ "$(id -u)" -ne 0 ]; then
  echo "note: the browser tests will be skipped: install ${packages[*]} (as root: apt-get install ${packages[*]})" >&2
  exit 0
fi
echo "==> installing ${packages[*]}" >&2
apt-get update -qq
apt-get install -y -qq "${packages[@]}"
