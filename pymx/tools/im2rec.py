"""``python -m pymx.tools.im2rec``: image lists and RecordIO image files, as MXNet's
tools/im2rec.py makes them (same arguments, same .lst, .rec and .idx files).

    python -m pymx.tools.im2rec --list --recursive data/train images/   # -> data/train.lst
    python -m pymx.tools.im2rec data/train images/                      # -> .rec and .idx

With --list it walks `root` and writes `<prefix>.lst` (or _train/_val/_test and _<chunk>
lists): one line per image, `index<TAB>label<TAB>...<TAB>path relative to root`, labels as
'%f'; --recursive gives each folder holding images a label (0, 1, ... in walk order, printed),
otherwise only the images in `root` are listed, with label 0. Lists are shuffled with seed 100
unless --no-shuffle, which gives the same order as MXNet's. Without --list it packs the images
of every `<prefix>*.lst` beside the prefix into a .rec and .idx of the same name, keyed by the
list's index column (see pymx.recordio; read them with gluon.data.vision.ImageRecordDataset).

Deliberate differences from MXNet's im2rec:
- Images are read, resized and encoded with Pillow, not OpenCV: --resize uses Pillow's bilinear
  filter (antialiased when shrinking), so resized pixels differ slightly from OpenCV's.
- --num-thread > 1 encodes in that many worker processes and still writes the records in list
  order (MXNet's writes them in list order too; its help text says otherwise).
- An image that cannot be read is reported on stderr with the reason and skipped, as in MXNet;
  the run then ends with exit status 1 and the count of skipped images. Malformed list lines are
  reported and skipped likewise.
"""
import argparse
import multiprocessing
import os
import random
import sys

import numpy as onp
from PIL import Image

from pymx import recordio

__all__ = ["main", "list_image", "write_list", "read_list", "image_encode"]


def list_image(root, recursive, exts):
    """Yields (index, path relative to root, label) for the images (by extension, any case)
    under `root`, in sorted order; see the module docstring for the labels."""
    i = 0
    if recursive:
        labels = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for fname in sorted(files):
                fpath = os.path.join(path, fname)
                if os.path.isfile(fpath) and os.path.splitext(fname)[1].lower() in exts:
                    label = labels.setdefault(path, len(labels))
                    yield i, os.path.relpath(fpath, root), label
                    i += 1
        for path, label in labels.items():
            print(os.path.relpath(path, root), label)
    else:
        for fname in sorted(os.listdir(root)):
            fpath = os.path.join(root, fname)
            if os.path.isfile(fpath) and os.path.splitext(fname)[1].lower() in exts:
                yield i, os.path.relpath(fpath, root), 0
                i += 1


def write_list(path_out, image_list):
    """Writes (index, path, label, ...) items as .lst lines."""
    with open(path_out, "w") as fout:
        for item in image_list:
            fout.write("%d\t" % item[0] + "".join("%f\t" % j for j in item[2:])
                       + "%s\n" % item[1])


def make_list(args):
    image_list = list(list_image(args.root, args.recursive, [e.lower() for e in args.exts]))
    if args.shuffle:
        random.seed(100)
        random.shuffle(image_list)
    chunk_size = (len(image_list) + args.chunks - 1) // args.chunks
    for i in range(args.chunks):
        chunk = image_list[i * chunk_size:(i + 1) * chunk_size]
        name = args.prefix + ("_%d" % i if args.chunks > 1 else "")
        sep = int(chunk_size * args.train_ratio)
        sep_test = int(chunk_size * args.test_ratio)
        if args.train_ratio == 1.0:
            write_list(name + ".lst", chunk)
            continue
        if args.test_ratio:
            write_list(name + "_test.lst", chunk[:sep_test])
        if args.train_ratio + args.test_ratio < 1.0:
            write_list(name + "_val.lst", chunk[sep_test + sep:])
        write_list(name + "_train.lst", chunk[sep_test:sep_test + sep])


def read_list(path_in):
    """Yields [index, path, label, ...] for the lines of a .lst file; malformed lines are
    reported on stderr and skipped."""
    with open(path_in) as fin:
        for lineno, line in enumerate(fin, 1):
            fields = [field.strip() for field in line.strip().split("\t")]
            try:
                if len(fields) < 3:
                    raise ValueError(f"{len(fields)} fields, at least 3 needed (index, "
                                     f"label(s), path)")
                yield [int(fields[0]), fields[-1]] + [float(f) for f in fields[1:-1]]
            except ValueError as err:
                print(f"{path_in}:{lineno}: skipping {line.rstrip()!r}: {err}",
                      file=sys.stderr)


def _load_bgr(path, color):
    """The image file as OpenCV's imread(path, color) gives it (BGR, see recordio)."""
    with open(path, "rb") as f:
        return recordio._decode(f.read(), color, f"image file {path}")


def _center_crop(img):
    height, width = img.shape[:2]
    if height > width:
        margin = (height - width) // 2
        return img[margin:margin + width]
    margin = (width - height) // 2
    return img[:, margin:margin + height]


def _resize_shorter_edge(img, size):
    height, width = img.shape[:2]
    new_size = (size, height * size // width) if height > width else \
        (width * size // height, size)
    return onp.asarray(Image.fromarray(img).resize(new_size, Image.BILINEAR))


def image_encode(args, item):
    """The packed record of a list item, or None (after reporting why) when it fails."""
    fullpath = os.path.join(args.root, item[1])
    label = item[2:] if len(item) > 3 and args.pack_label else item[2]
    header = recordio.IRHeader(0, label, item[0], 0)
    try:
        if args.pass_through:
            with open(fullpath, "rb") as fin:
                return recordio.pack(header, fin.read())
        img = _load_bgr(fullpath, args.color)
        if args.center_crop:
            img = _center_crop(img)
        if args.resize:
            img = _resize_shorter_edge(img, args.resize)
        return recordio.pack_img(header, img, quality=args.quality, img_fmt=args.encoding)
    except (OSError, ValueError, TypeError) as err:
        print(f"skipping {fullpath}: {err}", file=sys.stderr)
        return None


_worker_args = None


def _init_worker(args):
    global _worker_args
    _worker_args = args


def _encode_in_worker(item):
    return image_encode(_worker_args, item)


def write_record(args, lst_path):
    """Packs the images of one .lst file into the .rec/.idx beside it; returns how many
    images were skipped."""
    stem = os.path.splitext(lst_path)[0]
    items = list(read_list(lst_path))
    skipped = 0
    with recordio.MXIndexedRecordIO(stem + ".idx", stem + ".rec", "w") as record:
        if args.num_thread > 1:
            with multiprocessing.get_context("fork").Pool(
                    args.num_thread, initializer=_init_worker, initargs=(args,)) as pool:
                packed = pool.imap(_encode_in_worker, items, chunksize=16)
                skipped = _write_all(record, items, packed)
        else:
            skipped = _write_all(record, items, (image_encode(args, item) for item in items))
    return skipped


def _write_all(record, items, packed):
    skipped = 0
    for count, (item, s) in enumerate(zip(items, packed)):
        if s is None:
            skipped += 1
        else:
            record.write_idx(item[0], s)
        if count % 1000 == 0:
            print("count:", count)
    return skipped


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m pymx.tools.im2rec",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Create an image list or make a record database by reading from an image "
                    "list")
    parser.add_argument("prefix", help="prefix of input/output lst and rec files.")
    parser.add_argument("root", help="path to folder containing images.")
    cgroup = parser.add_argument_group("Options for creating image lists")
    cgroup.add_argument("--list", action="store_true",
                        help="create image list(s) <prefix>.lst by traversing root; otherwise "
                             "read <prefix>*.lst and create <prefix>*.rec")
    cgroup.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"],
                        help="list of acceptable image extensions.")
    cgroup.add_argument("--chunks", type=int, default=1, help="number of chunks.")
    cgroup.add_argument("--train-ratio", type=float, default=1.0,
                        help="Ratio of images to use for training.")
    cgroup.add_argument("--test-ratio", type=float, default=0,
                        help="Ratio of images to use for testing.")
    cgroup.add_argument("--recursive", action="store_true",
                        help="walk subfolders, giving each folder of images its own label; "
                             "otherwise list the images in root with label 0.")
    cgroup.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                        help="keep the sorted order in <prefix>.lst")
    rgroup = parser.add_argument_group("Options for creating database")
    rgroup.add_argument("--pass-through", action="store_true",
                        help="store the image files' bytes as they are")
    rgroup.add_argument("--resize", type=int, default=0,
                        help="resize the shorter edge of each image to this size (0: keep)")
    rgroup.add_argument("--center-crop", action="store_true",
                        help="crop the centre square of each image.")
    rgroup.add_argument("--quality", type=int, default=95,
                        help="JPEG quality for encoding, 1-100; or PNG compression, 1-9")
    rgroup.add_argument("--num-thread", type=int, default=1,
                        help="number of processes encoding images.")
    rgroup.add_argument("--color", type=int, default=1, choices=[-1, 0, 1],
                        help="1: colour (alpha dropped), 0: grayscale, -1: as stored.")
    rgroup.add_argument("--encoding", type=str, default=".jpg", choices=[".jpg", ".png"],
                        help="encoding of the images.")
    rgroup.add_argument("--pack-label", action="store_true",
                        help="pack all the labels of multi-label list lines")
    args = parser.parse_args(argv)
    if args.chunks < 1:
        parser.error(f"--chunks must be at least 1, got {args.chunks}")
    args.prefix = os.path.abspath(args.prefix)
    args.root = os.path.abspath(args.root)
    return args


def main(argv=None):
    """Runs im2rec with the command-line arguments `argv` (default: sys.argv[1:]); returns the
    exit status."""
    args = parse_args(argv)
    if args.list:
        make_list(args)
        return 0
    working_dir = args.prefix if os.path.isdir(args.prefix) else os.path.dirname(args.prefix)
    lists = sorted(path for path in (os.path.join(working_dir, f)
                                     for f in os.listdir(working_dir))
                   if os.path.isfile(path) and path.startswith(args.prefix)
                   and path.endswith(".lst"))
    if not lists:
        print(f"Did not find any list file with prefix {args.prefix}", file=sys.stderr)
        return 1
    skipped = 0
    for lst_path in lists:
        print("Creating .rec file from", lst_path, "in", working_dir)
        skipped += write_record(args, lst_path)
    if skipped:
        print(f"{skipped} images could not be packed (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
