"""``promptgym`` for the weight-flow fault cases: the GGUF export is recorded instead of run.

    python bench/faults/tiny_cli.py train -c sft.toml --yes

llama.cpp's converter does not know the tokenizer of the tiny in-test model the cases train, so the
export step writes a stand-in file (as the tests' ``fake_export`` fixture does); everything else is the
real CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import promptgym.finetune.weight_run as weight_run
from promptgym.cli.main import main
from promptgym.core.events import ModelExported


def recorded_export(job: Any, folder: Path, adapter_dir: Path, name: str, on_event: Any) -> dict[str, str]:
    path = folder / "export" / f"{name}-q8_0.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")
    on_event(ModelExported(part="merged", format="q8_0", path=str(path), size="0.0 MB"))
    return {"merged": str(path)}


if __name__ == "__main__":
    weight_run.export_files = recorded_export
    main()
