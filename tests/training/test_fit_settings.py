"""``fit()``'s arguments are written once: ``Trainer.fit``'s public signature and ``FitSettings`` agree."""

import dataclasses
import inspect

import pytest

import promptgym as pg

from promptgym.training.fit import FitSettings
from promptgym.training.trainer import Trainer


def test_every_fit_keyword_is_a_setting_with_the_same_default():
    public = {name: parameter.default for name, parameter in inspect.signature(Trainer.fit).parameters.items()
              if name not in ("self", "x", "y")}
    settings = {field.name: field.default for field in dataclasses.fields(FitSettings)}
    assert list(public) == list(settings)
    assert {k: v for k, v in public.items() if k != "seed"} == {k: v for k, v in settings.items() if k != "seed"}
    assert public["seed"] is None and settings["seed"] == 0  # None: set_seed()'s, resolved by Trainer.fit


def test_settings_come_from_a_call_s_arguments():
    settings = FitSettings.from_arguments({"self": object(), "x": [1], "y": [2], "epochs": 3, "seed": 7})
    assert settings.epochs == 3 and settings.seed == 7 and settings.batch_size == 1


def test_training_state_is_a_deprecated_name_of_training_setup() -> None:
    program = pg.Program.__new__(pg.Program)
    program.training_setup = None
    with pytest.warns(DeprecationWarning, match="use program.training_setup"):
        assert program.training_state is None
    marker = object()
    with pytest.warns(DeprecationWarning):
        program.training_state = marker
    assert program.training_setup is marker
