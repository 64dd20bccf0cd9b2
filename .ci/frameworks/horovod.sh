# Build hook of `.ci/setup-framework horovod` (sourced): Horovod 0.28.1 from its PyPI sdist, with Gloo
# and without MPI, into a venv that already holds torch (requirements-horovod.txt). The build is about 3 minutes
# on 2 idle cores (171 s, BENCHMARKS.md); asking CMake for the torch extension's target alone saved 18 s of it and
# building without CUDA 15 s more, too little for a wrapper and a patch of our own.
# 0.28.1 (2023-06) is Horovod's last release. It compiles its torch extension as C++14, and torch >= 2.1
# headers need C++17 ("#error You need C++17 to compile PyTorch": horovod/horovod#3996, #4014).
# Upstream fixed it on master after the release: PR #3998, commit 3a31d933a13c7c885b8a673f4172b17914ad334d
# (2024-08-31, "Compile using C++17 when using PyTorch 2.1"), in no release since. horovod-cxx17.patch is
# that commit's diff to CMakeLists.txt and horovod/torch/CMakeLists.txt, unchanged.
# Env vars: horovod docs/install.rst (HOROVOD_WITH_*/WITHOUT_*, HOROVOD_CPU_OPERATIONS).
HOROVOD_VERSION=0.28.1
# sha256 of horovod-0.28.1.tar.gz as PyPI serves it.
HOROVOD_SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0

framework_build() {
  local venv=$1 work wheels="$1.wheel"
  # The wheel this build makes is kept beside the venv, under the venv's own name (its hash covers the requirements
  # with torch's pin, this hook and the patch): a venv rebuilt with the same inputs installs it in seconds.
  if ! ls "$wheels"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
    build_wheel "$venv" "$wheels" || return 1
  else
    say "horovod: the wheel built earlier for these pins: $(ls "$wheels"/*.whl)"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheels"/horovod-"$HOROVOD_VERSION"-*.whl
  "$venv/bin/python" -c "import horovod.torch as hvd; assert hvd.gloo_built(), 'no Gloo'" \
    || { echo "setup-framework: horovod.torch does not import or lacks Gloo" >&2; return 1; }
}

# build_wheel VENV DIR: Horovod's wheel from its sdist, against VENV's torch, into DIR.
build_wheel() {
  local venv=$1 wheels=$2 work
  work=$(mktemp -d)
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "horovod==$HOROVOD_VERSION" -d "$work" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  echo "$HOROVOD_SDIST_SHA256  $work/horovod-$HOROVOD_VERSION.tar.gz" | sha256sum -c --quiet
  tar xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
  patch -d "$work/horovod-$HOROVOD_VERSION" -p1 -s < .ci/frameworks/horovod-cxx17.patch
  # torch's PyPI wheel is a CUDA build, and where torch finds a CUDA toolkit (torch.utils.cpp_extension
  # CUDA_HOME: $CUDA_HOME, else nvcc on PATH, else /usr/local/cuda) Horovod builds its torch extension
  # with CUDA (horovod/torch/CMakeLists.txt: Pytorch_CUDA -> add_cuda), whether or not a GPU is there.
  # Both then need the toolkit's real root, the one holding include/cuda_runtime.h and libcudart: an
  # nvcc on PATH may be a wrapper outside it (torch would take its parent's parent). HOROVOD_CUDA_HOME
  # is where Horovod's CMake takes nvcc from (CMakeLists.txt: CMAKE_CUDA_COMPILER), CUDA_HOME where
  # torch's library paths come from (FindPytorch.cmake: cpp_extension.library_paths). Its kernels are
  # built for one architecture only here (HOROVOD_BUILD_CUDA_CC_LIST): this venv trains on the CPU.
  local cuda_home root
  cuda_home=$("$venv/bin/python" -c "from torch.utils.cpp_extension import CUDA_HOME; print(CUDA_HOME or '')" 2>/dev/null)
  for root in "$cuda_home" /usr/local/cuda; do
    if [ -n "$root" ] && [ -f "$root/include/cuda_runtime.h" ] && [ -x "$root/bin/nvcc" ]; then
      export HOROVOD_CUDA_HOME=$root CUDA_HOME=$root HOROVOD_BUILD_CUDA_CC_LIST=90
      break
    fi
  done
  # Two make jobs at low priority: the build shares a 2-core machine.
  say "horovod: building $HOROVOD_VERSION's torch extension from source (minutes; log: $venv/build.log)"
  if ! (cd "$work/horovod-$HOROVOD_VERSION" && \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS=-j2 \
        nice -n 10 "$venv/bin/python" -m pip wheel -v --no-build-isolation --no-deps --no-cache-dir \
          --disable-pip-version-check -w "$work/wheel" . > "$venv/build.log" 2>&1); then
    echo "setup-framework: horovod $HOROVOD_VERSION failed to build; log: $venv/build.log" >&2
    tail -20 "$venv/build.log" >&2
    rm -rf "$work"
    return 1
  fi
  rm -rf "$wheels" && mkdir -p "$wheels" && mv "$work"/wheel/horovod-*.whl "$wheels"/
  rm -rf "$work"
}
