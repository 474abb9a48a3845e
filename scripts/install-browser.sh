#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the web UI's browser tests (tests/web).
# Idempotent; only as root (CI runs as root): elsewhere install `chromium chromium-driver`
# yourself; without them the browser tests are skipped saying what is missing (in CI they fail).
if [ "$(id -u)" -eq 0 ]; then
    command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)
fi
