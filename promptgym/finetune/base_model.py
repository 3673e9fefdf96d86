"""The base model of a weight flow, as transformers objects, from our GGUF packages or a Hugging Face folder.

    source = resolve_base_model("local/smollm2-135m-instruct")
    model, tokenizer = load_base_model(source)

A ``local/...`` model is dequantised from its GGUF once and kept, as plain safetensors, under
``<models dir>/hf/`` (keyed by the GGUF's sha256): later runs load that folder in a fraction of a
second instead of dequantising again. Nothing is fetched from a hub and no code from a model
folder runs (``trust_remote_code`` stays off).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

from rich.progress import track

from promptgym.finetune.device import DevicePlan
from promptgym.lm.cache import models_dir
from promptgym.lm.local_models import LOCAL_MODELS, ensure_local_model
from promptgym.lm.model_string import parse_model_string

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers must never reach for a hub
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def quiet_transformers() -> None:
    """No progress bars or advice on stdout: the run's own events say what happens."""
    import transformers  # deferred: heavy, loaded when a job runs

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


GGUF_MAGIC = b"GGUF"


class BaseModelError(ValueError):
    """A base model that can't be found or used; the message says what was expected."""


@dataclass(frozen=True)
class BaseModelSource:
    """Where a base model's weights come from.

    ``name`` is what the user wrote; ``gguf`` is set for GGUF-backed models (the file llama.cpp runs and
    a LoRA adapter GGUF applies to); ``hf_dir`` is the Hugging Face folder transformers loads (for a GGUF,
    the cached dequantised copy, made by :func:`ensure_hf_weights`).
    """

    name: str
    gguf: Path | None
    hf_dir: Path
    fingerprint: str


def _gguf_fingerprint(path: Path, sha256: str | None) -> str:
    if sha256:
        return sha256[:16]
    stat = path.stat()
    return f"{stat.st_size:x}-{stat.st_mtime_ns:x}"


def resolve_base_model(name: str) -> BaseModelSource:
    """``local/<embedded model>``, a ``.gguf`` file, or a Hugging Face format folder (with ``config.json``)."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise BaseModelError(f"base_model {name!r}: folder has no config.json (expected a Hugging Face format model)")
        _check_hf_config(name, path / "config.json")
        return BaseModelSource(name=name, gguf=None, hf_dir=path.resolve(), fingerprint="")
    if path.suffix == ".gguf" and path.is_file():
        with path.open("rb") as handle:
            magic = handle.read(4)
        if magic != GGUF_MAGIC:
            raise BaseModelError(f"base_model {name!r}: not a GGUF file (it starts with {magic!r}, a GGUF file with "
                                 f"{GGUF_MAGIC!r}); give a llama.cpp model file, local/<name> or a Hugging Face folder")
        fingerprint = _gguf_fingerprint(path, None)
        return BaseModelSource(name=name, gguf=path.resolve(), hf_dir=hf_cache_dir(path.stem, fingerprint),
                               fingerprint=fingerprint)
    parsed = parse_model_string(name) if "/" in name else None
    if parsed is None or parsed.provider != "local":
        raise BaseModelError(f"base_model {name!r}: expected local/<name> (one of: "
                             f"{', '.join(sorted(LOCAL_MODELS))}), a .gguf file, or a Hugging Face format folder")
    if parsed.name not in LOCAL_MODELS:
        raise BaseModelError(f"base_model {name!r}: unknown local model; the embedded ones are "
                             f"{', '.join(sorted(LOCAL_MODELS))} (fine-tuned models can't be a base yet)")
    spec = LOCAL_MODELS[parsed.name]
    gguf = ensure_local_model(parsed.name)
    fingerprint = _gguf_fingerprint(gguf, spec.sha256)
    return BaseModelSource(name=name, gguf=gguf, hf_dir=hf_cache_dir(parsed.name, fingerprint), fingerprint=fingerprint)


def _check_hf_config(name: str, config: Path) -> None:
    """A Hugging Face folder's config.json must be a JSON object naming its ``model_type`` (transformers needs it)."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BaseModelError(f"base_model {name!r}: {config} can't be read as JSON ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise BaseModelError(f"base_model {name!r}: {config} names no model_type (e.g. \"llama\"); expected the "
                             "config.json of a Hugging Face format causal LM")


@contextlib.contextmanager
def gguf_progress(source: BaseModelSource) -> Iterator[None]:
    """While a GGUF is dequantised, promptgym's own one-line progress instead of transformers' tqdm bar (which
    ignores ``disable_progress_bar``)."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils  # heavy: only when a GGUF is converted

    label = f"converting {source.gguf.name if source.gguf else source.name} to float32, once (kept for later runs)"

    def progress(iterable: Any, *args: Any, **kwargs: Any) -> Any:
        return track(iterable, description=label, transient=True)

    with mock.patch.object(gguf_utils, "tqdm", progress):
        yield


def hf_cache_dir(stem: str, fingerprint: str) -> Path:
    return models_dir() / "hf" / f"{stem}-{fingerprint}"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """One process derives a cache entry; the others wait and then reuse it."""
    # resolve first: a cache folder that links to a place not made yet is made there, not refused as "exists"
    path.parent.resolve().mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _complete(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def ensure_hf_weights(source: BaseModelSource) -> Path:
    """The Hugging Face folder of ``source``, dequantising its GGUF the first time (atomically, under a lock)."""
    if source.gguf is None or _complete(source.hf_dir):
        return source.hf_dir
    with _file_lock(source.hf_dir.with_name(source.hf_dir.name + ".lock")):
        if _complete(source.hf_dir):
            return source.hf_dir
        import torch  # deferred: heavy, loaded when a job runs
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        folder, file_name = str(source.gguf.parent), source.gguf.name
        with gguf_progress(source):
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file_name)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file_name, dtype=torch.float32)
        # A model loaded from GGUF remembers its quantizer and refuses save_pretrained; its weights are
        # already plain float32 tensors, so forgetting the quantizer is safe.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        staging = Path(tempfile.mkdtemp(prefix=f".{source.hf_dir.name}.", dir=source.hf_dir.parent))
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            if source.hf_dir.exists():
                shutil.rmtree(source.hf_dir)
            os.replace(staging, source.hf_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return source.hf_dir


def load_tokenizer(source: BaseModelSource) -> Any:
    from transformers import AutoTokenizer  # deferred: heavy, loaded when a job runs

    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(str(ensure_hf_weights(source)), local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_base_model(source: BaseModelSource, gradient_checkpointing: bool = False,
                    plan: DevicePlan | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` ready for LoRA: in the plan's format on its device (default: float32 on the CPU).

    With ``gradient_checkpointing`` each decoder layer keeps only its input for the backward pass and
    recomputes the rest (the non-reentrant kind, which needs no gradient on the frozen embeddings).
    """
    import torch  # deferred: heavy, loaded when a job runs
    from transformers import AutoModelForCausalLM

    folder = ensure_hf_weights(source)
    dtype = plan.weight_dtype if plan is not None else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
    if plan is not None and plan.is_cuda:
        plan.prepare_torch()
        model = model.to(plan.device)
    model.config.use_cache = False  # training never decodes; the KV cache would only cost memory
    if gradient_checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    return model, load_tokenizer(source)
