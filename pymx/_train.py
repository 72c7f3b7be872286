"""The crash course's LeafNetwork, its data pipeline and its data-parallel training loop
(tutorial sections 7 and 8.1-8.3), reusable by ``python -m pymx`` and by tests."""
import contextlib
import time

from . import amp, autograd, gluon, np, npx
from .gluon import nn
from .gluon.data.vision import transforms

__all__ = ["LeafNetwork", "training_transformer", "validation_transformer", "make_loaders",
           "evaluate", "fit"]

# Normalisation of the tutorial (ImageNet statistics, images in [0, 1]).
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def conv_block(filters, kernel_size=2, stride=2, batch_norm=True):
    """Convolution + max pooling (+ batch norm), as in the tutorial."""
    block = nn.HybridSequential()
    block.add(nn.Conv2D(channels=filters, kernel_size=kernel_size, activation='relu'),
              nn.MaxPool2D(pool_size=4, strides=stride))
    if batch_norm:
        block.add(nn.BatchNorm())
    return block


def dense_block(neurons, activation='relu', dropout=0.2):
    """Dense (+ dropout), as in the tutorial."""
    block = nn.HybridSequential()
    block.add(nn.Dense(neurons, activation=activation))
    if dropout:
        block.add(nn.Dropout(dropout))
    return block


class LeafNetwork(nn.HybridBlock):
    """The tutorial's classifier for (N, 3, 128, 128) images: three conv blocks, three dense.
    `dropout` is the tutorial's 0.2; tests set 0 to compare training runs exactly."""

    def __init__(self, dropout=0.2):
        super().__init__()
        self.conv1 = conv_block(32)
        self.conv2 = conv_block(64)
        self.conv3 = conv_block(128)
        self.flatten = nn.Flatten()
        self.dense1 = dense_block(100, dropout=dropout)
        self.dense2 = dense_block(10, dropout=dropout)
        self.dense3 = nn.Dense(2)

    def forward(self, batch):
        batch = self.conv1(batch)
        batch = self.conv2(batch)
        batch = self.conv3(batch)
        batch = self.flatten(batch)
        batch = self.dense1(batch)
        batch = self.dense2(batch)
        return self.dense3(batch)


def training_transformer(jitter_param=0.05):
    """Tutorial 8.1: resize the short side to 224, centre crop 128, random flip and contrast
    jitter, then a normalised CHW float32 tensor."""
    return transforms.Compose([
        transforms.Resize(size=224, keep_ratio=True),
        transforms.CenterCrop(128),
        transforms.RandomFlipLeftRight(),
        transforms.RandomColorJitter(contrast=jitter_param),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])


def validation_transformer():
    """Tutorial 8.1 without the random parts."""
    return transforms.Compose([
        transforms.Resize(size=224, keep_ratio=True),
        transforms.CenterCrop(128),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])


def make_loaders(root, batch_size, num_workers=0, pin_memory=False):
    """(train, validation, test) DataLoaders over root/{train,validation,test}.

    The training loader rolls the remainder of an epoch over into the next one, so every
    training batch has exactly batch_size samples and splits evenly over the devices.
    pin_memory (for GPUs): batches in page-locked memory, copied to the devices at full speed."""
    def dataset(split):
        return gluon.data.vision.ImageFolderDataset(f"{root}/{split}")

    common = dict(batch_size=batch_size, num_workers=num_workers, pin_memory=pin_memory)
    train = gluon.data.DataLoader(dataset("train").transform_first(training_transformer()),
                                  shuffle=True, last_batch="rollover", **common)
    val = gluon.data.DataLoader(dataset("validation").transform_first(validation_transformer()),
                                **common)
    test = gluon.data.DataLoader(dataset("test").transform_first(validation_transformer()),
                                 **common)
    return train, val, test


def _split(batch, devices):
    # even_split=False: the last evaluation batch may not divide by the number of devices.
    data = gluon.utils.split_and_load(batch[0], devices, even_split=False)
    label = gluon.utils.split_and_load(batch[1], devices, even_split=False)
    return data, label


def evaluate(net, loader, devices):
    """Accuracy of ``net`` over ``loader``, each batch split over ``devices`` (tutorial 8.2)."""
    acc = gluon.metric.Accuracy()
    for batch in loader:
        data_list, label_list = _split(batch, devices)
        outputs = [net(x) for x in data_list]
        acc.update(label_list, outputs)
    return acc.get()[1]


def _loss_heads(losses, trainer, use_amp):
    """The arrays to back-propagate from: the losses, scaled by amp's loss scale under amp."""
    return amp.scale_loss(losses, trainer) if use_amp else contextlib.nullcontext(losses)


def fit(net, trainer, train_loader, val_loader, devices, epochs, progress=None, log=print,
        use_amp=False):
    """The data-parallel loop of tutorial 8.3. Returns the per-epoch history: mean training
    loss, training and validation accuracy, seconds and samples per second.

    ``progress(iterable, desc)`` may wrap the batches of an epoch (a tqdm bar, for instance).
    ``use_amp``: amp.init and amp.init_trainer(trainer) were called; the losses are scaled."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    history = {"loss": [], "train_acc": [], "val_acc": [], "seconds": [], "samples_per_s": []}
    for epoch in range(epochs):
        # Summed on each device and read once per epoch: a float() or metric update per batch
        # would wait for every device after each step, leaving the GPUs idle while batches load.
        loss_sums = {d: np.zeros((), device=d) for d in devices}
        correct_sums = {d: np.zeros((), dtype="int64", device=d) for d in devices}
        samples = 0
        tic = time.time()
        batches = train_loader if progress is None else progress(train_loader,
                                                                 f"epoch {epoch + 1}/{epochs}")
        for batch in batches:
            data_list, label_list = _split(batch, devices)
            with autograd.record():
                outputs = [net(x) for x in data_list]
                losses = [loss_fn(out, label) for out, label in zip(outputs, label_list)]
                with _loss_heads(losses, trainer, use_amp) as heads:
                    autograd.backward(heads)
            batch_size = batch[0].shape[0]
            trainer.step(batch_size)
            samples += batch_size
            for out, label, loss in zip(outputs, label_list, losses):
                loss_sums[loss.device] += loss.sum()
                predicted = out.argmax(axis=1)
                correct_sums[out.device] += (predicted == label.astype(predicted.dtype)).sum()
        npx.waitall()  # the updates too: the sums do not depend on them
        seconds = time.time() - tic
        train_loss = sum(float(total) for total in loss_sums.values())
        correct = sum(int(total) for total in correct_sums.values())
        val_acc = evaluate(net, val_loader, devices)
        history["loss"].append(train_loss / max(samples, 1))
        history["train_acc"].append(correct / max(samples, 1))
        history["val_acc"].append(val_acc)
        history["seconds"].append(seconds)
        history["samples_per_s"].append(samples / seconds)
        log(f"[Epoch {epoch + 1}] training: loss={history['loss'][-1]:.4f} "
            f"accuracy={history['train_acc'][-1]:.4f}")
        log(f"[Epoch {epoch + 1}] time cost: {seconds:.1f} s, "
            f"{history['samples_per_s'][-1]:.1f} samples/s")
        log(f"[Epoch {epoch + 1}] validation: validation accuracy={val_acc:.4f}")
    return history
