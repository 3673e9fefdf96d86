"""FineTune lives in optimizers/ beside the others: importing the package loads neither the SFT engine nor torch,
the table knows the class itself, and the older import paths still resolve to the same class."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import promptgym as pg
from promptgym.optimizers import OPTIMIZERS, FineTune


def test_importing_the_optimizers_loads_neither_the_sft_engine_nor_torch() -> None:
    code = ("import json, sys; import promptgym.optimizers as o; assert o.FineTune; "
            "print(json.dumps([m for m in ('torch', 'transformers', 'peft', 'promptgym.finetune') if m in sys.modules]))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []


def test_building_a_finetune_loads_the_engine_but_not_torch() -> None:
    code = ("import json, sys; from promptgym.optimizers import FineTune; FineTune(n_epochs=2); "
            "print(json.dumps([m for m in ('torch', 'promptgym.finetune.sft_run') if m in sys.modules]))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == ["promptgym.finetune.sft_run"]


def test_the_table_holds_the_class_and_every_path_resolves_to_it() -> None:
    assert OPTIMIZERS["finetune"] is FineTune
    assert isinstance(pg.optimizers.get({"class_name": "FineTune", "config": {"n_epochs": 2}}), FineTune)
    assert pg.finetune.FineTune is FineTune
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from promptgym.finetune.optimizer import FineTune as old_spelling
    assert old_spelling is FineTune
    assert "promptgym.optimizers.finetune.FineTune" in str(caught[0].message)
