"""resnet18_v1's convolutions one by one on the CPU (float32, batch 8, 3x224x224 images): pymx vs
PyTorch, milliseconds per call, to show which layers bound the resnet case.

    python bench/measure_resnet_convs.py --impl pymx|torch [--batch 8]

Runs under whichever interpreter has the implementation. Prints one JSON line per layer shape and
pass, {"key": "<layer> <pass>", "value": ms, "unit": "ms/call"}: "fwd" is the forward alone,
"bwd" the data and weight gradients (forward + backward less forward), each the median of
5 calls after a warm-up. "xN" in a key is how many convolutions of that shape the network
has. Never asserts on speed.
"""
import argparse
import json

import numpy as onp

from measure_linalg import median_ms

# (name, in channels, out channels, kernel, stride, pad, input height/width, count in the net)
LAYERS = [("stem 7x7/2 3->64 224", 3, 64, 7, 2, 3, 224, 1),
          ("3x3 64->64 56", 64, 64, 3, 1, 1, 56, 4),
          ("3x3/2 64->128 56", 64, 128, 3, 2, 1, 56, 1),
          ("3x3 128->128 28", 128, 128, 3, 1, 1, 28, 3),
          ("1x1/2 64->128 56", 64, 128, 1, 2, 0, 56, 1),
          ("3x3/2 128->256 28", 128, 256, 3, 2, 1, 28, 1),
          ("3x3 256->256 14", 256, 256, 3, 1, 1, 14, 3),
          ("1x1/2 128->256 28", 128, 256, 1, 2, 0, 28, 1),
          ("3x3/2 256->512 14", 256, 512, 3, 2, 1, 14, 1),
          ("3x3 512->512 7", 512, 512, 3, 1, 1, 7, 3),
          ("1x1/2 256->512 14", 256, 512, 1, 2, 0, 14, 1)]


def pymx_calls(x, w, kernel, stride, pad):
    """(forward, forward + backward) of one bias-free convolution; each waits for its result."""
    from pymx import autograd, np, npx
    x, w = np.array(x), np.array(w)
    x.attach_grad()
    w.attach_grad()

    def conv():
        return npx.convolution(x, w, None, kernel=(kernel,) * 2, stride=(stride,) * 2,
                               pad=(pad,) * 2, num_filter=w.shape[0], no_bias=True)

    def forward_backward():
        with autograd.record():
            y = conv()
        y.backward()
        npx.waitall()

    return (lambda: conv().wait_to_read()), forward_backward


def torch_calls(x, w, kernel, stride, pad):
    import torch
    x = torch.from_numpy(x).requires_grad_()
    w = torch.from_numpy(w).requires_grad_()

    def forward():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, w, None, stride, pad)

    def forward_backward():
        torch.nn.functional.conv2d(x, w, None, stride, pad).sum().backward()

    return forward, forward_backward


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["pymx", "torch"], required=True)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    rng = onp.random.default_rng(0)
    make_calls = pymx_calls if args.impl == "pymx" else torch_calls
    for name, cin, cout, kernel, stride, pad, size, count in LAYERS:
        x = rng.standard_normal((args.batch, cin, size, size), dtype=onp.float32)
        w = rng.standard_normal((cout, cin, kernel, kernel), dtype=onp.float32)
        forward, forward_backward = make_calls(x, w, kernel, stride, pad)
        # budget 0: exactly 5 calls after the warm-up (median_ms's minimum)
        fwd = median_ms(forward, lambda: None, 0)
        bwd = median_ms(forward_backward, lambda: None, 0) - fwd
        for phase, value in (("fwd", fwd), ("bwd", bwd)):
            print(json.dumps({"key": f"{name} x{count} {phase}", "value": value,
                              "unit": "ms/call"}), flush=True)


if __name__ == "__main__":
    main()
