"""The model registry. Every model holds K independent models with a leading model dim K.

A single trial is K = 1; a pack of K trials of one shape trains as one batched computation.
"""

from __future__ import annotations

from sweeper.registry import Registry

MODELS = Registry("model")

# Which task family each model can train on.
MODEL_FAMILY = {"seq2seq": "copy", "kq-attention": "topic"}

from sweeper.models import kq_attention as _kq  # noqa: E402,F401
from sweeper.models import seq2seq as _s2s  # noqa: E402,F401
