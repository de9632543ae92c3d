#!/usr/bin/env bash
# Make sure Debian's chromium is there for the e2e tests (tests/e2e). Idempotent: does nothing when
# /usr/bin/chromium exists. Never downloads Playwright's own browsers.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium
/usr/bin/chromium --version
