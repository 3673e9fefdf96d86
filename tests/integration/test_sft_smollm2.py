"""Fine-tune SmolLM2-135M for a few steps, export GGUF, and answer through LanguageModel(model=<model_id>)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import promptgym as pg
from promptgym.lm.finetuned_models import FineTunedModel, finetuned_model, register_finetuned_model

pytestmark = pytest.mark.integration
pytest.importorskip("peft")

QUESTION = "What is the secret word?"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30}}, "required": ["answer"]}


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry of its own; the dequantised base weights stay in the shared models dir (derived once)."""
    from promptgym.finetune.base_model import hf_cache_dir

    shared_hf = hf_cache_dir("x", "y").parent
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "hf").symlink_to(shared_hf, target_is_directory=True)
    return tmp_path / "models"


async def test_a_few_steps_of_sft_give_a_model_string_that_answers(tmp_path: Path, registry: Path) -> None:
    from promptgym.finetune import SFTSettings, sft

    rows = [{"messages": [{"role": "system", "content": "Answer with JSON."},
                          {"role": "user", "content": f"{QUESTION} ({i})"},
                          {"role": "assistant", "content": json.dumps({"answer": "tangerine"})}]} for i in range(8)]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in rows))
    settings = SFTSettings(base_model="local/smollm2-135m-instruct", train_file=str(train), n_epochs=3, batch_size=4,
                           learning_rate=2e-3, validation_split=0.25, summary_samples=1, save_steps=100)
    result = sft(settings, tmp_path / "run", name="secret")

    assert result.steps == 6 and result.final_eval_loss < result.initial_eval_loss
    merged, adapter = Path(result.files["merged"]), Path(result.files["adapter"])
    assert merged.name.endswith("-q8_0.gguf") and merged.stat().st_size > 100e6 and adapter.stat().st_size > 1e6
    assert "tangerine" in (tmp_path / "run" / "summary.md").read_text()

    messages = [{"role": "system", "content": "Answer with JSON."}, {"role": "user", "content": f"{QUESTION} (9)"}]
    answer = await pg.LanguageModel(model=result.model_id, cache=False, max_tokens=24)(messages, schema=SCHEMA)
    assert answer["answer"] == "tangerine"

    # the adapter GGUF on the base GGUF answers the same
    entry = finetuned_model(result.model_id.removeprefix("local/"))
    register_finetuned_model(FineTunedModel(name="secret-adapter", base=entry.base, adapter=entry.adapter,
                                            base_gguf=entry.base_gguf, run="adapter-only"))
    answer = await pg.LanguageModel(model="local/secret-adapter", cache=False, max_tokens=24)(messages, schema=SCHEMA)
    assert answer["answer"] == "tangerine"
