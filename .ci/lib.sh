# Shared by the set-up scripts (sourced from the project root).
#
# Every Python package the project installs goes into a virtual environment, never into the interpreter that runs
# the scripts: Debian's and Ubuntu's python3 refuse `pip install` outside one (PEP 668, "externally-managed-
# environment"), and torch with its CUDA libraries has no business in the user's own site-packages.
#   VENV  the project's venv: $EKSBENCH_VENV, else .venv in the checkout (README command 1 activates it);
#   PY    its python.

set -o pipefail
VENV=${EKSBENCH_VENV:-$PWD/.venv}
PY="$VENV/bin/python"

# say TEXT: one line of progress, prefixed with the script's name.
say() { echo "${0##*/}: $*"; }

# die TEXT: one line on stderr, then stop with exit code 1.
die() { echo "${0##*/}: $*" >&2; exit 1; }

# apt_install COMMAND:PACKAGE ...: install each PACKAGE whose COMMAND is not on PATH (one apt run).
apt_install() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  apt_packages "${missing[@]}"
}

# apt_packages PACKAGE ...: install the packages with apt (sudo when not root), saying so first.
apt_packages() {
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  command -v apt-get >/dev/null || die "this machine has no apt-get: install $* with its package manager, then run this again"
  local log; log=$(mktemp)
  say "apt-get install $*"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"; } >"$log" 2>&1
  then
    tail -20 "$log" >&2
    die "apt-get install $* failed"
  fi
  rm -f "$log"
}

# base_python: the interpreter the project's venv is made from: $EKSBENCH_PYTHON, else python3 on PATH; it must be
# Python 3.11 or newer.
base_python() {
  local py=${EKSBENCH_PYTHON:-python3}
  command -v "$py" >/dev/null || die "no $py on PATH: install Python 3.11 or newer (apt-get install python3), or set EKSBENCH_PYTHON"
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "eksbench needs Python 3.11 or newer; $py is $("$py" -c 'import sys; print(sys.version.split()[0])'): install a newer one, or set EKSBENCH_PYTHON to it"
  echo "$py"
}

# make_venv PYTHON DIR: a virtual environment at DIR made by PYTHON, with pip. Debian and Ubuntu ship venv's pip
# (ensurepip) apart, in python3-venv: it is installed where it is missing. A venv left without pip by an earlier,
# stopped attempt is made again.
make_venv() {
  local py=$1 dir=$2
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  "$py" -c 'import ensurepip' 2>/dev/null \
    || apt_packages "python$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
  say "making the virtual environment $dir ($("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])'))"
  rm -rf "$dir"
  "$py" -m venv "$dir" || die "$py -m venv $dir failed"
}

# need_space DIR MB WHAT: stop before WHAT, saying so, when the file system that holds (or will hold) DIR has under
# MB megabytes free. Without it a full disk shows as pip's "No space left on device" minutes in, half-way through
# unpacking torch, with a venv left half made.
need_space() {
  local dir=$1 need=$2 what=$3 at free mount
  at=$dir; while [ ! -e "$at" ]; do at=$(dirname "$at"); done
  read -r free mount < <(df -Pm "$at" 2>/dev/null | awk 'NR == 2 {print $4, $6}') || true
  [[ "$free" =~ ^[0-9]+$ ]] || return 0   # no reading from df: the install itself will tell
  [ "$free" -ge "$need" ] && return 0
  die "$what needs about $need MB free on the file system of $dir (mounted at $mount), which has $free MB free: free some space there, or set ${4:-EKSBENCH_VENV} to a folder on a disk with room, then run this again"
}

# pip_install ARG...: `pip install ARG...` into the venv of $PIP (default: the project's). It shows pip's lines of
# progress (Collecting, Downloading, Installing, Successfully installed) and keeps the whole output in
# $PIP_LOG (default: pip.log in the project venv); a failure shows that log's last lines and stops the set-up.
pip_install() {
  local pip=${PIP:-$PY -m pip} log=${PIP_LOG:-$VENV/pip.log}
  if ! $pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 | tee "$log" \
      | grep --line-buffered -E "^(Collecting|Downloading|Installing collected|Successfully installed)"; then
    [ "${PIPESTATUS[0]}" = 0 ] && return 0   # grep found nothing to show: pip had nothing to do
    tail -25 "$log" >&2
    die "pip install $* failed (whole output: $log)"
  fi
}
