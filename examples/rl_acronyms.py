"""An RL-ready task app: write the acronym of a phrase ("happy dragon bright" -> "HDB"), with partial credit.

    promptgym train --config examples/configs/rl_acronyms.toml --yes      # the CLI starts this file itself
    TASK_APP_API_KEY=dev-key python examples/rl_acronyms.py --port 8001   # or run it yourself (task_url)

Each seed makes a phrase of 3 or 4 common words. The reward compares the capital letters of the reply with
the acronym (difflib's similarity ratio; the task itself is examples/acronyms_task.py): "HDB" scores 1, "HDBR" 0.86, "The acronym is HDB." 0.3, chatter
without the letters near 0. Every reply earns something in between, so the rollouts of a seed differ and
GRPO has a signal; a small model starts by answering in sentences, and learns to answer with the letters.
The same app serves prompt learning: without ``policy.inference_url`` it asks the model ``policy.model``.
"""

from __future__ import annotations

import argparse

from acronyms_task import INSTRUCTIONS, phrase, question, score

from promptgym.taskapp import (
    PolicyModule, RolloutRequest, RolloutResponse, TaskInfo, TrajectoryStep, ask_policy, create_task_app, serve,
)

SPLITS = {"train": list(range(0, 1000)), "validation": list(range(5000, 5016)), "test": list(range(9000, 9032))}
INFO = TaskInfo(name="acronyms", description="Write the acronym (capital initials) of a phrase.", splits=SPLITS,
                modules=[PolicyModule(name="policy", instructions=INSTRUCTIONS)])
MAX_TOKENS = 16


async def rollout(request: RolloutRequest) -> RolloutResponse:
    text, acronym = phrase(request.seed)
    state = request.policy.variables.get("policy", {})
    messages = [{"role": "system", "content": state.get("instructions") or INSTRUCTIONS}]
    for example in state.get("examples", []):  # demonstrations, when a prompt optimiser adds them
        messages += [{"role": "user", "content": question(example["inputs"]["phrase"])},
                     {"role": "assistant", "content": example["outputs"]["acronym"]}]
    messages.append({"role": "user", "content": question(text)})
    reply = await ask_policy(request.policy, messages, max_tokens=MAX_TOKENS)
    reward = score(reply, acronym)
    return RolloutResponse(seed=request.seed, reward=reward, metrics={"exact": float(reply.strip() == acronym)},
                           feedback="" if reward == 1 else f"expected {acronym}, got {reply.strip()[:40]!r}",
                           trajectory=[TrajectoryStep(module="policy", inputs={"phrase": text},
                                                      outputs={"acronym": reply.strip()})])


app = create_task_app(INFO, rollout, api_key_env="TASK_APP_API_KEY")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8001)
    serve(app, port=parser.parse_args().port)
