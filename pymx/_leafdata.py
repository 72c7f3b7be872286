"""Procedurally generated leaf images: the default data set of ``python -m pymx``.

The MXNet crash course trains its LeafNetwork on photographs of healthy and diseased leaves that
are not shipped with pymx. This module draws a small stand-in set with Pillow and NumPy, in the
ImageFolder layout the tutorial reads::

    <root>/datasets/{train,validation,test}/{diseased,healthy}/<n>.jpg

Each image is a green, pointed leaf with a midrib and lateral veins on a textured soil or moss
background, randomly rotated, scaled, shifted and lit. Diseased leaves carry 3-10 brown spots with
yellow halos; both classes have brown specks on the *background*, so the network must look at the
leaf and not merely for brown pixels.

Images are 160x160 (not the photographs' size) so the tutorial's pipeline, Resize(224,
keep_ratio=True) then CenterCrop(128), stays cheap. That crop keeps the central 128/224 of the
image, so disease spots are placed in the central half of the picture, where the crop always sees
them. Every image is a pure function of (seed, split, class, index): the set is reproducible and
is generated once, then reused from its cache directory.
"""
import json
import os
import shutil
import tempfile

import numpy as onp
from PIL import Image, ImageDraw, ImageFilter

__all__ = ["DEFAULT_COUNTS", "IMAGE_SIZE", "CLASSES", "ensure_dataset", "generate_dataset",
           "default_root"]

# Bump when the drawing changes, so stale caches are regenerated.
_GENERATOR_VERSION = 1
IMAGE_SIZE = 160
CLASSES = ("diseased", "healthy")          # sorted, as ImageFolderDataset's synsets will be
SPLITS = ("train", "validation", "test")
DEFAULT_COUNTS = {"train": 320, "validation": 80, "test": 80}   # images per split, both classes
_MARKER = "leafdata.json"


def default_root():
    """The cache directory used when no --data-dir is given."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "pymx", "leafdata")


def _smooth_noise(rng, size, cells, channels=1):
    """Low-frequency noise in [0, 1]: a small random grid upsampled bicubically."""
    grid = (rng.random((cells, cells, channels)) * 255).astype(onp.uint8)
    mode = "L" if channels == 1 else "RGB"
    img = Image.fromarray(grid[..., 0] if channels == 1 else grid, mode)
    img = img.resize((size, size), Image.BICUBIC)
    arr = onp.asarray(img, dtype=onp.float32) / 255.0
    return arr if channels > 1 else arr[..., None]


def _background(rng, size):
    palettes = [(110, 85, 60), (95, 90, 80), (70, 80, 50), (130, 115, 95), (60, 55, 50)]
    base = onp.array(palettes[rng.integers(len(palettes))], onp.float32)
    base = base * rng.uniform(0.8, 1.2, 3)
    texture = _smooth_noise(rng, size, cells=int(rng.integers(4, 12))) - 0.5
    tint = _smooth_noise(rng, size, cells=3, channels=3) - 0.5
    grain = rng.normal(0.0, 8.0, (size, size, 1))
    img = base + texture * 80.0 + tint * 25.0 + grain
    img = Image.fromarray(onp.clip(img, 0, 255).astype(onp.uint8), "RGB")
    # Brown specks on the soil for both classes: spots alone do not give the label away.
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(0, 12))):
        x, y = rng.uniform(0, size, 2)
        r = rng.uniform(1.0, 4.0)
        shade = tuple(int(c) for c in rng.uniform([90, 50, 20], [140, 80, 40]))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=shade)
    return img


def _leaf_outline(rng, size):
    """Polygon of a pointed leaf, rotated, scaled and shifted; returns (points, centre, axis)."""
    length = size * rng.uniform(0.42, 0.50)          # half length along the midrib
    width = length * rng.uniform(0.38, 0.55)          # half width at the widest point
    skew = rng.uniform(-0.25, 0.25)                   # widest point nearer base or tip
    u = onp.linspace(-1.0, 1.0, 60)
    half = width * (1.0 - u ** 2) ** 0.75 * (1.0 + skew * u)
    top = onp.stack([u * length, half], axis=1)
    bottom = onp.stack([u[::-1] * length, -half[::-1]], axis=1)
    pts = onp.concatenate([top, bottom])
    angle = rng.uniform(0, onp.pi)
    rot = onp.array([[onp.cos(angle), -onp.sin(angle)], [onp.sin(angle), onp.cos(angle)]])
    centre = size / 2.0 + rng.uniform(-0.06, 0.06, 2) * size
    pts = pts @ rot.T + centre
    axis = rot[:, 0]
    return [tuple(p) for p in pts], centre, axis, length, width


def _draw_leaf(rng, size, diseased):
    img = _background(rng, size)
    outline, centre, axis, length, width = _leaf_outline(rng, size)

    mask = Image.new("L", (size, size), 0)
    ImageDraw.Draw(mask).polygon(outline, fill=255)

    green = onp.array([rng.uniform(50, 90), rng.uniform(115, 170), rng.uniform(25, 60)])
    shade = _smooth_noise(rng, size, cells=5) * 0.35 + 0.8       # uneven lighting on the blade
    blade = green * shade + rng.normal(0.0, 6.0, (size, size, 3))
    leaf = Image.fromarray(onp.clip(blade, 0, 255).astype(onp.uint8), "RGB")

    # Veins: a lighter midrib and lateral veins leaving it at about 45 degrees.
    draw = ImageDraw.Draw(leaf)
    vein = tuple(int(min(255, c * 1.35 + 20)) for c in green)
    base, tip = centre - axis * length, centre + axis * length
    draw.line([tuple(base), tuple(tip)], fill=vein, width=2)
    normal = onp.array([-axis[1], axis[0]])
    for t in onp.linspace(-0.7, 0.7, int(rng.integers(4, 8))):
        start = centre + axis * length * t
        for side in (1.0, -1.0):
            end = start + (axis * 0.6 + normal * side) * width * 0.8
            draw.line([tuple(start), tuple(end)], fill=vein, width=1)

    if diseased:
        _draw_spots(rng, leaf, mask, size)

    img.paste(leaf, (0, 0), mask)
    return img


def _draw_spots(rng, leaf, mask, size):
    """Brown spots with yellow halos, centred on leaf pixels in the central half of the image."""
    inside = onp.argwhere(onp.asarray(mask) > 0)
    lo, hi = size * 0.25, size * 0.75
    central = inside[(inside[:, 0] >= lo) & (inside[:, 0] < hi)
                     & (inside[:, 1] >= lo) & (inside[:, 1] < hi)]
    draw = ImageDraw.Draw(leaf)
    for _ in range(int(rng.integers(3, 11))):
        y, x = central[rng.integers(len(central))]
        r = rng.uniform(2.5, 6.5)
        halo = r * rng.uniform(1.3, 1.8)
        yellow = tuple(int(c) for c in rng.uniform([185, 170, 40], [225, 210, 90]))
        brown = tuple(int(c) for c in rng.uniform([90, 50, 15], [140, 85, 40]))
        draw.ellipse([x - halo, y - halo, x + halo, y + halo], fill=yellow)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=brown)


def _finish(rng, img):
    """Global photographic variation: exposure, colour cast, focus."""
    arr = onp.asarray(img, dtype=onp.float32)
    arr = arr * rng.uniform(0.75, 1.2) * rng.uniform(0.92, 1.08, 3)
    img = Image.fromarray(onp.clip(arr, 0, 255).astype(onp.uint8), "RGB")
    blur = rng.uniform(0.0, 0.9)
    return img.filter(ImageFilter.GaussianBlur(blur)) if blur > 0.3 else img


def draw_image(seed, split, label, index, size=IMAGE_SIZE):
    """One image as a PIL RGB image; a pure function of its arguments."""
    rng = onp.random.default_rng([seed, SPLITS.index(split), label, index])
    return _finish(rng, _draw_leaf(rng, size, diseased=CLASSES[label] == "diseased"))


def generate_dataset(root, seed=0, counts=None, size=IMAGE_SIZE):
    """Writes the data set under ``root/datasets`` (replacing one that is there) and returns
    that path. Images are written to a temporary directory first and moved into place, so an
    interrupted run never leaves a half-written set that looks complete."""
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    os.makedirs(root, exist_ok=True)
    target = os.path.join(root, "datasets")
    staging = tempfile.mkdtemp(prefix=".datasets-", dir=root)
    try:
        for split in SPLITS:
            per_class = [counts[split] // 2 + (label < counts[split] % 2)
                         for label in range(len(CLASSES))]
            for label, name in enumerate(CLASSES):
                folder = os.path.join(staging, split, name)
                os.makedirs(folder)
                for index in range(per_class[label]):
                    img = draw_image(seed, split, label, index, size)
                    img.save(os.path.join(folder, "%04d.jpg" % index), quality=92)
        with open(os.path.join(staging, _MARKER), "w") as f:
            json.dump(_manifest(seed, counts, size), f)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _manifest(seed, counts, size):
    return {"version": _GENERATOR_VERSION, "seed": seed, "counts": counts, "size": size}


def ensure_dataset(root=None, seed=0, counts=None, size=IMAGE_SIZE):
    """Returns ``root/datasets``, generating it unless a complete set made with the same
    parameters is already there."""
    root = os.path.expanduser(root or default_root())
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    target = os.path.join(root, "datasets")
    try:
        with open(os.path.join(target, _MARKER)) as f:
            if json.load(f) == _manifest(seed, counts, size):
                return target
    except (OSError, ValueError):
        pass
    return generate_dataset(root, seed, counts, size)
