"""The transformer case's model (bench/measure_pymx.py): a small BERT-like encoder written with
pymx's public API as an MXNet 2.x user writes it.

Token embedding plus a learned positional embedding, then post-norm encoder layers (BERT's
order: x = LayerNorm(x + Dropout(Attention(x))); x = LayerNorm(x + Dropout(FFN(x))), the
feed-forward Dense -> GELU -> Dense), and a classifier on the first token's output. Attention
projects queries, keys and values with one Dense(3 * units, flatten=False), splits the heads by
reshape/transpose, scores with npx.batch_dot(q, k, transpose_b=True) / sqrt(head size), leaves
padding out with npx.masked_softmax and a (batch, 1, 1, keys) mask built from the valid lengths,
and applies dropout to the attention weights. bench/peers/transformer_torch.py is the same
arithmetic in PyTorch.
"""
import math

from pymx import np, npx
from pymx.gluon import HybridBlock, nn

VOCAB, UNITS, HEADS, HIDDEN, LAYERS, MAX_LENGTH, CLASSES = 8000, 256, 4, 1024, 2, 128, 2
DROPOUT = 0.1


class MultiHeadSelfAttention(HybridBlock):
    """Self-attention over (batch, length, units) with `num_heads` heads of units // num_heads."""

    def __init__(self, units, num_heads, dropout):
        super().__init__()
        if units % num_heads:
            raise ValueError(f"MultiHeadSelfAttention: units {units} is not a multiple of "
                             f"num_heads {num_heads}")
        self._num_heads = num_heads
        self.attn_qkv = nn.Dense(3 * units, flatten=False, in_units=units)
        self.attn_proj = nn.Dense(units, flatten=False, in_units=units)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x, mask):
        batch, length, units = x.shape
        head_size = units // self._num_heads
        # (batch, length, 3 * units) -> (3, batch, heads, length, head_size)
        qkv = np.reshape(self.attn_qkv(x), (batch, length, 3, self._num_heads, head_size))
        qkv = np.transpose(qkv, (2, 0, 3, 1, 4))
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = npx.batch_dot(query, key, transpose_b=True) / math.sqrt(head_size)
        weights = self.attn_dropout(npx.masked_softmax(scores, mask))
        context = npx.batch_dot(weights, value)  # (batch, heads, length, head_size)
        context = np.reshape(np.transpose(context, (0, 2, 1, 3)), (batch, length, units))
        return self.attn_proj(context)


class EncoderLayer(HybridBlock):
    """One post-norm encoder layer (BERT's): attention and feed-forward, each added to its input
    after dropout and followed by LayerNorm."""

    def __init__(self, units, num_heads, hidden_size, dropout):
        super().__init__()
        self.attention = MultiHeadSelfAttention(units, num_heads, dropout)
        self.attention_dropout = nn.Dropout(dropout)
        self.attention_norm = nn.LayerNorm(epsilon=1e-12, in_channels=units)
        self.ffn_1 = nn.Dense(hidden_size, flatten=False, in_units=units)
        self.activation = nn.GELU()
        self.ffn_2 = nn.Dense(units, flatten=False, in_units=hidden_size)
        self.ffn_dropout = nn.Dropout(dropout)
        self.ffn_norm = nn.LayerNorm(epsilon=1e-12, in_channels=units)

    def forward(self, x, mask):
        x = self.attention_norm(x + self.attention_dropout(self.attention(x, mask)))
        hidden = self.ffn_2(self.activation(self.ffn_1(x)))
        return self.ffn_norm(x + self.ffn_dropout(hidden))


class TransformerClassifier(HybridBlock):
    """tokens (batch, length) int32 and valid_length (batch,) -> class scores (batch, classes)."""

    def __init__(self, vocab_size=VOCAB, units=UNITS, num_heads=HEADS, hidden_size=HIDDEN,
                 num_layers=LAYERS, max_length=MAX_LENGTH, classes=CLASSES, dropout=DROPOUT):
        super().__init__()
        self.word_embed = nn.Embedding(vocab_size, units)
        self.position_embed = nn.Embedding(max_length, units)
        self.embed_norm = nn.LayerNorm(epsilon=1e-12, in_channels=units)
        self.embed_dropout = nn.Dropout(dropout)
        self.layers = nn.HybridSequential()
        for _ in range(num_layers):
            self.layers.add(EncoderLayer(units, num_heads, hidden_size, dropout))
        self.classifier = nn.Dense(classes, flatten=False, in_units=units)

    def forward(self, tokens, valid_length):
        batch, length = tokens.shape
        positions = np.arange(length, dtype="int32", device=tokens.device)
        x = self.word_embed(tokens) + np.expand_dims(self.position_embed(positions), 0)
        x = self.embed_dropout(self.embed_norm(x))
        # mask[b, 0, 0, j]: key j of sample b is a token, not padding.
        mask = np.arange(length, device=tokens.device) < np.reshape(valid_length, (batch, 1))
        mask = np.reshape(mask, (batch, 1, 1, length))
        for layer in self.layers:
            x = layer(x, mask)
        return self.classifier(x[:, 0, :])
