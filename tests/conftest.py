"""Shared test set-up: one torch thread, so timings and float reductions do not depend on the
machine's core count."""

import torch

torch.set_num_threads(1)
