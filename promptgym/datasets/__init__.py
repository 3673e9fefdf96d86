"""Built-in datasets and generic loaders.

Each dataset module has ``load_data()`` returning
``(x_train, y_train), (x_test, y_test)``, NumPy object arrays of its
DataModels, and exposes those DataModels (``gsm8k.Question``,
``gsm8k.Answer``...). All of them work offline: real data is a small subset
committed under ``promptgym/datasets/data/`` next to its licence; generated
data comes from a seed.

==================  ==============================================  ==================
module              task                                            DataModels
==================  ==============================================  ==================
``gsm8k``           math word problems, numeric answer              Question -> Answer
``boolq``           yes/no question about a passage                 Question -> Answer
``commonsense_qa``  5-way multiple choice                           Question -> Answer
``mmlu_topics``     exam question -> one of 4 topic labels          Question -> Topic
``nq_open``         short-answer open-domain questions              Question -> Answer
``arithmetic``      generated integer expressions (seeded)          Expression -> Answer
``dates``           sentence -> its date as YYYY-MM-DD (seeded)     Text -> Date
``reasoning_gym``   any reasoning-gym task (optional package)       Question -> Answer
==================  ==============================================  ==================

``load_jsonl`` / ``load_csv`` read your own files into DataModels with a
field mapping; a bad row raises ``DatasetError`` naming its line and field.
"""

from promptgym.datasets import (
    arithmetic,
    boolq,
    commonsense_qa,
    dates,
    gsm8k,
    mmlu_topics,
    nq_open,
    reasoning_gym,
)
from promptgym.datasets.loaders import (
    DatasetError,
    load_csv,
    load_jsonl,
    records_to_arrays,
    to_object_array,
    train_test_split,
)
from promptgym.datasets.traces import from_traces

__all__ = [
    "DatasetError",
    "arithmetic",
    "boolq",
    "commonsense_qa",
    "dates",
    "from_traces",
    "gsm8k",
    "load_csv",
    "load_jsonl",
    "mmlu_topics",
    "nq_open",
    "reasoning_gym",
    "records_to_arrays",
    "to_object_array",
    "train_test_split",
]
