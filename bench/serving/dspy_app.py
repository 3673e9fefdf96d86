"""DSPy's program behind a minimal FastAPI app, the way DSPy's deployment tutorial shows (DSPy venv).

    $DSPY_VENV/bin/python bench/serving/dspy_app.py --base-url http://127.0.0.1:8931 --port 8952

``dspy.asyncify(program)`` runs the (synchronous) program in DSPy's worker threads; the tutorial's
``async_max_workers`` is raised to 32 so that concurrency 32 is not capped by it. The same
one-step program and fake server as bench/overhead/run_dspy.py, caches off.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before dspy imports litellm

import dspy
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField(desc="A question")
    answer: str = dspy.OutputField(desc="The answer")


class Question(BaseModel):
    question: str


def build_app(base_url: str, workers: int) -> FastAPI:
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    lm = dspy.LM("openai/fake", api_base=f"{base_url}/v1", api_key="fake", cache=False)
    dspy.configure(lm=lm, async_max_workers=workers)
    program = dspy.asyncify(dspy.Predict(QA))
    app = FastAPI()

    @app.post("/predict")
    async def predict(question: Question) -> dict:
        result = await program(question=question.question)
        return {"status": "success", "data": result.toDict()}

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=32)
    args = parser.parse_args()
    uvicorn.run(build_app(args.base_url, args.workers), host="127.0.0.1", port=args.port, log_level="warning")
