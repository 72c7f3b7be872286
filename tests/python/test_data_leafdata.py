import json
import os

import numpy as onp
from PIL import Image

import pymx
from pymx import _leafdata

COUNTS = {"train": 6, "validation": 3, "test": 2}


def test_generated_layout_counts_and_images(tmp_path):
    root = _leafdata.ensure_dataset(str(tmp_path), seed=3, counts=COUNTS)
    assert root == os.path.join(str(tmp_path), "datasets")
    for split, count in COUNTS.items():
        per_class = [len(os.listdir(os.path.join(root, split, c))) for c in _leafdata.CLASSES]
        assert sum(per_class) == count and abs(per_class[0] - per_class[1]) <= 1
    with Image.open(os.path.join(root, "train", "healthy", "0000.jpg")) as img:
        assert img.mode == "RGB" and img.size == (_leafdata.IMAGE_SIZE, _leafdata.IMAGE_SIZE)


def test_images_are_deterministic_and_classes_differ():
    a = onp.asarray(_leafdata.draw_image(1, "train", 0, 4))
    b = onp.asarray(_leafdata.draw_image(1, "train", 0, 4))
    c = onp.asarray(_leafdata.draw_image(2, "train", 0, 4))
    onp.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_spots_stay_on_the_leaf_inside_the_central_half():
    size = _leafdata.IMAGE_SIZE
    leaf = Image.new("RGB", (size, size), (60, 140, 40))
    mask = Image.new("L", (size, size), 0)
    mask.paste(255, (0, 0, size, size // 2))            # the leaf covers the top half only
    _leafdata._draw_spots(onp.random.default_rng(0), leaf, mask, size)
    changed = onp.argwhere((onp.asarray(leaf) != (60, 140, 40)).any(axis=2))
    assert len(changed) > 20
    # spot centres lie in [size/4, 3*size/4) and on the mask; a halo reaches <= 6.5*1.8 px
    reach = 6.5 * 1.8 + 1
    assert changed.min() >= size / 4 - reach and changed.max() <= 3 * size / 4 + reach
    assert changed[:, 0].max() <= size // 2 + reach
    colours = onp.asarray(leaf)[changed[:, 0], changed[:, 1]].astype(int)
    assert (colours[:, 0] > colours[:, 2] + 30).all()    # brown or yellow: red well above blue


def test_cache_is_reused_and_regenerated_when_parameters_change(tmp_path):
    root = _leafdata.ensure_dataset(str(tmp_path), seed=0, counts=COUNTS)
    marker = os.path.join(root, "train", "healthy", "0000.jpg")
    stamp = os.stat(marker).st_mtime_ns
    assert _leafdata.ensure_dataset(str(tmp_path), seed=0, counts=COUNTS) == root
    assert os.stat(marker).st_mtime_ns == stamp
    bigger = dict(COUNTS, train=8)
    _leafdata.ensure_dataset(str(tmp_path), seed=0, counts=bigger)
    with open(os.path.join(root, "leafdata.json")) as f:
        assert json.load(f)["counts"] == bigger
    assert len(os.listdir(os.path.join(root, "train", "healthy"))) == 4
    assert not [p for p in os.listdir(str(tmp_path)) if p.startswith(".datasets-")]


def test_loaders_for_gpus_give_page_locked_batches(tmp_path):
    """The main job's loaders with pin_memory (what it asks for when training on GPUs) yield
    batches in page-locked host memory, whose copies to a GPU run at full speed."""
    from pymx import _train
    root = _leafdata.ensure_dataset(str(tmp_path), seed=3, counts=COUNTS)
    for pin, device in ((False, pymx.cpu()), (True, pymx.cpu_pinned())):
        train, _, _ = _train.make_loaders(root, 4, pin_memory=pin)
        data, label = next(iter(train))
        assert data.shape == (4, 3, 128, 128) and data.device == device and label.device == device
