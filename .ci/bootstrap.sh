#!/usr/bin/env bash
# Set up kerneltune on a fresh Debian machine: system packages, a Python 3.12 venv, the package.
# Idempotent: reuses .venv and skips pip when pyproject.toml has not changed since the last install.
# Every failure ends in one line that says what to do.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv

LOG="${TMPDIR:-/tmp}/kerneltune-setup.log"
: > "$LOG"
say() { echo "kerneltune setup: $*"; }

die() { echo "kerneltune setup: $*" >&2; exit 1; }

find_python() {
  local c
  for c in ${PYTHON:-} python3.12 "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/3.12"*/bin/python3.12 \
           /usr/bin/python3.12 /usr/local/bin/python3.12; do
    if [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then
      echo "$c"; return
    fi
  done
}

# 1. System packages: the AMD offline compile (linker, device libraries) and Chromium for the HTML tests.
APT_PKGS="lld-22 llvm-22 rocm-device-libs chromium"
missing=""
for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  say "apt-get install${missing}"
  say "  (the AMD offline compile's linker and device libraries, Chromium for the HTML tests; log: $LOG)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing; } >>"$LOG" 2>&1 \
    || die "apt-get install${missing} failed (see $LOG); the AMD offline compile needs these Debian packages."
fi

# 2. Python 3.12 and the venv.
PY=$(find_python)
[ -n "$PY" ] || die "Python 3.12 not found${PYTHON:+ (PYTHON=$PYTHON is not a Python 3.12)}: install it
  (apt-get install python3.12, or pyenv install 3.12) or set PYTHON=/path/to/python3.12."
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
  rm -rf "$VENV"
  say "creating $VENV with $PY"
  "$PY" -m venv "$VENV" >>"$LOG" 2>&1 || die "could not create a venv with $PY (see $LOG)."
fi

# 3. The package and its extras, unless already installed from this pyproject.toml.
STAMP="$VENV/.kerneltune-installed"
WANT=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  say "pip install -e .[amd,rdb,test,docs] into $VENV: jax, optuna, torch, flydsl, pytest, mkdocs"
  say "  (a few minutes the first time; log: $LOG)"
  "$VENV/bin/python" -m pip install -q --upgrade pip >>"$LOG" 2>&1
  "$VENV/bin/python" -m pip install -q -e ".[amd,rdb,test,docs]" >>"$LOG" 2>&1 \
    || die "pip install of kerneltune failed (see $LOG)."
  echo "$WANT" > "$STAMP"
fi
# 4. The package's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (this project's machines), every
# CLI subprocess of the tests would otherwise compile each module it imports again (0.2-0.3 s a process).
"$VENV/bin/python" -m compileall -q -j 0 kerneltune >>"$LOG" 2>&1 || say "could not write kerneltune's bytecode (see $LOG); it still runs"
say "ready ($("$VENV/bin/python" --version), venv $VENV; log: $LOG)"
