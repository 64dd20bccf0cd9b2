# Shared by .ci/setup and .ci/setup-tests (sourced).

# apt_install COMMAND:PACKAGE ...: install each PACKAGE whose COMMAND is not on PATH (one apt run).
apt_install() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# pip_install FILE: pip install -r FILE quietly (PIP overrides the pip command); a failure stops the set-up.
pip_install() {
  local pip=${PIP:-python3 -m pip}
  if ! $pip install -q --disable-pip-version-check -r "$1" 2>&1 \
      | { grep -v -e "is ignored: it is neither" -e "Running pip as the 'root' user" || true; }; then
    echo "setup: pip install -r $1 failed" >&2
    exit 1
  fi
}
