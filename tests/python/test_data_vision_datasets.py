"""MNIST, FashionMNIST, CIFAR10 and CIFAR100 read small files fabricated in their exact
distribution formats: lengths, images (HWC uint8), labels (int32), train/test files,
transform_first and DataLoader batches; missing, truncated and corrupt files raise errors that
name them."""
import gzip
import os
import struct

import numpy as onp
import pytest

import pymx
from pymx.gluon.data import DataLoader
from pymx.gluon.data.vision import CIFAR10, CIFAR100, MNIST, FashionMNIST

MNIST_FILES = {True: ('train-images-idx3-ubyte', 'train-labels-idx1-ubyte'),
               False: ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')}


def _idx_bytes(array):
    """The idx encoding of a uint8 array: 0x0000, type 0x08, ndim, big-endian dims, data."""
    return struct.pack(f'>HBB{array.ndim}I', 0, 0x08, array.ndim, *array.shape) + \
        array.tobytes()


def _write(path, content, compress):
    with (gzip.open(path + '.gz', 'wb') if compress else open(path, 'wb')) as f:
        f.write(content)


def _write_mnist(root, train, num, compress=True, seed=0):
    rng = onp.random.default_rng(seed)
    images = rng.integers(0, 256, (num, 28, 28), dtype=onp.uint8)
    labels = rng.integers(0, 10, num, dtype=onp.uint8)
    images_name, labels_name = MNIST_FILES[train]
    _write(os.path.join(root, images_name), _idx_bytes(images), compress)
    _write(os.path.join(root, labels_name), _idx_bytes(labels), compress)
    return images, labels


def _check_samples(dataset, images, labels):
    assert len(dataset) == len(labels)
    for i in (0, len(labels) - 1):
        image, label = dataset[i]
        assert isinstance(image, pymx.np.ndarray) and image.dtype == onp.uint8
        assert image.device == pymx.cpu()
        onp.testing.assert_array_equal(image.asnumpy(), images[i])
        assert type(label) is onp.int32 and label == labels[i]


@pytest.mark.parametrize('dataset_class', [MNIST, FashionMNIST])
def test_mnist_train_and_test_files(tmp_path, dataset_class):
    root = str(tmp_path)
    train_images, train_labels = _write_mnist(root, True, 5, seed=1)
    test_images, test_labels = _write_mnist(root, False, 3, seed=2)
    train = dataset_class(root=root)
    _check_samples(train, train_images[:, :, :, None], train_labels)
    assert train[0][0].shape == (28, 28, 1)
    _check_samples(dataset_class(root=root, train=False), test_images[:, :, :, None],
                   test_labels)


def test_mnist_uncompressed_files_and_home_expansion(tmp_path, monkeypatch):
    images, labels = _write_mnist(str(tmp_path), True, 4, compress=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    _check_samples(MNIST(root=os.path.join('~', '')), images[:, :, :, None], labels)


def test_transform_first_and_data_loader(tmp_path):
    images, labels = _write_mnist(str(tmp_path), True, 5)
    dataset = MNIST(root=str(tmp_path)).transform_first(lambda image: image.astype('float32') / 255)
    image, label = dataset[2]
    assert image.dtype == onp.float32
    onp.testing.assert_allclose(image.asnumpy(), images[2, :, :, None] / 255, rtol=1e-6)
    assert label == labels[2]
    batches = list(DataLoader(dataset, batch_size=2))
    assert [b[0].shape for b in batches] == [(2, 28, 28, 1), (2, 28, 28, 1), (1, 28, 28, 1)]
    onp.testing.assert_array_equal(onp.concatenate([b[1].asnumpy() for b in batches]), labels)
    with pytest.raises(DeprecationWarning, match="transform_first"):
        MNIST(root=str(tmp_path), transform=lambda data, label: (data, label))


def test_mnist_missing_files(tmp_path):
    _write_mnist(str(tmp_path), True, 2)
    os.remove(tmp_path / 'train-labels-idx1-ubyte.gz')
    with pytest.raises(FileNotFoundError,
                       match=r"MNIST: missing train-labels-idx1-ubyte\.gz in .*does not download"):
        MNIST(root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"FashionMNIST: missing t10k-images-idx3-ubyte"
                                                r"\.gz, t10k-labels-idx1-ubyte\.gz .*zalando"):
        FashionMNIST(root=str(tmp_path), train=False)
    assert not os.path.exists(tmp_path / 'absent')
    with pytest.raises(FileNotFoundError):
        MNIST(root=str(tmp_path / 'absent'))
    assert not os.path.exists(tmp_path / 'absent')  # nothing is created


def test_mnist_truncated_and_corrupt_files(tmp_path):
    root = str(tmp_path)
    images = onp.zeros((3, 28, 28), onp.uint8)
    labels = onp.arange(3, dtype=onp.uint8)
    images_path = os.path.join(root, 'train-images-idx3-ubyte')
    labels_path = os.path.join(root, 'train-labels-idx1-ubyte')
    _write(labels_path, _idx_bytes(labels), True)

    _write(images_path, _idx_bytes(images)[:-5], True)
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz is truncated or corrupt: "
                                         r"its header gives shape \(3, 28, 28\), 2352 bytes of "
                                         r"data, but it holds 2347"):
        MNIST(root=root)
    _write(images_path, _idx_bytes(images)[:10], True)
    with pytest.raises(ValueError, match="truncated: 10 bytes, shorter than the 16-byte idx"):
        MNIST(root=root)
    _write(images_path, _idx_bytes(labels), True)  # a label file in the image file's place
    with pytest.raises(ValueError, match=r"not an idx file of unsigned bytes with 3 dimensions: "
                                         r"its magic number is 0x00000801 \(expected "
                                         r"0x00000803\)"):
        MNIST(root=root)
    _write(images_path, _idx_bytes(images[:2]), True)
    with pytest.raises(ValueError, match=r"holds 2 images but .*train-labels-idx1-ubyte\.gz "
                                         r"holds 3 labels"):
        MNIST(root=root)
    compressed = gzip.compress(_idx_bytes(images))
    with open(images_path + '.gz', 'wb') as f:
        f.write(compressed[:len(compressed) // 2])  # a gzip stream cut short
    with pytest.raises(ValueError, match=r"Cannot read .*train-images-idx3-ubyte\.gz"):
        MNIST(root=root)
    with open(images_path + '.gz', 'wb') as f:
        f.write(b'not gzip at all')
    with pytest.raises(ValueError, match=r"Cannot read .*train-images-idx3-ubyte\.gz"):
        MNIST(root=root)


def _cifar_records(num, label_columns, seed):
    """`num` random records: label bytes (one column per (num_classes,)) then a 3x32x32
    channel-major image. Returns (file bytes, HWC images, label columns)."""
    rng = onp.random.default_rng(seed)
    labels = [rng.integers(0, n, num, dtype=onp.uint8) for n in label_columns]
    chw = rng.integers(0, 256, (num, 3, 32, 32), dtype=onp.uint8)
    records = onp.concatenate([onp.stack(labels, axis=1), chw.reshape(num, -1)], axis=1)
    return records.tobytes(), chw.transpose(0, 2, 3, 1), labels


def _write_cifar10(directory, seed=0):
    os.makedirs(directory, exist_ok=True)
    train_images, train_labels = [], []
    for i in range(1, 6):
        content, images, (labels,) = _cifar_records(i % 3 + 1, (10,), seed + i)
        with open(os.path.join(directory, f'data_batch_{i}.bin'), 'wb') as f:
            f.write(content)
        train_images.append(images)
        train_labels.append(labels)
    content, test_images, (test_labels,) = _cifar_records(3, (10,), seed)
    with open(os.path.join(directory, 'test_batch.bin'), 'wb') as f:
        f.write(content)
    return (onp.concatenate(train_images), onp.concatenate(train_labels),
            test_images, test_labels)


@pytest.mark.parametrize('subdirectory', ['', 'cifar-10-batches-bin'])
def test_cifar10_train_and_test_files(tmp_path, subdirectory):
    train_images, train_labels, test_images, test_labels = _write_cifar10(
        os.path.join(str(tmp_path), subdirectory))
    train = CIFAR10(root=str(tmp_path))
    assert len(train) == 2 + 3 + 1 + 2 + 3  # batches 1-5 hold 2, 3, 1, 2, 3 records
    _check_samples(train, train_images, train_labels)
    # channel-major records become HWC: pixel (h, w) of channel c is byte 1 + c*1024 + h*32 + w
    image = train[4][0].asnumpy()
    with open(os.path.join(str(tmp_path), subdirectory, 'data_batch_2.bin'), 'rb') as f:
        record = onp.frombuffer(f.read(), onp.uint8)[3073 * 2:3073 * 3]  # batch 2, record 2
    assert image.shape == (32, 32, 3)
    assert image[5, 7, 2] == record[1 + 2 * 1024 + 5 * 32 + 7]
    _check_samples(CIFAR10(root=str(tmp_path), train=False), test_images, test_labels)


@pytest.mark.parametrize('subdirectory', ['', 'cifar-100-binary'])
def test_cifar100_coarse_and_fine_labels(tmp_path, subdirectory):
    directory = os.path.join(str(tmp_path), subdirectory)
    os.makedirs(directory, exist_ok=True)
    files = {}
    for name, num, seed in (('train.bin', 4, 1), ('test.bin', 2, 2)):
        content, images, labels = _cifar_records(num, (20, 100), seed)
        with open(os.path.join(directory, name), 'wb') as f:
            f.write(content)
        files[name] = images, labels
    images, (coarse, fine) = files['train.bin']
    _check_samples(CIFAR100(root=str(tmp_path)), images, coarse)
    _check_samples(CIFAR100(root=str(tmp_path), fine_label=True), images, fine)
    images, (coarse, fine) = files['test.bin']
    _check_samples(CIFAR100(str(tmp_path), True, False), images, fine)  # MXNet's positions


def test_cifar_missing_truncated_and_corrupt_files(tmp_path):
    root = str(tmp_path)
    _write_cifar10(root)
    os.remove(tmp_path / 'data_batch_3.bin')
    os.remove(tmp_path / 'data_batch_5.bin')
    with pytest.raises(FileNotFoundError, match=r"CIFAR10: missing data_batch_3\.bin, "
                                                r"data_batch_5\.bin in .* or .*cifar-10-batches-"
                                                r"bin\. pymx does not download.*kriz"):
        CIFAR10(root=root)
    with pytest.raises(FileNotFoundError, match=r"CIFAR100: missing test\.bin"):
        CIFAR100(root=root, train=False)

    with open(tmp_path / 'test_batch.bin', 'rb+') as f:
        f.truncate(3073 * 2 + 100)
    with pytest.raises(ValueError, match=r"test_batch\.bin is truncated or corrupt: 6246 bytes "
                                         r"is not a positive multiple of the 3073-byte record"):
        CIFAR10(root=root, train=False)
    open(tmp_path / 'test_batch.bin', 'wb').close()
    with pytest.raises(ValueError, match="0 bytes is not a positive multiple"):
        CIFAR10(root=root, train=False)

    content, _, _ = _cifar_records(2, (10,), seed=0)
    records = bytearray(content)
    records[3073] = 10  # the second record's label
    with open(tmp_path / 'test_batch.bin', 'wb') as f:
        f.write(bytes(records))
    with pytest.raises(ValueError, match=r"test_batch\.bin is corrupt or not a CIFAR10 file: a "
                                         r"label is 10, not below 10"):
        CIFAR10(root=root, train=False)
    content, _, _ = _cifar_records(2, (20, 100), seed=0)
    records = bytearray(content)
    records[3074] = 100  # the second record's coarse label
    with open(tmp_path / 'test.bin', 'wb') as f:
        f.write(bytes(records))
    with pytest.raises(ValueError, match=r"test\.bin is corrupt or not a CIFAR100 file: a label "
                                         r"is 100, not below 20"):
        CIFAR100(root=root, train=False)
