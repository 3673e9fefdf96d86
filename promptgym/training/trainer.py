"""``Trainer``: what ``Program`` inherits to be trained, as Keras' ``Model`` inherits its ``Trainer``.

compile / fit / evaluate / predict, and the compile configuration a saved
program carries (with the optimizer's and the trainer's state, so a loaded
program can resume ``fit()``)::

    program.compile(reward="exactmatch", optimizer="randomfewshot")
    history = await program.fit(x_train, y_train, epochs=2)
    program.get_compile_config()        # what program.save() stores
"""

from __future__ import annotations

import warnings

from pathlib import Path
from typing import Any

import numpy as np

from promptgym.modules.model_choice import current_models
from promptgym.rollouts.executor import Executor
from promptgym.stats import Evaluation
from promptgym.training.compile import TrainingSetup, compile_setup, restore_setup
from promptgym.training.compile_utils import CompileMetrics
from promptgym.training.evaluate import evaluate_program
from promptgym.training.fit import FitSettings, fit_program
from promptgym.training.history import History
from promptgym.training.predict import predict_program
from promptgym.training.sft_export import SFTDataReport, export_sft_data


class Trainer:
    """compile / fit / evaluate / predict for a program (a class that also is a Module)."""

    training_setup: TrainingSetup | None = None
    """What ``compile()`` resolved (None before it)."""
    stop_training: bool = False
    """Set by a callback (EarlyStopping) to end ``fit()`` after the current epoch."""

    @property
    def training_state(self) -> TrainingSetup | None:
        """Deprecated name of :attr:`training_setup`."""
        warnings.warn("program.training_state is deprecated: use program.training_setup", DeprecationWarning,
                      stacklevel=2)
        return self.training_setup

    @training_state.setter
    def training_state(self, value: TrainingSetup | None) -> None:
        warnings.warn("program.training_state is deprecated: use program.training_setup", DeprecationWarning,
                      stacklevel=2)
        self.training_setup = value

    def _compiled(self, part: str) -> Any:
        if f"_own_{part}" in self.__dict__:  # a subclass set an attribute of that name itself
            return self.__dict__[f"_own_{part}"]
        if self.training_setup is None:
            return [] if part == "metrics" else None
        value = getattr(self.training_setup, part)
        return list(value) if part == "metrics" else value

    @property
    def reward(self) -> Any:
        """The compiled reward (None before ``compile()``)."""
        return self._compiled("reward")

    @reward.setter
    def reward(self, value: Any) -> None:
        self.__dict__["_own_reward"] = value

    @property
    def optimizer(self) -> Any:
        """The compiled optimizer (None before ``compile()``)."""
        return self._compiled("optimizer")

    @optimizer.setter
    def optimizer(self, value: Any) -> None:
        self.__dict__["_own_optimizer"] = value

    @property
    def metrics(self) -> list[Any]:
        """The compiled metrics ([] before ``compile()``)."""
        return self._compiled("metrics")

    @metrics.setter
    def metrics(self, value: Any) -> None:
        self.__dict__["_own_metrics"] = value

    @property
    def compiled(self) -> bool:
        """Whether ``compile()`` was called."""
        return self.training_setup is not None

    @property
    def _compile_metrics(self) -> Any:
        """The compiled metrics as synalinks' ``CompileMetrics`` (None before ``compile()``)."""
        if self.training_setup is None:
            return None
        return CompileMetrics(metrics=list(self.training_setup.metrics))

    def compile(self, reward: Any = None, optimizer: Any = None, metrics: list[Any] | None = None) -> None:
        """Attach a reward, an optimizer and metrics (instances, names or config dicts).

        >>> # program.compile(reward="exactmatch", optimizer="randomfewshot", metrics=["f1_score"])
        """
        self.training_setup = compile_setup(self, reward=reward, optimizer=optimizer, metrics=metrics)

    async def fit(self, x: Any = None, y: Any = None, validation_split: float = 0.1, validation_data: Any = None,
                  epochs: int = 1, batch_size: int = 1, minibatch_size: int = 4, validation_batch_size: int = 32,
                  validation_freq: int = 1, callbacks: list[Any] | None = None, shuffle: bool = False,
                  seed: int | None = None, verbose: Any = 1, max_errors: int | None = None, initial_epoch: int = 0,
                  initial_step: int = 0, executor: Executor | None = None, max_usd: float | None = None,
                  budget: Any = None, run_dir: str | Path | None = None) -> History:
        """Train; see docs/training.md for every argument. Returns a :class:`History`.

        ``run_dir``: keep a run folder there (status, events, history, checkpoints after every step, the
        best program), the same one ``promptgym train`` keeps; fitting again with the same ``run_dir`` goes
        on from its last checkpoint, inside a FineTune stage's SFT too (docs/runs.md).

        ``max_usd`` (or ``budget=Budget(usd=...)``): a cap in dollars on every model call the run makes;
        it stops cleanly before a call would cross it, with the best program so far (docs/cost.md).

        ``initial_epoch`` / ``initial_step``: where a resumed run starts (a
        program loaded from a checkpoint goes on with the rollouts it had
        already paid for). ``executor``: where rollouts run (default:
        ``promptgym.rollouts.get_default_executor()``). ``seed``: default ``set_seed()``'s (0).
        """
        if seed is None:
            from promptgym.session import get_seed

            seed = get_seed()
        return await fit_program(self, x, y, FitSettings.from_arguments(locals()))

    async def evaluate(self, x: Any = None, y: Any = None, batch_size: int = 32, verbose: Any = "auto",
                       callbacks: list[Any] | None = None, max_errors: int | None = None,
                       executor: Executor | None = None) -> Evaluation:
        """``{"reward": ..., "<metric>": ...}`` averaged over the examples; failures score 0, with their
        confidence interval and a paired test against another evaluation (:class:`~promptgym.stats.Evaluation`)."""
        return await evaluate_program(self, x, y, batch_size=batch_size, verbose=verbose, callbacks=callbacks,
                                      max_errors=max_errors, executor=executor)

    async def predict(self, x: Any, batch_size: int = 32, verbose: Any = "auto", callbacks: list[Any] | None = None,
                      executor: Executor | None = None) -> np.ndarray:
        """Run on every input of ``x``; failed examples are None and listed in ``.failures``.

        >>> # predictions = await program.predict(x_test, batch_size=32)
        >>> # predictions.failures  -> {index: "error message"}
        """
        return await predict_program(self, x, batch_size=batch_size, verbose=verbose, callbacks=callbacks,
                                     executor=executor)

    async def export_sft_data(self, x: Any, y: Any, path: str, min_reward: float = 1.0,
                              with_demonstrations: bool = False, batch_size: int = 32,
                              executor: Executor | None = None) -> SFTDataReport:
        """Write chat JSONL for fine-tuning from the runs on ``(x, y)`` that earn ``min_reward``: each Generator's
        messages (without its demonstrations unless ``with_demonstrations``) and the answer it gave.

        >>> # report = await program.export_sft_data(x_train, y_train, "distilled.jsonl", min_reward=1.0)
        >>> # then: promptgym.finetune.sft(SFTSettings(base_model=..., train_file="distilled.jsonl"), "runs/distil")
        """
        return await export_sft_data(self, x, y, path, min_reward=min_reward, with_demonstrations=with_demonstrations,
                                     batch_size=batch_size, executor=executor)

    async def predict_on_batch(self, x: Any) -> np.ndarray:
        """Predictions for one batch (all of ``x`` at once, no progress bar)."""
        return await self.predict(x, batch_size=max(1, len(x)), verbose=0)

    async def test_on_batch(self, x: Any, y: Any, return_dict: bool = True) -> Any:
        """``evaluate()`` on one batch; ``return_dict=False`` gives the values as a list (reward first)."""
        result = await self.evaluate(x, y, batch_size=max(1, len(x)), verbose=0)
        return dict(result) if return_dict else list(result.values())

    # -- the compile configuration round trip ---------------------------------------------

    def get_compile_config(self) -> dict[str, Any] | None:
        """The reward, optimizer and metrics as config dicts (None before ``compile()``)."""
        return self.training_setup.get_config() if self.training_setup is not None else None

    def get_training_progress(self) -> dict[str, Any]:
        """The optimizer's state and, during or after ``fit()``, the trainer's: what a resumed fit needs."""
        if self.training_setup is None:
            return {}
        progress: dict[str, Any] = {"optimizer_state": self.training_setup.optimizer.get_state(),
                                    "models": current_models(self)}  # a FineTune stage's choice, for a resume
        trainer_state = self.training_setup.trainer_state()
        if trainer_state is not None:
            progress["trainer_state"] = trainer_state
        return progress

    def compile_from_config(self, config: dict[str, Any], optimizer_state: dict[str, Any] | None = None,
                            trainer_state: dict[str, Any] | None = None) -> None:
        """Compile from :meth:`get_compile_config`'s output, restoring the optimizer's and trainer's progress."""
        self.training_setup = restore_setup(config, optimizer_state, trainer_state)
