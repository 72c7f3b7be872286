"""The deterministic mode's training case (Note [Deterministic mode]): a small net with the ops
whose gradients add many contributions into one place (convolution, batch norm, max and average
pooling with overlapping windows, an embedding looked up with repeated indices, dense) and
dropout, trained for a few steps, data parallel over `devices`. `training_script(devices)` is
the text of a script that trains it with the mode on and prints the SHA-256 of every parameter's
bytes, for a fresh interpreter (the engine is chosen at start-up)."""


def training_script(devices):
    """`devices`: Python source of the device list, e.g. "[cpu(0), cpu(1)]"."""
    return f'''
import hashlib

import numpy as onp

from pymx import autograd, gluon, np, npx
from pymx.device import cpu, gpu
from pymx.gluon import nn

npx.set_deterministic(True)
devices = {devices}


class Net(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(8, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm()
        self.max_pool = nn.MaxPool2D(pool_size=3, strides=1)  # windows overlap
        self.avg_pool = nn.AvgPool2D(pool_size=3, strides=2, padding=1)  # they overlap too
        self.dropout = nn.Dropout(0.3)
        self.embedding = nn.Embedding(10, 6)
        self.dense = nn.Dense(3)

    def forward(self, images, tokens):
        x = self.avg_pool(self.max_pool(npx.relu(self.norm(self.conv(images)))))
        x = self.dropout(npx.batch_flatten(x))
        words = self.embedding(tokens).sum(axis=1)
        return self.dense(np.concatenate([x, words], axis=1))


npx.random.seed(7)
net = Net()
net.initialize(device=devices)
net.hybridize()
trainer = gluon.Trainer(net.collect_params(), "adam", {{"learning_rate": 0.01}}, kvstore="device")
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
rng = onp.random.default_rng(0)
for step in range(4):
    images = np.array(rng.standard_normal((8, 3, 10, 10)).astype("float32"))
    tokens = np.array(rng.integers(0, 4, (8, 12)).astype("float32"))  # 4 of 10 rows, repeated
    labels = np.array(rng.integers(0, 3, 8).astype("float32"))
    parts = [gluon.utils.split_and_load(a, devices) for a in (images, tokens, labels)]
    with autograd.record():
        losses = [loss_fn(net(x, t), y) for x, t, y in zip(*parts)]
    for loss in losses:
        loss.backward()
    trainer.step(8)
digest = hashlib.sha256()
for name, param in sorted(net.collect_params().items()):
    digest.update(param.data(devices[0]).asnumpy().tobytes())
print(digest.hexdigest(), sum(float(loss.sum()) for loss in losses))
'''
