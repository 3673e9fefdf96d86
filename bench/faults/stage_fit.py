"""One ``fit(run_dir=...)`` of a FineTune or a Sequence on the tiny model, for the stage-boundary kills.

    python bench/faults/stage_fit.py TINY_MODEL RUN_DIR chain       # Sequence([FineTune, RandomFewShot])
    python bench/faults/stage_fit.py TINY_MODEL RUN_DIR finetune    # FineTune alone
    PGFAULT_KILL_AT="stage_ended:index=0" python bench/faults/stage_fit.py ...   # kill -9 right after that event

``PGFAULT_KILL_AT`` is ``event[:key=value][#n]``: the process kills itself (SIGKILL: no handler, no
checkpoint on the way out) right after the n-th matching record reaches ``events.jsonl``. The GGUF export
is recorded instead of run (as in ``tiny_cli.py``) and the tuned model answers as a scripted LM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

import promptgym as pg  # noqa: E402
import promptgym.finetune.weight_run as weight_run  # noqa: E402
from promptgym.optimizers.finetune import FineTune  # noqa: E402
from promptgym.modules.model_choice import set_model_factory  # noqa: E402
from promptgym.runs.events import EventWriter  # noqa: E402
from promptgym.testing import ScriptedLanguageModel, last_user_json  # noqa: E402
from tests.cli.helpers import WORDS, Answer, Question, build_program  # noqa: E402
from tiny_cli import recorded_export  # noqa: E402

SFT = dict(n_epochs=2, batch_size=3, max_length=4096, lora={"r": 2, "target_modules": ["q_proj", "v_proj"]}, seed=0,
           sft={"save_steps": 2})
"""6 SFT steps (9 rows, batch 3, 2 epochs), a checkpoint every 2 and at the end."""


def kill_at(spec: str) -> None:
    """SIGKILL this process right after the ``#n``-th record matching ``event[:key=value]`` is written."""
    spec, _, nth = spec.partition("#")
    kind, _, condition = spec.partition(":")
    key, _, value = condition.partition("=")
    wanted, seen = int(nth or 1), [0]
    write = EventWriter.write

    def write_then_die(self: EventWriter, record: dict) -> None:
        write(self, record)
        if record.get("event") == kind and (not key or str(record.get(key)) == value):
            seen[0] += 1
            if seen[0] == wanted:
                os.kill(os.getpid(), signal.SIGKILL)

    EventWriter.write = write_then_die  # type: ignore[method-assign]


def upper_case(request: object) -> dict:
    return {"answer": last_user_json(request)["question"].upper()}


async def main(tiny_model: str, run_dir: str, kind: str) -> None:
    program = build_program()
    finetune = FineTune(base_model=tiny_model, **SFT)
    optimizer = finetune if kind == "finetune" else pg.optimizers.Sequence(
        [finetune, pg.optimizers.RandomFewShot(nb_max_examples=2)])
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x = [Question(question=word) for word in WORDS[:12]]
    y = [Answer(answer=word.upper()) for word in WORDS[:12]]
    history = await program.fit(x[:9], y[:9], validation_data=(x[9:], y[9:]), epochs=1, batch_size=3,
                                minibatch_size=3, verbose=0, run_dir=run_dir)
    print("RESULT " + json.dumps({"model": program.modules[-1].language_model.model,
                                  "stages": history.history.get("stage", [])}), flush=True)


if __name__ == "__main__":
    weight_run.export_files = recorded_export
    set_model_factory(lambda base, model: ScriptedLanguageModel(respond=upper_case, model=model))
    if os.environ.get("PGFAULT_KILL_AT"):
        kill_at(os.environ["PGFAULT_KILL_AT"])
    asyncio.run(main(*sys.argv[1:4]))
