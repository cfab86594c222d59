"""A tiny module with a LayerNorm and biases, for the optimizer and schedule tests."""
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(4, 3)
        self.LayerNorm = nn.LayerNorm(3)
        self.out = nn.Linear(3, 2, bias=False)

    def forward(self, x): return self.out(self.LayerNorm(self.dense(x)))
