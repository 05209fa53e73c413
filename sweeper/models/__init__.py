"""The model registry. Every model holds K independent models with a leading model dim K.

A single trial is K = 1; a pack of K trials of one shape trains as one batched computation.
"""

from __future__ import annotations

from sweeper.registry import Registry

MODELS = Registry("model")

# Which task family each model can train on.
MODEL_FAMILY = {"seq2seq": "copy", "kq-attention": "topic"}

# Registration happens on import of the declarations (no torch); the nn.Modules are in
# seq2seq.py and kq_attention.py, imported by the experiments that train them.
from sweeper.models import configs as _configs  # noqa: E402,F401
