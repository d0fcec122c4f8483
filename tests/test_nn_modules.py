"""nn modules and losses: parameter counts, shapes, outputs and losses checked by hand,
against numpy, or against PyTorch (float64)."""

import math

import numpy as np
import pytest

from autodiff_lab import Tensor, Value, nn


def test_micrograd_demo_mlp_has_337_parameters():
    model = nn.MLP(2, [16, 16, 1], rng=0)
    # (2*16 + 16) + (16*16 + 16) + (16*1 + 1)
    assert len(model.parameters()) == 337 == model.num_parameters()
    assert all(isinstance(p, Value) for p in model.parameters())
    assert [len(layer.neurons) for layer in model.layers] == [16, 16, 1]
    assert [n.nonlin for n in model.layers[-1].neurons] == [False]
    assert all(n.nonlin for n in model.layers[0].neurons)


def test_named_parameters_are_unique_and_ordered():
    model = nn.MLP(3, [4, 2], rng=0)
    names = [name for name, _ in model.named_parameters()]
    assert len(set(names)) == len(names) == 3 * 4 + 4 + 4 * 2 + 2
    assert names[:4] == ["layers.0.neurons.0.w.0", "layers.0.neurons.0.w.1",
                         "layers.0.neurons.0.w.2", "layers.0.neurons.0.b"]  # fmt: skip
    assert names[-1] == "layers.1.neurons.1.b"


def test_neuron_computes_relu_of_weighted_sum():
    neuron = nn.Neuron(3, rng=1)
    w = [p.data for p in neuron.w]
    neuron.b.data = 0.25
    x = [0.5, -1.0, 2.0]
    expected = max(0.0, sum(wi * xi for wi, xi in zip(w, x)) + 0.25)
    assert neuron(x).data == pytest.approx(expected, abs=1e-15)
    linear = nn.Neuron(3, nonlin=False, rng=1)
    assert linear(x).data == pytest.approx(sum(wi * xi for wi, xi in zip(w, x)), abs=1e-15)
    assert all(-1 <= wi <= 1 for wi in w) and nn.Neuron(3).b.data == 0.0


def test_scalar_mlp_same_seed_same_model_and_single_output():
    a, b, c = nn.MLP(2, [4, 1], rng=5), nn.MLP(2, [4, 1], rng=5), nn.MLP(2, [4, 1], rng=6)
    assert [p.data for p in a.parameters()] == [p.data for p in b.parameters()]
    assert [p.data for p in a.parameters()] != [p.data for p in c.parameters()]
    out = a([0.1, 0.2])
    assert isinstance(out, Value)  # one output neuron: a Value, not a list (micrograd)
    assert isinstance(nn.MLP(2, [4, 3], rng=0)([0.1, 0.2]), list)


def test_scalar_mlp_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    model = nn.MLP(3, [5, 2], activation="tanh", rng=3)
    x = [0.3, -0.7, 1.1]
    out = model(x)
    (out[0] * out[1] + out[0]).backward()

    # the same network in torch, weights copied neuron by neuron
    def leaf(values):
        return torch.tensor(values, dtype=torch.float64, requires_grad=True)

    w1 = leaf([[p.data for p in n.w] for n in model.layers[0].neurons])
    b1 = leaf([n.b.data for n in model.layers[0].neurons])
    w2 = leaf([[p.data for p in n.w] for n in model.layers[1].neurons])
    b2 = leaf([n.b.data for n in model.layers[1].neurons])
    h = torch.tanh(w1 @ torch.tensor(x, dtype=torch.float64) + b1)
    o = w2 @ h + b2
    (o[0] * o[1] + o[0]).backward()
    ours_w1 = [[p.grad for p in n.w] for n in model.layers[0].neurons]
    np.testing.assert_allclose(ours_w1, w1.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        [n.b.grad for n in model.layers[1].neurons], b2.grad.numpy(), rtol=1e-12
    )


def test_zero_grad_resets_every_parameter():
    model = nn.MLP(2, [3, 1], rng=0)
    model([1.0, -2.0]).backward()
    assert any(p.grad != 0 for p in model.parameters())
    model.zero_grad()
    assert all(p.grad == 0.0 for p in model.parameters())
    tmodel = nn.TensorMLP(2, [3, 2], rng=0)
    tmodel(Tensor(np.ones((4, 2)))).sum().backward()
    assert all(p.grad is not None for p in tmodel.parameters())
    tmodel.zero_grad()
    assert all(p.grad is None for p in tmodel.parameters())


def test_linear_shapes_and_forward_match_numpy():
    layer = nn.Linear(4, 3, rng=0)
    assert layer.W.shape == (4, 3) and layer.b.shape == (3,)
    assert layer.W.requires_grad and layer.b.requires_grad
    layer.b.data[:] = [0.1, 0.2, 0.3]
    x = np.arange(8.0).reshape(2, 4)
    np.testing.assert_allclose(layer(x).data, x @ layer.W.data + [0.1, 0.2, 0.3], rtol=1e-15)
    with pytest.raises(ValueError, match=r"Linear: input has shape \(2, 5\).*must be 4"):
        layer(np.ones((2, 5)))
    assert nn.Linear(4, 3, dtype=np.float32).W.dtype == np.float32


def test_tensor_mlp_structure_and_counts():
    model = nn.TensorMLP(64, [128, 10], rng=0)
    assert [type(m).__name__ for m in model.layers] == ["Linear", "ReLU", "Linear"]
    assert model.num_parameters() == 64 * 128 + 128 + 128 * 10 + 10
    assert [n for n, _ in model.named_parameters()] == [
        "layers.0.W", "layers.0.b", "layers.2.W", "layers.2.b"]  # fmt: skip
    assert model(np.zeros((5, 64))).shape == (5, 10)
    tanh_model = nn.TensorMLP(2, [8, 1], activation="tanh", rng=0)
    assert isinstance(tanh_model[1], nn.Tanh)


@pytest.mark.parametrize("init,expected_std", [
    ("kaiming", math.sqrt(2 / 400)),
    ("xavier", math.sqrt(6 / 700) / math.sqrt(3)),  # std of U(-a, a) is a / sqrt(3)
    ("uniform", 1 / math.sqrt(400) / math.sqrt(3)),
])  # fmt: skip
def test_initialisation_scale(init, expected_std):
    w = nn.init_weights(400, 300, init=init, rng=0)
    assert w.shape == (400, 300)
    assert abs(w.mean()) < 0.05 * expected_std * 10
    assert w.std() == pytest.approx(expected_std, rel=0.02)
    np.testing.assert_array_equal(w, nn.init_weights(400, 300, init=init, rng=0))


def test_bad_init_and_activation_are_named():
    with pytest.raises(ValueError, match="init_weights: init must be"):
        nn.init_weights(2, 2, init="he")
    with pytest.raises(ValueError, match="TensorMLP: activation must be one of"):
        nn.TensorMLP(2, [3], activation="gelu")
    with pytest.raises(ValueError, match="Neuron: expected 2 inputs, got 3"):
        nn.Neuron(2)([1.0, 2.0, 3.0])


def test_mse_on_both_engines():
    preds, targets = [0.5, -1.0, 2.0], [1.0, 0.0, 2.5]
    expected = np.mean((np.array(preds) - targets) ** 2)
    assert nn.mse([Value(p) for p in preds], targets).data == pytest.approx(expected)
    t = Tensor(np.array(preds), requires_grad=True)
    loss = nn.mse(t, targets)
    loss.backward()
    assert loss.item() == pytest.approx(expected)
    np.testing.assert_allclose(t.grad, 2 * (np.array(preds) - targets) / 3)


def test_cross_entropy_scalar_and_tensor_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits, targets = rng.normal(size=(4, 3)) * 5, np.array([0, 2, 1, 2])
    z = torch.tensor(logits, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(z, torch.tensor(targets))
    ref.backward()
    rows = [[Value(v) for v in row] for row in logits]
    scalar = nn.cross_entropy(rows, targets)
    scalar.backward()
    assert scalar.data == pytest.approx(ref.item(), rel=1e-12)
    np.testing.assert_allclose([[v.grad for v in r] for r in rows], z.grad.numpy(), atol=1e-14)
    tensor = nn.cross_entropy(Tensor(logits), targets)
    assert tensor.item() == pytest.approx(ref.item(), rel=1e-12)


def test_svm_hinge_is_micrograds_max_margin_loss():
    scores, labels = [2.0, 0.3, -0.5, 0.8], [1, 1, -1, -1]
    margins = [max(0, 1 - y * s) for s, y in zip(scores, labels)]  # 0, 0.7, 0.5, 1.8
    params = [Value(0.5), Value(-2.0)]
    expected = np.mean(margins) + 1e-3 * (0.25 + 4.0)
    got = nn.svm_hinge([Value(s) for s in scores], labels, params, alpha=1e-3)
    assert got.data == pytest.approx(expected, rel=1e-14)
    got.backward()
    assert params[1].grad == pytest.approx(2 * 1e-3 * -2.0)
    tensor = nn.svm_hinge(Tensor(np.array(scores)), labels)
    assert tensor.item() == pytest.approx(np.mean(margins))
    with pytest.raises(ValueError, match="svm_hinge: labels must be -1 or \\+1"):
        nn.svm_hinge([Value(1.0)], [0])
