"""Compiled metrics and rewards per program output (synalinks' ``trainers.compile_utils``).

A program with several outputs can be scored per output: ``CompileReward``
routes each reward of a dict or list to its output (optionally weighted) and
sums them; ``CompileMetrics`` keeps one ``MetricsList`` per output and names
each result after its output. ``BatchReward``/``BatchMetric`` instances get
the whole batch at once, the others one sample at a time::

    reward = CompileReward(reward={"a": ExactMatch(), "b": ExactMatch()}, output_names=["a", "b"])
    await reward({"a": x, "b": y}, {"a": x, "b": y})      # 2.0
    metrics = CompileMetrics(metrics=[PassAtK(k=1), Accuracy()])
    await metrics.update_state_batch(y_trues, y_preds)
    metrics.result()                                        # {"pass_at_k": ..., "accuracy": ...}

The design and the error messages are synalinks' (Apache 2.0), adapted to
promptgym's metrics and rewards.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from promptgym import metrics as metrics_module
from promptgym import rewards as rewards_module
from promptgym.core import tree
from promptgym.metrics.sampled import BatchMetric
from promptgym.rewards.builtin import BatchReward


def is_function_like(value: Any) -> bool:
    """What a metric/reward entry may be: None, a name, or something callable (an instance or a function)."""
    return value is None or isinstance(value, str) or callable(value)


def get_metric(identifier: Any) -> Any:
    """A metric instance from a name, an instance or a function (wrapped in ``MeanMetricWrapper``)."""
    if identifier is None:
        return None
    if isinstance(identifier, metrics_module.Metric) or not callable(identifier) or isinstance(identifier, type):
        metric = metrics_module.get(identifier)
    else:
        metric = metrics_module.MeanMetricWrapper(identifier)
    if isinstance(identifier, str):
        metric.name = identifier
    return metric


def get_reward(identifier: Any) -> Any:
    """A reward instance from a name, an instance or a function (wrapped in ``RewardFunctionWrapper``)."""
    if identifier is None:
        return None
    if isinstance(identifier, rewards_module.Reward) or isinstance(identifier, str) or isinstance(identifier, dict):
        return rewards_module.get(identifier)
    return rewards_module.RewardFunctionWrapper(fn=identifier, name=getattr(identifier, "__name__", "reward"))


class _RebuiltByCompile:
    """Not saved: ``compile()`` builds it again from what is (``saved_instead``)."""

    saved_instead: ClassVar[str]

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} is rebuilt by compile(); save {self.saved_instead}")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        raise NotImplementedError(f"{cls.__name__} is rebuilt by compile(); save {cls.saved_instead}")


class MetricsList:
    """The metrics of one output, updated together."""

    def __init__(self, metrics: list[Any], name: str = "metrics_list", output_name: str | None = None) -> None:
        self.metrics = list(metrics)
        self.name = name
        self.output_name = output_name

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        for metric in self.metrics:
            await metric.update_state(y_true, y_pred)

    async def update_state_batch(self, y_true_batch: list[Any], y_pred_batch: list[Any]) -> None:
        """A batch metric sees the whole batch once; the others each sample."""
        for metric in self.metrics:
            if isinstance(metric, BatchMetric):
                await metric.update_state(y_true_batch, y_pred_batch)
            else:
                for y_true, y_pred in zip(y_true_batch, y_pred_batch):
                    await metric.update_state(y_true, y_pred)

    def reset_state(self) -> None:
        for metric in self.metrics:
            metric.reset_state()

    def get_result(self) -> dict[str, Any]:
        return {metric.name: metric.result() for metric in self.metrics}

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError("MetricsList is built by CompileMetrics; save the metrics themselves")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MetricsList":
        raise NotImplementedError("MetricsList is built by CompileMetrics; save the metrics themselves")


def _metric_sublist(entries: Any, argument_name: str, where: str) -> list[Any]:
    entries = entries if isinstance(entries, list) else [entries]
    if not all(is_function_like(entry) for entry in entries):
        raise ValueError(f"All entries in the sublists of the `{argument_name}` {where} should be metric objects. "
                         f"Found the following sublist with unknown types: {entries}")
    return [get_metric(entry) for entry in entries if entry is not None]


class CompileMetrics(_RebuiltByCompile):
    """The compiled metrics of a program, one :class:`MetricsList` per output (built on the first update)."""

    saved_instead = "the metrics themselves"

    def __init__(self, metrics: Any, name: str = "compile_metrics", output_names: list[str] | None = None) -> None:
        if metrics and not isinstance(metrics, (list, tuple, dict)):
            raise ValueError("Expected `metrics` argument to be a list, tuple, or dict. "
                             f"Received instead: metrics={metrics} of type {type(metrics)}")
        self._user_metrics = metrics
        self.name = name
        self.output_names = output_names
        self.built = False
        self._flat_metrics: list[MetricsList | None] = []

    @property
    def metrics(self) -> list[Any]:
        """Every metric instance (empty before the first update builds them)."""
        if not self.built:
            return []
        return [metric for entry in self._flat_metrics if entry is not None for metric in entry.metrics]

    @property
    def variables(self) -> list[Any]:
        return [variable for metric in self.metrics for variable in getattr(metric, "variables", [])]

    def _flatten_y(self, y: Any) -> list[Any]:
        if isinstance(y, dict) and self.output_names:
            return [y[name] for name in self.output_names if name in y]
        return tree.flatten(y)

    def build(self, y_true: Any, y_pred: Any) -> None:
        output_names = self.output_names or (sorted(y_pred) if isinstance(y_pred, dict) else None)
        num_outputs = len(output_names) if output_names else (len(y_pred) if isinstance(y_pred, (list, tuple))
                                                               else 1)
        self._flat_metrics = self._build_metrics_set(self._user_metrics, num_outputs, output_names,
                                                     self._flatten_y(y_pred), "metrics")
        self.built = True

    def _build_metrics_set(self, metrics: Any, num_outputs: int, output_names: list[str] | None,
                           y_pred: list[Any], argument_name: str) -> list[MetricsList | None]:
        if isinstance(metrics, dict):
            if output_names is None:
                raise ValueError(f"Argument `{argument_name}` can only be provided as a dict when the program also "
                                 f"returns a dict of outputs. Received {argument_name}={metrics}")
            for name in metrics:
                if name not in output_names:
                    raise ValueError(f"In the dict argument `{argument_name}`, key '{name}' does not correspond to "
                                     f"any program output. Received:\n{argument_name}={metrics}")
        if num_outputs == 1:
            if not metrics:
                return [None]
            entries = tree.flatten(metrics) if isinstance(metrics, dict) else metrics
            entries = entries if isinstance(entries, list) else [entries]
            if not all(is_function_like(entry) for entry in entries):
                raise ValueError(f"Expected all entries in the `{argument_name}` list to be metric objects. "
                                 f"Received instead:\n{argument_name}={entries}")
            return [MetricsList([get_metric(entry) for entry in entries if entry is not None])]
        if isinstance(metrics, (list, tuple)):
            if len(metrics) != len(y_pred):
                raise ValueError(f"For a program with multiple outputs, when providing the `{argument_name}` "
                                 "argument as a list, it should have as many entries as the program has outputs. "
                                 f"Received:\n{argument_name}={metrics}\nof length {len(metrics)} whereas the "
                                 f"program has {len(y_pred)} outputs.")
            return [MetricsList(_metric_sublist(entries, argument_name, "list"),
                                output_name=output_names[index] if output_names else None)
                    for index, entries in enumerate(metrics)]
        if isinstance(metrics, dict):
            return [MetricsList(_metric_sublist(metrics[name], argument_name, f"dict (at key '{name}')"),
                                output_name=name) if name in metrics else None
                    for name in output_names or []]
        return [None] * num_outputs

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        if not self.built:
            self.build(y_true, y_pred)
        for metrics, sample_true, sample_pred in zip(self._flat_metrics, self._flatten_y(y_true),
                                                     self._flatten_y(y_pred)):
            if metrics is not None:
                await metrics.update_state(sample_true, sample_pred)

    async def update_state_batch(self, y_true_batch: list[Any], y_pred_batch: list[Any]) -> None:
        """Every metric over a whole batch (a ``BatchMetric`` such as ``PassAtK`` sees it at once)."""
        if not self.built:
            self.build(y_true_batch[0], y_pred_batch[0])
        trues = [self._flatten_y(sample) for sample in y_true_batch]
        preds = [self._flatten_y(sample) for sample in y_pred_batch]
        for index, metrics in enumerate(self._flat_metrics):
            if metrics is not None:
                await metrics.update_state_batch([sample[index] for sample in trues],
                                                 [sample[index] for sample in preds])

    def reset_state(self) -> None:
        """Reset every metric; before the build, the user's own instances (one list may serve several programs)."""
        if not self.built:
            for metric in tree.flatten(self._user_metrics):
                if isinstance(metric, metrics_module.Metric):
                    metric.reset_state()
            return
        for metrics in self._flat_metrics:
            if metrics is not None:
                metrics.reset_state()

    def result(self) -> dict[str, Any]:
        """Each metric's result by name (``<output>_<metric>``; a repeated name gets ``_1``, ``_2``...)."""
        if not self.built:
            raise ValueError("Cannot get result() since the metric has not yet been built.")
        results: dict[str, Any] = {}
        seen: dict[str, int] = {}
        for metrics in self._flat_metrics:
            for metric in metrics.metrics if metrics else []:
                name = f"{metrics.output_name}_{metric.name}" if metrics.output_name else metric.name
                if name in seen:
                    seen[name] += 1
                    name = f"{name}_{seen[name] - 1}"
                else:
                    seen[name] = 1
                results[name] = metric.result()
        return results



@dataclass
class FlatReward:
    """One reward of a :class:`CompileReward`: where its output is, the reward, its weight and its name."""

    path: tuple[Any, ...]
    reward: Any
    weight: float | None
    name: str


class CompileReward(_RebuiltByCompile):
    """The compiled reward of a program: one reward, or one per output (a dict or a list), weighted and summed."""

    saved_instead = "the reward itself"

    def __init__(self, reward: Any, reward_weights: Any = None, reduction: str = "mean",
                 output_names: list[str] | None = None) -> None:
        if reward_weights and not isinstance(reward_weights, (list, tuple, dict, float, int)):
            raise ValueError("Expected `reward_weights` argument to be a float (single output case) or a list, "
                             f"tuple, or dict (multiple output case). Received instead: reward_weights="
                             f"{reward_weights} of type {type(reward_weights)}")
        self._user_reward = reward
        self._user_reward_weights = reward_weights
        self.reduction = reduction
        self.output_names = output_names
        self.name = "compile_reward"
        self.built = False
        self._flat_rewards: list[FlatReward] = []
        self._metrics: list[Any] = []

    @property
    def metrics(self) -> list[Any]:
        """One ``Mean`` per output reward when there are several (``<name>_reward``); empty otherwise."""
        return self._metrics

    @property
    def variables(self) -> list[Any]:
        return [variable for metric in self._metrics for variable in metric.variables]

    def _weight(self, key: Any) -> float | None:
        weights = self._user_reward_weights
        if weights is None:
            return None
        if isinstance(weights, (int, float)):
            return float(weights)
        if isinstance(weights, dict):
            return weights.get(key)
        return weights[key] if isinstance(key, int) and key < len(weights) else None

    def build(self, y_true: Any, y_pred: Any) -> None:
        reward = self._user_reward
        self._flat_rewards = []
        if isinstance(reward, dict):
            names = self.output_names or (sorted(y_pred) if isinstance(y_pred, dict) else list(reward))
            if self.output_names and set(reward) - set(self.output_names):
                raise ValueError(f"Expected keys {self.output_names} in reward dict, but found "
                                 f"reward.keys()={list(reward)}")
            for index, name in enumerate(names):
                if reward.get(name) is not None:
                    path = (name,) if isinstance(y_pred, dict) else (index,)
                    self._flat_rewards.append(FlatReward(path, get_reward(reward[name]), self._weight(name), name))
        elif isinstance(reward, (list, tuple)):
            for index, item in enumerate(reward):
                if item is not None:
                    name = self.output_names[index] if self.output_names else str(index)
                    self._flat_rewards.append(FlatReward((index,), get_reward(item), self._weight(index), name))
        else:
            resolved = get_reward(reward)
            self._flat_rewards.append(FlatReward((), resolved, self._weight(0), getattr(resolved, "name", "reward")))
        if len(self._flat_rewards) > 1:
            self._metrics = [metrics_module.Mean(name=f"{flat.name}_reward") for flat in self._flat_rewards]
        self.built = True

    @property
    def has_batch_rewards(self) -> bool:
        """Whether one of the rewards is a ``BatchReward`` (scored on the whole batch at once)."""
        return self.built and any(isinstance(flat.reward, BatchReward) for flat in self._flat_rewards)

    @staticmethod
    def _resolve(path: tuple[Any, ...], value: Any) -> Any:
        for key in path:
            value = value[key]
        return value

    async def _score(self, flat: FlatReward, y_true: Any, y_pred: Any) -> float:
        value = await flat.reward(y_true, y_pred)
        value = float(value) if value is not None else 0.0
        return value * flat.weight if flat.weight is not None else value

    async def compute_batch(self, y_true_batch: list[Any], y_pred_batch: list[Any]) -> list[float]:
        """Each sample's total reward: batch rewards once over the batch, the others sample by sample."""
        if not self.built:
            self.build(y_true_batch[0], y_pred_batch[0])
        totals = [0.0] * len(y_pred_batch)
        for index, flat in enumerate(self._flat_rewards):
            trues = [self._resolve(flat.path, sample) for sample in y_true_batch]
            preds = [self._resolve(flat.path, sample) for sample in y_pred_batch]
            if isinstance(flat.reward, BatchReward):
                per_sample = [float(value) for value in await flat.reward.compute_batch(trues, preds)]
                if flat.weight is not None:
                    per_sample = [value * flat.weight for value in per_sample]
            else:
                per_sample = list(await asyncio.gather(*[self._score(flat, t, p) for t, p in zip(trues, preds)]))
            if self._metrics:
                for value in per_sample:
                    await self._metrics[index].update_state(value)
            totals = [total + value for total, value in zip(totals, per_sample)]
        return totals

    async def __call__(self, y_true: Any, y_pred: Any) -> float:
        """The summed (weighted) reward of one sample."""
        if not self.built:
            self.build(y_true, y_pred)
        total = 0.0
        for index, flat in enumerate(self._flat_rewards):
            value = await self._score(flat, self._resolve(flat.path, y_true), self._resolve(flat.path, y_pred))
            if self._metrics:
                await self._metrics[index].update_state(value)
            total += value
        return total

