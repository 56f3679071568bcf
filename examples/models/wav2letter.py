"""Wav2Letter (Collobert, Puhrsch and Synnaeve, 2016): a speech recogniser made only of 1-D
convolutions and ReLUs, here with its raw-waveform front end (one second at 16 kHz in, 40 character
scores per frame out; 26.2 M parameters). Audio models of this kind are what embedded NPUs run, so
vendor flows (Arm's `aot_arm_compiler -m w2l`) test with it.

Self-contained so that tools can load it by path: `wav2letter.py:make_wav2letter`.
"""

from __future__ import annotations

import torch
from torch import nn

# (out channels, kernel, stride, padding) of each convolution after the first; every one is
# followed by a ReLU except the last, which gives the class scores.
_LAYERS = [(250, 48, 2, 23)] + [(250, 7, 1, 3)] * 7 + [(2000, 32, 1, 16), (2000, 1, 1, 0)]


class Wav2Letter(nn.Module):
    def __init__(self, num_classes: int = 40) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv1d(1, 250, 250, stride=160, padding=45), nn.ReLU()]
        cin = 250
        for cout, kernel, stride, padding in _LAYERS:
            layers += [nn.Conv1d(cin, cout, kernel, stride=stride, padding=padding), nn.ReLU()]
            cin = cout
        layers.append(nn.Conv1d(cin, num_classes, 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """[batch, 1, samples] -> [batch, num_classes, frames] log-probabilities."""
        return torch.log_softmax(self.layers(waveform), dim=1)


def make_wav2letter() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Wav2Letter in eval mode with seed-0 weights and one second of 16 kHz noise."""
    torch.manual_seed(0)
    return Wav2Letter().eval(), (torch.randn(1, 1, 16000),)
