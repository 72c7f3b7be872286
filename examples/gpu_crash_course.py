"""The MXNet crash course "GPU training and inference" (/work/shared/seed, sections 1-8), run
with pymx.

The tutorial's code below is unchanged except for its imports (``from pymx import ...`` instead
of ``from mxnet import ...``) and one marked line in section 8.3: the tutorial falls back to the
CPU when there is no GPU in sections 3 and 4, but its training section assumes two GPUs; there
pymx falls back, in the same style, to cpu(0) and cpu(1), which are distinct pymx devices.

The tutorial reads ./datasets/{train,validation,test} and ./leaf_models.params saved by its step
6. The preparation step (not part of the tutorial) generates pymx's leaf data set in a work
directory, trains a short step-6 run there when leaf_models.params is missing, and changes into
that directory.

    python examples/gpu_crash_course.py [--workdir DIR] [--quick]

--quick uses a tiny generated data set (16 training images) so the whole script runs in about a
minute on a CPU; the tutorial's own hyper-parameters (batch 4, SGD lr 0.001, 2 epochs) are kept.
"""
import argparse
import os


def prepare():
    from pymx import _leafdata
    from pymx.__main__ import main as train_leaf_network

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=os.path.join(os.path.dirname(_leafdata.default_root()),
                                                          "crash-course"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    train_images = 16 if args.quick else 320
    os.makedirs(args.workdir, exist_ok=True)
    if not os.path.exists(os.path.join(args.workdir, "leaf_models.params")):
        # Step 6 of the crash course: train LeafNetwork once and save leaf_models.params.
        train_leaf_network(["--data-dir", args.workdir, "--output-dir", args.workdir,
                            "--train-images", str(train_images),
                            "--batch-size", "4" if args.quick else "32",
                            "--epochs", "1" if args.quick else "8", "--no-progress"])
    counts = {"train": train_images, "validation": train_images // 4, "test": train_images // 4}
    _leafdata.ensure_dataset(args.workdir, counts=counts)
    os.chdir(args.workdir)


prepare()

# ---- 1. Prerequisites ------------------------------------------------------------------------
from pymx import np, npx, gluon, autograd  # noqa: E402
from pymx.gluon import nn  # noqa: E402
import time  # noqa: E402
npx.set_np()  # 切换到 NumPy 兼容的算子语义

# ---- 2. npx.num_gpus() -----------------------------------------------------------------------
print(npx.num_gpus())  # 返回 MXNet 可访问的 GPU 数量

# ---- 3. Allocating data to a GPU -------------------------------------------------------------
gpu = npx.gpu() if npx.num_gpus() > 0 else npx.cpu()
x = np.ones((3, 4), device=gpu)
print(x)

# ---- 4. Moving data between GPUs -------------------------------------------------------------
gpu_1 = npx.gpu(1) if npx.num_gpus() > 1 else npx.cpu()
print(x.copyto(gpu_1))

# ---- 6. Running operations on a GPU ----------------------------------------------------------
y = np.random.uniform(size=(3, 4), device=gpu)
print(x + y)


# ---- 7. Running a neural network on a GPU ----------------------------------------------------
# 卷积块：包含卷积层、最大池化层和批归一化层
def conv_block(filters, kernel_size=2, stride=2, batch_norm=True):
    conv_block = nn.HybridSequential()
    conv_block.add(nn.Conv2D(channels=filters, kernel_size=kernel_size, activation='relu'),
                   nn.MaxPool2D(pool_size=4, strides=stride))
    if batch_norm:
        conv_block.add(nn.BatchNorm())
    return conv_block


# 全连接块：包含全连接层和 Dropout 层
def dense_block(neurons, activation='relu', dropout=0.2):
    dense_block = nn.HybridSequential()
    dense_block.add(nn.Dense(neurons, activation=activation))
    if dropout:
        dense_block.add(nn.Dropout(dropout))
    return dense_block


# 用上述两种块组合出完整网络
class LeafNetwork(nn.HybridBlock):
    def __init__(self):
        super(LeafNetwork, self).__init__()
        self.conv1 = conv_block(32)
        self.conv2 = conv_block(64)
        self.conv3 = conv_block(128)
        self.flatten = nn.Flatten()
        self.dense1 = dense_block(100)
        self.dense2 = dense_block(10)
        self.dense3 = nn.Dense(2)

    def forward(self, batch):
        batch = self.conv1(batch)
        batch = self.conv2(batch)
        batch = self.conv3(batch)
        batch = self.flatten(batch)
        batch = self.dense1(batch)
        batch = self.dense2(batch)
        batch = self.dense3(batch)
        return batch


# 7.1 Loading the saved parameters onto the GPU
net = LeafNetwork()
net.load_parameters('leaf_models.params', device=gpu)

# 7.2 Forward inference on the GPU
x = np.random.uniform(size=(1, 3, 128, 128), device=gpu)
print(net(x))

# ---- 8.1 Data and DataLoader -----------------------------------------------------------------
from pymx.gluon.data.vision import transforms  # noqa: E402

jitter_param = 0.05

# 归一化用的 mean 与 std（图像取值在 (0,1) 范围内）
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]

training_transformer = transforms.Compose([
    transforms.Resize(size=224, keep_ratio=True),
    transforms.CenterCrop(128),
    transforms.RandomFlipLeftRight(),
    transforms.RandomColorJitter(contrast=jitter_param),
    transforms.ToTensor(),
    transforms.Normalize(mean, std)
])

validation_transformer = transforms.Compose([
    transforms.Resize(size=224, keep_ratio=True),
    transforms.CenterCrop(128),
    transforms.ToTensor(),
    transforms.Normalize(mean, std)
])

# 用 ImageFolderDataset 从目录结构创建 Dataset
train_dataset = gluon.data.vision.ImageFolderDataset('./datasets/train')
val_dataset = gluon.data.vision.ImageFolderDataset('./datasets/validation')
test_dataset = gluon.data.vision.ImageFolderDataset('./datasets/test')

# 创建数据加载器
batch_size = 4
train_loader = gluon.data.DataLoader(train_dataset.transform_first(training_transformer),
                                     batch_size=batch_size, shuffle=True, try_nopython=True)
validation_loader = gluon.data.DataLoader(val_dataset.transform_first(validation_transformer),
                                          batch_size=batch_size, try_nopython=True)
test_loader = gluon.data.DataLoader(test_dataset.transform_first(validation_transformer),
                                    batch_size=batch_size, try_nopython=True)


# ---- 8.2 Multi-device evaluation -------------------------------------------------------------
def test(val_data, devices):
    acc = gluon.metric.Accuracy()
    for batch in val_data:
        data, label = batch[0], batch[1]
        data_list = gluon.utils.split_and_load(data, devices)
        label_list = gluon.utils.split_and_load(label, devices)
        outputs = [net(X) for X in data_list]
        acc.update(label_list, outputs)
    _, accuracy = acc.get()
    return accuracy


# ---- 8.3 Multi-device training loop ----------------------------------------------------------
# Diff 1: 使用两块 GPU 训练
available_gpus = [npx.gpu(i) for i in range(npx.num_gpus())]
num_gpus = 2
devices = available_gpus[:num_gpus]
devices = devices if devices else [npx.cpu(0), npx.cpu(1)]   # pymx: CPU fallback (see above)
print('Using {} GPUs'.format(len(devices)))

# Diff 2: 重新初始化参数，并放到多块 GPU 上
net.initialize(force_reinit=True, device=devices)

# 损失函数与优化器与之前一致
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
optimizer = 'sgd'
optimizer_params = {'learning_rate': 0.001}
trainer = gluon.Trainer(net.collect_params(), optimizer, optimizer_params)

epochs = 2
accuracy = gluon.metric.Accuracy()
log_interval = 5

for epoch in range(epochs):
    train_loss = 0.
    tic = time.time()
    btic = time.time()
    accuracy.reset()
    for idx, batch in enumerate(train_loader):
        data, label = batch[0], batch[1]

        # Diff 3: 把批次切分并加载到对应设备
        data_list = gluon.utils.split_and_load(data, devices)
        label_list = gluon.utils.split_and_load(label, devices)

        # Diff 4: 在每个设备上分别做前向与反向，
        # MXNet 会自动并行执行这些计算
        with autograd.record():
            outputs = [net(X) for X in data_list]
            losses = [loss_fn(output, label) for output, label in zip(outputs, label_list)]

        for l in losses:  # noqa: E741
            l.backward()

        trainer.step(batch_size)

        # Diff 5: 汇总所有设备上的损失；float() 会把数据拷回 CPU
        train_loss += sum([float(l.sum()) for l in losses])
        accuracy.update(label_list, outputs)
        if log_interval and (idx + 1) % log_interval == 0:
            _, acc = accuracy.get()
            print(f"""Epoch[{epoch + 1}] Batch[{idx + 1}] Speed: {batch_size / (time.time() - btic)} samples/sec \
                  batch loss = {train_loss} | accuracy = {acc}""")
            btic = time.time()

    _, acc = accuracy.get()

    acc_val = test(validation_loader, devices)
    print(f"[Epoch {epoch + 1}] training: accuracy={acc}")
    print(f"[Epoch {epoch + 1}] time cost: {time.time() - tic}")
    print(f"[Epoch {epoch + 1}] validation: validation accuracy={acc_val}")

# 也可以把 test_loader 传入 test 函数评估测试集表现
print(f"test accuracy={test(test_loader, devices)}")
