"""From a trained adapter to GGUF files llama.cpp runs: the merged model (q8_0 or f16) and the adapter alone.

    merged = export_merged(source, checkpoint_dir, out_dir / "model-q8_0.gguf", "q8_0", name="ft-dates")
    adapter = export_adapter(source, checkpoint_dir, out_dir / "adapter-f32.gguf")

Both start from a checkpoint folder (peft's adapter files) and a fresh copy of the base weights, so
an export never depends on the state of a model in memory. llama.cpp's own converters do the
writing (see :mod:`promptgym.finetune.converters`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from promptgym.finetune.base_model import BaseModelSource, ensure_hf_weights
from promptgym.finetune.converters import converter_script

MergedType = Literal["q8_0", "f16"]


class ExportError(RuntimeError):
    """A converter failed; the message carries the end of its output."""


def _run_converter(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ExportError(f"{what} failed (exit {result.returncode}):\n{tail}")


def merge_to_folder(source: BaseModelSource, adapter_dir: Path, target: Path) -> Path:
    """Base weights + adapter, merged, saved as a Hugging Face folder (safetensors and tokenizer)."""
    import torch  # deferred: heavy, loaded when a job runs
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_dir = ensure_hf_weights(source)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32, local_files_only=True)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True).save_pretrained(str(target))
    del merged, base
    return target


def export_merged(source: BaseModelSource, adapter_dir: Path, output: Path, outtype: MergedType, name: str) -> Path:
    """One GGUF with the adapter merged into the base weights."""
    output.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".merged-hf.", dir=output.parent))
    try:
        merge_to_folder(source, adapter_dir, scratch)
        partial = output.with_name(f".{output.name}.tmp")
        _run_converter([sys.executable, str(converter_script("convert_hf_to_gguf.py")), str(scratch),
                        "--outtype", outtype, "--outfile", str(partial), "--model-name", name],
                       f"converting the merged model to GGUF ({outtype})")
        os.replace(partial, output)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return output


def export_adapter(source: BaseModelSource, adapter_dir: Path, output: Path) -> Path:
    """The LoRA adapter as a GGUF that llama.cpp applies to the base GGUF (``lora_path``)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.tmp")
    _run_converter([sys.executable, str(converter_script("convert_lora_to_gguf.py")), "--base", str(ensure_hf_weights(source)),
                    "--outtype", "f32", "--outfile", str(partial), str(adapter_dir)],
                   "converting the LoRA adapter to GGUF")
    os.replace(partial, output)
    return output
