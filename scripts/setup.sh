#!/usr/bin/env bash
# One-step, idempotent set-up on Debian 12 / Python 3.11 (root or sudo):
#   - Debian's SuiteSparse (libsuitesparse-dev) for scikit-sparse's CHOLMOD,
#   - a virtual environment in .venv,
#   - sheaflinalg (editable) with its extras: CHOLMOD, importers, tests, Dask (sweeps on a cluster),
#     mnist1d (generates the MNIST-1D data of the case study offline),
#   - the model zoo's torchvision and transformers (setup.cfg extra zoo; model definitions only),
#   - every numba kernel compiled into its on-disk cache (`sheaflinalg warmup`).
# A second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s libsuitesparse-dev >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing libsuitesparse-dev (Debian's SuiteSparse) ..."
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libsuitesparse-dev >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv ..."
    "$PY" -m venv .venv
fi

stamp=.venv/.sheaflinalg-setup
want=$(cat setup.cfg pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing sheaflinalg and its dependencies into .venv (first run takes a few minutes) ..."
    pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }
    # PyTorch only for the importer (Network.from_torch) and its tests; the CPU
    # build 2.13.0 is the one this kind of machine carries locally.
    pip install "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
    pip install -e ".[cholmod,import,test,dask,data]" 2>&1 | grep -v "^WARNING: Location" || true
    # The zoo extra: torchvision 0.28.0 is the release for torch 2.13; its PyPI wheel requires the CUDA build
    # of torch, so it is installed without dependencies (its others, numpy and pillow, are already in); its
    # compiled operators do not load beside the CPU torch, and the models need none (tests/helpers/zoo.py).
    # transformers requires no torch.
    pip install --no-deps "torchvision==0.28.0" 2>&1 | grep -v "^WARNING: Location" || true
    pip install "transformers==5.24.0" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -c "import sheaflinalg, sksparse.cholmod, numba, torch, sklearn, hypothesis, dask.distributed, mnist1d" \
        || { echo "setup: installation failed" >&2; exit 1; }
    PYTHONPATH=tests .venv/bin/python -c "from helpers import zoo; zoo.transformers().GPT2Config; zoo.classifiers()" \
        || { echo "setup: torchvision or transformers installation failed" >&2; exit 1; }
    echo "$want" > "$stamp"
fi
# numba compiles each kernel at its first call; compile them all now, once, into its on-disk cache, so that
# the first heat, train or spectrum runs at full speed (seconds when the cache is already complete).
.venv/bin/sheaflinalg warmup --no-progress
