"""The transformer case in PyTorch (the peer for bench/run.py): the small BERT-like encoder of
bench/transformer_model.py with the same arithmetic, as a plain nn.Module (one Linear for the
queries, keys and values, heads split by view/permute, torch.matmul scores, softmax with padding
masked to the lowest float, dropout 0.1 on attention weights and sublayer outputs, post-norm
LayerNorm, erf GELU): vocabulary 8000, 2 layers, 256 units, 4 heads, feed-forward 1024,
sequence 128, classifier on the first token. float32. Prints one JSON line.

    python transformer_torch.py --mode train|infer [--batch 8] [--seconds 3] [--device cuda]
                                [--builtin]

--builtin uses nn.TransformerEncoderLayer (post-norm, GELU, batch_first) instead of the plain
module: in inference its fused fast path (torch._transformer_encoder_layer_fwd) runs, so it is
a reference point, not the same arithmetic. The training step is the pymx one
(bench/measure_pymx.py): forward, softmax cross-entropy, backward, Adam update (lr 1e-4).
"""
import argparse
import json
import math

import torch
from torch import nn

import peer_timing

VOCAB, UNITS, HEADS, HIDDEN, LAYERS, MAX_LENGTH, CLASSES = 8000, 256, 4, 1024, 2, 128, 2
DROPOUT = 0.1


class MultiHeadSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_qkv = nn.Linear(UNITS, 3 * UNITS)
        self.attn_proj = nn.Linear(UNITS, UNITS)
        self.attn_dropout = nn.Dropout(DROPOUT)

    def forward(self, x, key_padding):
        batch, length, units = x.shape
        head_size = units // HEADS
        qkv = self.attn_qkv(x).view(batch, length, 3, HEADS, head_size).permute(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(head_size)
        scores = scores.masked_fill(key_padding, torch.finfo(scores.dtype).min)
        weights = self.attn_dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(weights, value).permute(0, 2, 1, 3).reshape(batch, length, units)
        return self.attn_proj(context)


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = MultiHeadSelfAttention()
        self.attention_dropout = nn.Dropout(DROPOUT)
        self.attention_norm = nn.LayerNorm(UNITS, eps=1e-12)
        self.ffn_1 = nn.Linear(UNITS, HIDDEN)
        self.activation = nn.GELU()
        self.ffn_2 = nn.Linear(HIDDEN, UNITS)
        self.ffn_dropout = nn.Dropout(DROPOUT)
        self.ffn_norm = nn.LayerNorm(UNITS, eps=1e-12)

    def forward(self, x, key_padding):
        x = self.attention_norm(x + self.attention_dropout(self.attention(x, key_padding)))
        hidden = self.ffn_2(self.activation(self.ffn_1(x)))
        return self.ffn_norm(x + self.ffn_dropout(hidden))


class TransformerClassifier(nn.Module):
    def __init__(self, builtin):
        super().__init__()
        self.builtin = builtin
        self.word_embed = nn.Embedding(VOCAB, UNITS)
        self.position_embed = nn.Embedding(MAX_LENGTH, UNITS)
        self.embed_norm = nn.LayerNorm(UNITS, eps=1e-12)
        self.embed_dropout = nn.Dropout(DROPOUT)
        if builtin:
            self.layers = nn.ModuleList(nn.TransformerEncoderLayer(
                UNITS, HEADS, HIDDEN, DROPOUT, activation="gelu", layer_norm_eps=1e-12,
                batch_first=True) for _ in range(LAYERS))
        else:
            self.layers = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.classifier = nn.Linear(UNITS, CLASSES)

    def forward(self, tokens, valid_length):
        length = tokens.shape[1]
        positions = torch.arange(length, device=tokens.device)
        x = self.embed_dropout(self.embed_norm(self.word_embed(tokens) +
                                               self.position_embed(positions)))
        padding = positions[None, :] >= valid_length[:, None]  # (batch, keys): True = padding
        for layer in self.layers:
            if self.builtin:
                x = layer(x, src_key_padding_mask=padding)
            else:
                x = layer(x, padding[:, None, None, :])
        return self.classifier(x[:, 0, :])


def measure(args):
    device = torch.device(args.device)
    torch.manual_seed(0)
    net = TransformerClassifier(args.builtin).to(device)
    tokens = torch.randint(0, VOCAB, (args.batch, MAX_LENGTH), device=device)
    # Between half and all of the sequence valid, as the pymx side draws it.
    valid_length = torch.randint(MAX_LENGTH // 2, MAX_LENGTH + 1, (args.batch,), device=device)
    y = torch.randint(0, CLASSES, (args.batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)

    class Inputs(nn.Module):  # torch_step calls net(x) with one argument
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(*x)

    step = peer_timing.torch_step(Inputs(), (tokens, valid_length),
                                  lambda output: loss_fn(output, y), opt, args.mode, device)
    return peer_timing.samples_per_second(step, args.batch, args.seconds, warmup=3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--builtin", action="store_true",
                        help="nn.TransformerEncoderLayer instead of the plain module")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    name = "torch nn.TransformerEncoderLayer" if args.builtin else "torch eager"
    print(json.dumps({"impl": name, "mode": args.mode, "batch": args.batch,
                      "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
