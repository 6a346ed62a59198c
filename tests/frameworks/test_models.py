"""The model zoo in both frameworks: the same network, proven.

For every model: equal trainable parameter counts at the canonical configuration; equal outputs
after copying PyTorch's weights into Keras; equal training over three SGD-momentum steps and
three Adam steps with BatchNorm in training mode; FLOPs equal to PyTorch's own counter.

Equivalence runs at each model's reduced test shape and width (fwbench.plan.models: test_shape,
test_arch; the same layers), dropout off (the frameworks cannot draw the same masks).

Training is checked twice. In float64 the two frameworks must agree to 1e-6 (SGD) or 1e-3 (Adam
with epsilon 1e-14): float64 removes rounding noise, so this shows that the networks, losses and
update rules are the same. In float32 with the benchmark's own recipe, agreement cannot beat the
model's own float32 rounding noise: the bound is max(tolerance, 3 x the distance between PyTorch
float32 and PyTorch float64 from the same start), with tolerance 1e-4 for SGD and 2e-2 for Adam
(Keras adds epsilon to the uncorrected second moment: its effective epsilon is 32x PyTorch's at
step 1, which changes the step of every weight whose gradient is near 1e-6). Deep BatchNorm
networks at 32x32 (resnet152, mobilenet_v2, efficientnet_b4: 4 values per channel in the last
stage) are chaotic at the recipe's learning rates, so PyTorch disagrees with itself between float32
and float64 by percents, and in float64 the two frameworks drift apart by 1e-3 in three steps;
their checks scale the learning rates down (SGD 1e-4, Adam 1e-2: LR_SCALE), which keeps three
steps in the regime where the comparison means something.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import subprocess
import sys
import warnings
from dataclasses import dataclass, replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from fwbench.measure.frameworks import transfer  # noqa: E402
from fwbench.measure.frameworks.pytorch import models as pm  # noqa: E402
from fwbench.measure.frameworks.tensorflow import models as km  # noqa: E402
from fwbench.plan import models as zoo  # noqa: E402

SEED = 0
BATCH = 4
STEPS = 3
NAMES = list(zoo.MODELS)
# Minutes of CPU on a 2-core machine (resnet18_cifar's training: about 15 s per optimizer, its
# first stage computing at 32x32): `make test-deep` runs them, `make test` leaves them out.
DEEP_MARKS = [pytest.mark.slow, pytest.mark.deep]
DEEP = {"counts": {"resnet152", "vgg16", "deepspeech2", "bert_base"},
        "inference": {"resnet152"},
        "training": {"resnet152", "vgg16", "mobilenet_v2", "efficientnet_b4", "resnet18_cifar"}}
# Deep BatchNorm networks at 32x32 explode at initialisation (gradient norms in the thousands):
# at the recipe's rates three steps are chaotic, so these checks take smaller steps.
# (resnet152's gradient norm is 7.6e5 at 32x32, batch 4.)
LR_SCALE = {(name, optimizer): scale
            for name in ("resnet152", "mobilenet_v2", "efficientnet_b4")
            for optimizer, scale in (("sgd", 1e-4), ("adam", 1e-2))}
LR_SCALE["resnet152", "sgd"] = 1e-6

# torchvision's published counts (3 channels, 1000 classes), independent of our registry.
TORCHVISION = {"resnet18": 11_689_512, "resnet152": 60_192_808, "vgg16": 138_357_544,
               "mobilenet_v2": 3_504_872, "efficientnet_b4": 19_341_616}

F64_TOLERANCE = {"sgd": 1e-6, "adam": 1e-3}
F32_TOLERANCE = {"sgd": 1e-4, "adam": 2e-2}
F64_ADAM_EPSILON = 1e-14  # below every real gradient: Keras's epsilon placement stops mattering
# A tensor whose gradient is this small, relative to the whole gradient, has an analytically zero
# gradient (a BatchNorm shift feeding another BatchNorm, BERT's attention key bias): Adam divides
# its rounding noise by its own size and steps +-lr in a random direction in either framework.
ZERO_GRADIENT = 1e-9


@contextlib.contextmanager
def floatx(dtype: str):
    """Keras layers, losses and optimizers made inside compute in ``dtype``."""
    previous = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx(dtype)
    keras.config.set_dtype_policy(dtype)  # the global policy, cached at first use, wins otherwise
    try:
        yield
    finally:
        keras.config.set_floatx(previous[0])
        keras.config.set_dtype_policy(previous[1])


def _cases(kind):
    return [pytest.param(name, marks=DEEP_MARKS if name in DEEP[kind] else [])
            for name in NAMES]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One PyTorch thread: TensorFlow's pools share the two cores in this process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass
class Pair:
    """One model at its test size: PyTorch's initial weights, Keras in float32 and float64."""

    name: str
    shape: tuple
    classes: int
    arch: dict
    torch_model: object
    keras32: object
    keras64: object  # built on first use
    x: np.ndarray
    y: object


@pytest.fixture(scope="module")
def pairs():
    cache = {}

    def get(name: str) -> Pair:
        if name not in cache:  # kept for the module: resnet152's float64 copy is the largest
            cache[name] = _pair(name)
        return cache[name]
    return get


def _pair(name: str) -> Pair:
    spec = zoo.MODELS[name]
    torch.manual_seed(SEED)
    keras.utils.set_random_seed(SEED)
    arch, classes = zoo.reduced_arch(name), min(spec.canonical_classes, 10)
    model = pm.build_model(name, spec.test_shape, classes, **arch)
    _randomize_batch_norm(model)
    keras32 = km.build_model(name, spec.test_shape, classes, **arch)
    x, y = zoo.synthetic_batch(BATCH, spec.test_shape, classes, SEED, model=name,
                               arch_overrides=arch)
    return Pair(name, spec.test_shape, classes, arch, model, keras32, None, x, y)


def _keras64(p: Pair):
    if p.keras64 is None:
        with floatx("float64"):
            p.keras64 = km.build_model(p.name, p.shape, p.classes, **p.arch)
    return p.keras64


def _randomize_batch_norm(model) -> None:
    """Non-trivial BatchNorm statistics and affine weights, so inference exercises them."""
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


# --- 1. parameter counts -------------------------------------------------------------------------

@pytest.mark.parametrize("name", _cases("counts"))
def test_trainable_parameters_are_equal_at_the_canonical_configuration(name):
    spec = zoo.MODELS[name]
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        torch_model = pm.build_model(name, spec.canonical_shape, spec.canonical_classes)
    keras_model = km.build_model(name, spec.canonical_shape, spec.canonical_classes)
    counts = (pm.trainable_parameters(torch_model), km.trainable_parameters(keras_model))
    assert counts == (spec.parameters, spec.parameters)
    if name in TORCHVISION:
        assert spec.parameters == TORCHVISION[name]
    keras.backend.clear_session()


# --- 2. inference --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _cases("inference"))
def test_inference_outputs_agree_after_copying_weights(pairs, name):
    p = pairs(name)
    assert pm.trainable_parameters(p.torch_model) == km.trainable_parameters(p.keras32)
    transfer.copy_weights(p.torch_model, p.keras32)
    p.torch_model.eval()
    xt, _ = pm.batch_tensors(name, p.x, p.y, "cpu")
    xk, _ = km.batch_tensors(name, p.x, p.y, "/CPU:0")
    with torch.inference_mode():  # the path the benchmark's inference step takes
        expected = p.torch_model(xt).numpy()
    got = p.keras32(xk, training=False).numpy()
    error = transfer.relative_error(got, expected)
    print(f"{name} inference: {error:.1e}")
    assert got.shape == expected.shape
    assert error <= 1e-4


# --- 3. gradients --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _cases("inference"))
def test_gradients_agree_in_float64(pairs, name):
    """One forward and backward pass, BatchNorm in training mode, loss included: the gradients
    are the same function of the weights in both frameworks, whatever the conditioning."""
    p = pairs(name)
    torch_model = copy.deepcopy(p.torch_model).double().train()
    keras_model = _keras64(p)
    transfer.copy_weights(torch_model, keras_model)
    xt, yt = pm.batch_tensors(name, _as64(p.x), p.y, "cpu")
    pm.loss_fn(name)(torch_model(xt), yt).backward()
    with floatx("float64"):
        xk, yk = km.batch_tensors(name, _as64(p.x), p.y, "/CPU:0")
        with tf.GradientTape() as tape:
            loss = km.loss_fn(name)(yk, keras_model(xk, training=True))
        grads = tape.gradient(loss, keras_model.trainable_variables)
    with torch.no_grad():  # PyTorch's gradients in Keras's layouts, through the weight copy
        for param in torch_model.parameters():
            if param.requires_grad:
                param.copy_(param.grad)
    expected = dict((id(v), t) for v, t in transfer.keras_values(torch_model, keras_model))
    got = np.concatenate([np.asarray(g).ravel() for g in grads])
    want = np.concatenate([expected[id(v)].ravel() for v in keras_model.trainable_variables])
    error = transfer.relative_error(got, want)
    print(f"{name} gradients: {error:.1e}")
    # Keras computes CTC in float32 whatever its inputs (tf.nn.ctc_loss has no float64 kernel).
    assert error <= (1e-6 if zoo.MODELS[name].loss == "ctc" else 1e-8)


# --- 4. training ---------------------------------------------------------------------------------

def _train_torch(model, name, recipe, x, y) -> None:
    model.train()
    loss_fn, opt = pm.loss_fn(name), pm.optimizer(model, recipe)
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()


def _train_keras(model, name, recipe, x, y) -> dict:
    """Train; return each variable's largest gradient norm relative to the whole gradient's."""
    loss_fn, opt = km.loss_fn(name), km.optimizer(recipe)
    largest = {}
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        total = float(tf.linalg.global_norm(grads))
        for v, g in zip(model.trainable_variables, grads):
            largest[v.path] = max(largest.get(v.path, 0.0), float(tf.norm(g)) / total)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return largest


def _as64(a):
    return a.astype(np.float64) if a.dtype == np.float32 else a


def _training_run(p: Pair, recipe: dict, precision: str):
    """(PyTorch model, Keras model, Keras's relative gradient norms) after STEPS steps from the
    same start, in ``precision``."""
    torch_model = copy.deepcopy(p.torch_model)
    x = p.x
    keras_model = p.keras32
    if precision == "float64":
        torch_model, x, keras_model = torch_model.double(), _as64(p.x), _keras64(p)
    transfer.copy_weights(torch_model, keras_model)
    xt, yt = pm.batch_tensors(p.name, x, p.y, "cpu")
    with floatx(precision):
        xk, yk = km.batch_tensors(p.name, x, p.y, "/CPU:0")
        _train_torch(torch_model, p.name, recipe, xt, yt)
        grads = _train_keras(keras_model, p.name, recipe, xk, yk)
    return torch_model, keras_model, grads


def _torch_params(torch_model, keras_model, exclude=()) -> np.ndarray:
    pairs = [(v, t) for v, t in transfer.keras_values(torch_model, keras_model)
             if v.trainable and v.path not in exclude]
    return np.concatenate([np.asarray(t, np.float64).ravel() for _, t in pairs])


# SGD trains these deep networks at 1e-4 to 1e-6 of the recipe's rate (LR_SCALE): three steps
# barely move the weights, so their check would repeat test_gradients_agree_in_float64 (the
# same gradients) and the SGD update every other model checks. Adam's normalised steps do move
# them; it alone runs for them (each check takes a minute of CPU).
SGD_SHOWN_ELSEWHERE = {"resnet152", "efficientnet_b4"}


def _training_cases():
    for name in NAMES:
        for optimizer in zoo.OPTIMIZERS:
            if optimizer == "sgd" and name in SGD_SHOWN_ELSEWHERE:
                continue
            marks = DEEP_MARKS if name in DEEP["training"] else []
            yield pytest.param(name, optimizer, marks=marks, id=f"{name}-{optimizer}")


@pytest.mark.parametrize(("name", "optimizer"), _training_cases())
def test_training_agrees_over_three_steps(pairs, name, optimizer):
    p = pairs(name)
    recipe = dict(zoo.OPTIMIZERS[optimizer])
    recipe["learning_rate"] *= LR_SCALE.get((name, optimizer), 1.0)

    # float64: the frameworks compute the same training, up to float64 rounding.
    exact = {**recipe, "epsilon": F64_ADAM_EPSILON} if optimizer == "adam" else recipe
    torch64, keras64, grads = _training_run(p, exact, "float64")
    noise = {path for path, g in grads.items() if g < ZERO_GRADIENT and optimizer == "adam"}
    error64 = transfer.compare(torch64, keras64, exclude=noise)["relative_error"]

    # float32, the benchmark's recipe: PyTorch's own float32 rounding bounds what can agree.
    torch32, keras32, _ = _training_run(p, recipe, "float32")
    reference = copy.deepcopy(p.torch_model).double()
    _train_torch(reference, name, recipe, *pm.batch_tensors(name, _as64(p.x), p.y, "cpu"))
    error32 = transfer.compare(torch32, keras32)["relative_error"]
    floor = transfer.relative_error(_torch_params(torch32, keras32),
                                    _torch_params(reference, keras32))

    print(f"{name} {optimizer}: float64 {error64:.1e}, float32 {error32:.1e} "
          f"(PyTorch float32 vs float64 {floor:.1e}); zero-gradient tensors left out: {len(noise)}")
    assert error64 <= F64_TOLERANCE[optimizer], (error64, sorted(noise))
    assert error32 <= max(F32_TOLERANCE[optimizer], 3 * floor), (error32, floor)


def test_adam_differs_only_by_where_epsilon_is_added(pairs):
    """lenet5 has no analytically zero gradients: with PyTorch's default epsilon the frameworks
    part visibly; with epsilon below every gradient they agree to rounding."""
    p = pairs("lenet5")
    recipe = zoo.OPTIMIZERS["adam"]
    apart = transfer.compare(*_training_run(p, recipe, "float64")[:2])["relative_error"]
    tiny = transfer.compare(*_training_run(p, {**recipe, "epsilon": 1e-14}, "float64")[:2])
    assert apart > 1e-5
    assert tiny["relative_error"] < 1e-6


def test_embedding_gradients_are_dense_so_adam_agrees_on_repeated_tokens():
    tokens = np.array([[1, 1, 2, 3]])
    weights = np.random.default_rng(SEED).standard_normal((5, 3)).astype(np.float32)
    recipe = {**zoo.OPTIMIZERS["adam"], "learning_rate": 0.1}
    pt = torch.nn.Embedding(5, 3)
    with torch.no_grad():
        pt.weight.copy_(torch.from_numpy(weights))
    opt = pm.optimizer(pt, recipe)
    pt(torch.from_numpy(tokens)).square().sum().backward()
    opt.step()
    layer = km.Embedding(5, 3)
    layer.build((None, 4))
    layer.embeddings.assign(weights)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(layer(tf.constant(tokens))))
    grads = tape.gradient(loss, layer.trainable_variables)
    assert not isinstance(grads[0], tf.IndexedSlices)
    km.optimizer(recipe).apply_gradients(zip(grads, layer.trainable_variables))
    # Keras's own Embedding would move token 1 by 1.41 x lr instead of lr here.
    assert np.abs(layer.embeddings.numpy() - pt.weight.detach().numpy()).max() < 1e-5


# --- 5. weight transfer refuses a different network ----------------------------------------------

def test_copying_into_another_network_is_an_error():
    torch_model = pm.build_model("lenet5", (1, 28, 28), 10)
    other = km.build_model("lenet5", (1, 28, 28), 12)
    with pytest.raises(transfer.TransferError, match="fc3"):
        transfer.copy_weights(torch_model, other)
    wider = km.build_model("vgg16", (3, 32, 32), 10, classifier=32)
    with pytest.raises(transfer.TransferError, match="no layer named 'conv1'"):
        transfer.copy_weights(torch_model, wider)


# --- 6. FLOPs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_flops_equal_pytorchs_own_counter(name):
    """PyTorch's FlopCounterMode counts 2 FLOPs per multiply-add in matmuls and convolutions, as
    FLOP_CONVENTION does; attention runs in its math form and the LSTM without oneDNN so that
    every product is visible to it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    spec = zoo.MODELS[name]
    arch, classes = zoo.reduced_arch(name), min(spec.canonical_classes, 10)
    model = pm.build_model(name, spec.test_shape, classes, **arch).train()
    x, y = zoo.synthetic_batch(2, spec.test_shape, classes, SEED, model=name, arch_overrides=arch)
    xt, _ = pm.batch_tensors(name, x, y, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # oneDNN's TF32 note when toggling it
        with (torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH),
              FlopCounterMode(display=False) as counter):
            model(xt)
    expected = zoo.flops_per_sample(name, spec.test_shape, classes, **arch)
    assert counter.get_total_flops() == 2 * expected
    assert zoo.flops_per_sample(name, spec.test_shape, classes, "train", **arch) == 3 * expected


# --- 7. the backends run every kind of input -----------------------------------------------------

@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
@pytest.mark.parametrize("name", ["deepspeech2", "bert_base", "lstm_lm"])
def test_backends_train_and_infer_speech_and_language_models(monkeypatch, framework, name):
    from fwbench.measure.frameworks import get_backend
    from fwbench.plan.cells import Cell

    spec = zoo.MODELS[name]
    monkeypatch.setitem(zoo.MODELS, name, replace(spec, arch=zoo.arch(name, **spec.test_arch)))
    # Thread pools are sized once per process, and this process has already started them.
    for module, setter in ((torch, "set_num_threads"), (torch, "set_num_interop_threads"),
                           (tf.config.threading, "set_intra_op_parallelism_threads"),
                           (tf.config.threading, "set_inter_op_parallelism_threads")):
        monkeypatch.setattr(module, setter, lambda n: None)
    # Keras's own loop (compile, train_on_batch) takes the CTC targets as one array too.
    keras_loop = framework == "tensorflow" and name == "deepspeech2"
    modes = ("idiomatic", "keras") if keras_loop else ("idiomatic",)
    for mode, phase in itertools.product(modes, ("train", "infer")):
        cell = Cell(experiment="throughput", device="cpu", framework=framework, model=name,
                    phase=phase, batch_size=2, input_shape=spec.test_shape, precision="fp32",
                    mode=mode, profile="matched", num_classes=min(spec.canonical_classes, 10))
        backend = get_backend(framework)(cell, threads=1, seed=SEED)
        backend.configure()
        backend.load()
        step = backend.step()
        for _ in range(2):
            out = step()
        backend.synchronize()
        value = out.detach().numpy() if isinstance(out, torch.Tensor) else out
        assert np.isfinite(np.asarray(value, dtype=np.float64)).all()


# --- 8. a PyTorch trial imports only what its model and phase need ------------------------------

def test_a_pytorch_lenet5_inference_trial_imports_neither_torchvision_nor_dynamo():
    """torchvision's import costs a trial process about a second, most of it torch._dynamo, which
    building a torch.optim optimizer imports too: lenet5 needs no torchvision and inference no
    optimizer. A fresh process: this one has both loaded."""
    code = (
        "import sys\n"
        "from fwbench.plan.cells import Cell\n"
        "from fwbench.measure.frameworks import get_backend\n"
        "cell = Cell(experiment='throughput', device='cpu', framework='pytorch', model='lenet5', "
        "phase='infer', batch_size=2, input_shape=(1, 28, 28), precision='fp32', "
        "mode='idiomatic', profile='matched', num_classes=10)\n"
        "backend = get_backend('pytorch')(cell, threads=1, seed=0)\n"
        "backend.configure()\n"
        "backend.load()\n"
        "backend.step()()\n"
        "print([m for m in ('torchvision', 'torch._dynamo') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- 9. keras.applications: the differences recorded are real ------------------------------------

@pytest.mark.slow
@pytest.mark.deep
def test_keras_applications_differ_as_recorded():
    apps = keras.applications
    resnet152 = apps.ResNet152(weights=None)
    assert km.trainable_parameters(resnet152) == 60_268_520  # convolution biases
    assert resnet152.layers[-1].get_config()["activation"] == "softmax"
    strided = [l.name for l in resnet152.layers
               if isinstance(l, keras.layers.Conv2D) and l.strides == (2, 2)]
    assert "conv3_block1_1_conv" in strided  # v1: the stride sits on the first 1x1
    vgg = apps.VGG16(weights=None, input_shape=(64, 64, 3), include_top=True)
    assert km.trainable_parameters(vgg) != zoo.MODELS["vgg16"].parameters  # it flattens
    assert km.trainable_parameters(apps.MobileNetV2(weights=None)) == 3_504_872
    effnet = apps.EfficientNetB4(weights=None)
    assert km.trainable_parameters(effnet) == 19_341_616
    assert [type(l).__name__ for l in effnet.layers[1:3]] == ["Rescaling", "Normalization"]
    with pytest.raises(ValueError, match="at least 32x32"):
        apps.ResNet50(weights=None, include_top=False, input_shape=(16, 16, 3))
    keras.backend.clear_session()
