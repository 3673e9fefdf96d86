"""GRPO on SmolLM2-135M against the example task app for a few iterations; the tuned GGUF answers as a model string."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

import promptgym as pg
from tests.integration.test_sft_smollm2 import registry  # noqa: F401 - a registry of its own, shared base weights

pytestmark = pytest.mark.integration
pytest.importorskip("peft")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_a_few_grpo_iterations_on_the_example_app_give_a_model_string_that_answers(
        tmp_path: Path, registry: Path) -> None:  # noqa: F811
    from promptgym.core.events import RLIteration
    from promptgym.finetune.rl import RLJob, RLSettings
    from promptgym.finetune.rl.grpo import SeedSplits
    from promptgym.finetune.settings import LoraSettings
    from promptgym.taskapp import TaskAppEnvironment
    from promptgym.taskapp.launch import launch_task_app

    key = secrets.token_urlsafe(16)
    app = launch_task_app(EXAMPLES / "rl_acronyms.py", env={**os.environ, "TASK_APP_API_KEY": key},
                          log=tmp_path / "app.log")
    events = []
    try:
        environment = await TaskAppEnvironment.connect(app.url, api_key=key)
        settings = RLSettings(base_model="local/smollm2-135m-instruct", iterations=2, batch_size=2, group_size=4,
                              max_new_tokens=12, temperature=0.8, learning_rate=3e-4, eval_every=0,
                              lora=LoraSettings(r=8, alpha=16, dropout=0.0))
        splits = SeedSplits(environment.splits["train"], [], environment.splits["test"][:4])
        result = await RLJob.prepare(settings, name="acronyms").run(environment, tmp_path / "run",
                                                                    on_event=events.append, splits=splits)
    finally:
        app.stop()
    assert app.process.poll() is not None
    iterations = [e for e in events if isinstance(e, RLIteration)]
    assert [e.iteration for e in iterations] == [1, 2]
    assert all(0.0 <= e.mean_reward <= 1.0 and e.completion_tokens > 0 for e in iterations)
    status = result.final_status()
    assert status["status"] == "completed" and 0.0 <= status["eval_reward_before"] <= 1.0
    merged = Path(result.files["merged"])
    assert merged.name.endswith("-q8_0.gguf") and merged.stat().st_size > 100e6
    messages = [{"role": "user", "content": 'What is the acronym of "happy dragon bright"? Answer with the capital letters only.'}]
    reply = await pg.LanguageModel(model=status["model_id"], cache=False, max_tokens=16)(messages)
    assert isinstance(reply, str) and reply.strip()
