import os
import pickle

import numpy as onp
import pytest
from PIL import Image

import pymx
from pymx import np
from pymx.gluon.data import DataLoader
from pymx.gluon.data.vision import ImageFolderDataset, transforms

# The fixture folder holds entries that are ignored with a warning; one test checks the warnings.
pytestmark = pytest.mark.filterwarnings("ignore:Ignoring .*:UserWarning")


def _write(path, array):
    Image.fromarray(array).save(path)


@pytest.fixture
def folder(tmp_path):
    """root/{cat,dog}/ with png images of known pixels, plus entries that must be ignored."""
    rng = onp.random.default_rng(0)
    images = {}
    for cls in ("dog", "cat"):
        os.makedirs(tmp_path / cls)
        for name in ("b.png", "a.PNG"):
            array = rng.integers(0, 256, (5, 7, 3), dtype=onp.uint8)
            _write(str(tmp_path / cls / name), array)
            images[(cls, name)] = array
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    (tmp_path / "README").write_text("top-level file")
    return tmp_path, images


def test_layout_synsets_items_and_warnings(folder):
    root, _ = folder
    with pytest.warns(UserWarning) as record:
        data = ImageFolderDataset(str(root))
    messages = [str(w.message) for w in record]
    assert "Ignoring %s, which is not a directory." % os.path.join(str(root), "README") in messages
    assert ("Ignoring %s of type .txt. Only support .jpg, .jpeg, .png"
            % os.path.join(str(root), "cat", "notes.txt")) in messages
    assert data.synsets == ["cat", "dog"]
    assert [(os.path.relpath(f, str(root)), label) for f, label in data.items] == [
        ("cat/a.PNG", 0), ("cat/b.png", 0), ("dog/a.PNG", 1), ("dog/b.png", 1)]
    assert len(data) == 4


def test_samples_are_rgb_uint8_hwc_on_cpu(folder):
    root, images = folder
    data = ImageFolderDataset(str(root))
    image, label = data[3]
    assert isinstance(image, np.ndarray) and image.dtype == onp.uint8
    assert image.shape == (5, 7, 3) and image.device == pymx.cpu()
    assert label == 1
    onp.testing.assert_array_equal(image.asnumpy(), images[("dog", "b.png")])
    with pymx.cpu(3):  # a device scope (a GPU's, say) does not move the decoding off the CPU
        assert data[3][0].device == pymx.cpu()


def test_grayscale_flag(folder):
    root, images = folder
    image, _ = ImageFolderDataset(str(root), flag=0)[0]
    assert image.shape == (5, 7, 1)
    expected = onp.asarray(Image.fromarray(images[("cat", "a.PNG")]).convert("L"))
    onp.testing.assert_array_equal(image.asnumpy()[:, :, 0], expected)


def test_corrupt_file_names_the_file(tmp_path):
    os.makedirs(tmp_path / "c")
    (tmp_path / "c" / "broken.jpg").write_bytes(b"\xff\xd8 definitely not a jpeg")
    data = ImageFolderDataset(str(tmp_path))
    with pytest.raises(ValueError, match="Cannot decode image file .*broken.jpg"):
        data[0]


def test_transform_argument_is_deprecated(folder):
    with pytest.raises(DeprecationWarning, match="transform_first"):
        ImageFolderDataset(str(folder[0]), transform=lambda x, y: (x, y))
    with pytest.raises(ValueError, match="is not a directory"):
        ImageFolderDataset(str(folder[0] / "missing"))


def test_transform_first_pipeline_through_workers(folder):
    root, images = folder
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.5, 0.25)])
    data = ImageFolderDataset(str(root)).transform_first(pipeline)
    pickle.dumps(data)               # transform_first + Compose pickle
    expected = onp.stack([(images[k].transpose(2, 0, 1) / 255.0 - 0.5) / 0.25
                          for k in [("cat", "a.PNG"), ("cat", "b.png"), ("dog", "a.PNG"),
                                    ("dog", "b.png")]])
    for workers in (0, 2):
        loader = DataLoader(data, batch_size=2, num_workers=workers)
        batches = list(loader)
        got = onp.concatenate([b[0].asnumpy() for b in batches])
        assert batches[0][0].dtype == onp.float32
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        onp.testing.assert_array_equal(onp.concatenate([b[1].asnumpy() for b in batches]),
                                       [0, 0, 1, 1])
        loader.close()
