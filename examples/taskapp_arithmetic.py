"""An example task app: arithmetic expressions, solved by the policy the trainer sends.

    TASK_APP_API_KEY=dev-key python examples/taskapp_arithmetic.py --port 8001

Each rollout builds a Generator from the candidate's variables (instructions +
examples), calls the policy model named in the request, and scores the answer.
"""

from __future__ import annotations

import argparse

import promptgym as pg
from promptgym.datasets import arithmetic
from promptgym.taskapp import PolicyModule, RolloutRequest, RolloutResponse, TaskInfo, TrajectoryStep, create_task_app, serve

(X_TRAIN, Y_TRAIN), (X_TEST, Y_TEST) = arithmetic.load_data(n_train=30, n_test=10, seed=0)
SPLITS = {"train": list(range(0, 24)), "validation": list(range(24, 30)), "test": list(range(100, 110))}
INFO = TaskInfo(name="arithmetic", description="Evaluate integer expressions.", splits=SPLITS,
                modules=[PolicyModule(name="policy", instructions="Compute the value of the expression.")])
_models: dict[tuple[str, str | None], pg.LanguageModel] = {}


def example(seed: int) -> tuple[arithmetic.Expression, arithmetic.Answer]:
    return (X_TEST[seed - 100], Y_TEST[seed - 100]) if seed >= 100 else (X_TRAIN[seed], Y_TRAIN[seed])


async def rollout(request: RolloutRequest) -> RolloutResponse:
    key = (request.policy.model, request.policy.inference_url)
    if key not in _models:
        _models[key] = pg.LanguageModel(model=key[0], api_base=key[1], max_tokens=64)
    state = request.policy.variables.get("policy", {})
    generator = pg.Generator(data_model=arithmetic.Answer, language_model=_models[key], name="policy",
                             instructions=state.get("instructions"), examples=state.get("examples", []))
    question, truth = example(request.seed)
    answer = await generator(question)
    reward = float(answer.answer == truth.answer)
    return RolloutResponse(seed=request.seed, reward=reward,
                           feedback="" if reward else f"expected {truth.answer}, got {answer.answer}",
                           trajectory=[TrajectoryStep(module="policy", inputs=question.get_json(), outputs=answer.get_json())])


app = create_task_app(INFO, rollout, api_key_env="TASK_APP_API_KEY")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8001)
    serve(app, port=parser.parse_args().port)
