"""The resnet case in PyTorch (the peer for bench/run.py): ResNet-18 V1 as torchvision's
resnet18() (defined here, torchvision being absent from the peer's environment): the 7x7/2 stem
with batch norm and 3x3/2 max pool, four stages of two basic blocks (64, 128, 256, 512 channels,
bias-free convolutions, 1x1 projection shortcuts), global average pooling, 1000 classes. float32.
Prints one JSON line.

    python resnet_torch.py --mode train|infer --batch 8 [--image-size 224] [--channels-last]
                           [--seconds 3] [--device cuda]

The training step is the pymx one (bench/measure_pymx.py): forward, softmax cross-entropy,
backward, SGD update; inference runs in eval mode without autograd.
"""
import argparse
import json

import torch
from torch import nn

import peer_timing


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False), nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, 1, 1, bias=False), nn.BatchNorm2d(channels))
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(self.body(x) + shortcut)


def resnet18(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    in_channels = 64
    for i, channels in enumerate((64, 128, 256, 512)):
        layers += [BasicBlock(in_channels, channels, 1 if i == 0 else 2),
                   BasicBlock(channels, channels, 1)]
        in_channels = channels
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def measure(args):
    device = torch.device(args.device)
    torch.manual_seed(0)
    net = resnet18().to(device)
    x = torch.rand(args.batch, 3, args.image_size, args.image_size, device=device)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    if args.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    step = peer_timing.torch_step(net, x, lambda output: loss_fn(output, y), opt, args.mode,
                                  device)
    return peer_timing.samples_per_second(step, args.batch, args.seconds, warmup=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    name = "torch eager" + (" channels_last" if args.channels_last else "")
    print(json.dumps({"impl": name, "mode": args.mode, "batch": args.batch,
                      "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
