#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the web UI's browser tests (tests/web).
# Idempotent; only as root (CI runs as root): elsewhere install `chromium chromium-driver`
# yourself, or the browser tests fail saying what is missing.
if [ "$(id -u)" -eq 0 ]; then
    command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)
fi
