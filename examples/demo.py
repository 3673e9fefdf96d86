"""The main job: a real program on the embedded model (see README)."""

import asyncio

import numpy as np

import promptgym as pg


class Question(pg.DataModel):
    question: str = pg.Field(description="A short factual question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer, in a few words")


async def main() -> None:
    lm = pg.LanguageModel(model="local/qwen2.5-coder-0.5b-instruct")
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm)(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="qa")
    program.summary()
    x = np.array([Question(question=q) for q in ["What is the capital of France?", "How many legs does a spider have?",
                                                  "What color is the sky on a clear day?"]], dtype=object)
    predictions = await program.predict(x, batch_size=3)
    for question, prediction in zip(x, predictions):
        print(f"{question.question:45} -> {prediction.answer if prediction else '(failed)'}")


if __name__ == "__main__":
    asyncio.run(main())
