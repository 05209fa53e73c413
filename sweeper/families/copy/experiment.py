"""copy-v1 with seq2seq: fresh batches every step, evaluation on fresh samples.

Evaluated every `eval_every` steps on `eval_size` fresh sequences of the training mixture and of
each component ("block": permutations of the fixed block, "open": L distinct tokens of N):
loss, token accuracy (all L+1 positions, EOS included), attention accuracy and aligned mass per
head over the L content steps (EOS left out: `metrics.content_steps`) and of the best head (the
headline `attn_acc`, `attn_mass`: the contexts are averaged, so one aligned head carries the
aligned word into every step), where the best head's attention peaks relative to the aligned
position and how concentrated it is there (`attn_offset`, `attn_peak_mass`,
`attn_concentration`: which solution a run found, `regime`), the KTIW probe, and accuracy
with attention forced uniform. The uniform-attention readout reuses the mixture batch's encoder
and decoder states: they do not depend on the attention (the decoder has no input feeding), so
one recurrence pass serves both.
"""

from __future__ import annotations

import torch

from sweeper import metrics as M
from sweeper.families.copy.data import CopySampler
from sweeper.families.copy.model import Seq2Seq, Seq2SeqOutput
from sweeper.layers import native
from sweeper.layers.packed import keep_models
from sweeper.spec import TrialSpec

PROBE_CHUNK = 1 << 20  # elements of the [K, b, T, S, d] probe tensor computed at once


class CopyExperiment:
    """The copy experiment. `Sampler` draws the batches: a family that only changes the data
    (a new distribution for seq2seq) subclasses this with its own sampler, which provides
    `sample`, `target_frequencies` and `components` as `CopySampler` does."""

    Sampler = CopySampler

    def __init__(self, specs: list[TrialSpec], dtype: torch.dtype, device: str):
        seeds = [s.seed for s in specs]
        tasks = [s.make_task() for s in specs]
        self.sampler = self.Sampler(tasks, seeds, device)
        inits = [s.make_model_config() for s in specs]  # a pack shares shapes, not init seeds
        self.model = Seq2Seq(inits[0], [t.symbols for t in tasks], seeds, dtype, device,
                             self.sampler.target_frequencies(), inits)
        self.batch_size = specs[0].train["batch_size"]
        self.eval_size = specs[0].train["eval_size"]
        self.probe_size = specs[0].train.get("probe_size") or self.eval_size

    @property
    def keep(self):
        """`Experiment.keep`, where the sampler can keep some models' streams (a subclass's
        own sampler may not: then None, and a decided model stays in the pack, masked)."""
        return self._keep if hasattr(self.sampler, "keep") else None

    def _keep(self, index: list[int]) -> None:
        keep_models(self.model, index)
        self.sampler.keep(index)

    def train_loss(self) -> torch.Tensor:
        batch = self.sampler.sample(self.batch_size)
        nll = self.model.token_nll(batch.src, batch.dec_in, batch.tgt)  # [K, B, T]
        return nll.flatten(1).mean(dim=1)  # [K]

    @torch.no_grad()
    def evaluate(self, probes: bool = True) -> dict[str, torch.Tensor]:
        """Every metric on `eval_size` fresh sequences. The probes (the KTIW probe, accuracy
        with uniform attention, the per-component metrics) use the first `probe_size` of them
        (fresh ones for the components); with `probes=False` they are NaN (between
        `probe_every` steps). The evaluation data stream is drawn the same either way."""
        batch = self.sampler.sample(self.eval_size, eval=True)
        enc, dec = self.model.states(batch.src, batch.dec_in)  # shared by both readouts below
        nll, hits, attn = self.model.token_scores(enc, dec, batch.tgt)
        acc_head, mass_head = M.head_attention_accuracy(attn), M.head_aligned_mass(attn)
        result = {
            "loss": M.mean_keep(nll),
            "accuracy": M.mean_keep(hits),
            "attn_acc": acc_head.amax(dim=1),  # the best head
            "attn_mass": mass_head.amax(dim=1),
            "attn_acc_head": acc_head,
            "attn_mass_head": mass_head,
            **self._attention_peak(attn),
        }
        parts = {c: self.sampler.sample(self.eval_size, eval=True, component=c)
                 for c in self.sampler.components}  # drawn either way: one data stream
        if not probes:
            nan = acc_head.new_full(acc_head.shape[:1], float("nan"))
            return {**result, **{name: nan for name in self.PROBES}}
        n, tgt = self.probe_size, batch.tgt[:, :self.probe_size]
        result["ktiw_acc"] = self._probe_accuracy(Seq2SeqOutput(None, attn, dec[:, :n],
                                                                enc[:, :n]), tgt)
        _, uniform_hits, _ = self.model.token_scores(enc[:, :n], dec[:, :n], tgt, uniform=True)
        result["uniform_acc"] = M.mean_keep(uniform_hits)
        for component, part in parts.items():
            states = self.model.states(part.src[:, :n], part.dec_in[:, :n])
            nll, hits, attn = self.model.token_scores(*states, part.tgt[:, :n])
            result[f"loss_{component}"] = M.mean_keep(nll)
            result[f"accuracy_{component}"] = M.mean_keep(hits)
            result[f"attn_acc_{component}"] = M.head_attention_accuracy(attn).amax(dim=1)
        return result

    @staticmethod
    def _attention_peak(attn: torch.Tensor) -> dict[str, torch.Tensor]:
        """Where the best head's attention peaks (`metrics.best_head_peak`): attn_offset, the
        source position minus the aligned one (0: aligned), attn_peak_mass, the mean attention
        there, and attn_concentration, that mass in units of uniform's 1/S."""
        offset, mass = M.best_head_peak(attn)
        return {"attn_offset": offset.to(mass.dtype), "attn_peak_mass": mass,
                "attn_concentration": mass * attn.shape[-1]}

    @property
    def PROBES(self) -> tuple[str, ...]:  # noqa: N802 - a per-instance constant
        """The metrics `evaluate(probes=False)` leaves out."""
        return ("ktiw_acc", "uniform_acc", *(f"{m}_{c}" for c in self.sampler.components
                                             for m in ("loss", "accuracy", "attn_acc")))

    def _probe_accuracy(self, out, target: torch.Tensor) -> torch.Tensor:
        """KTIW probe accuracy [K]: in one native pass where the kernels are built (on CPU),
        else from the one-hot logits over batch chunks to bound memory (the reference)."""
        ops = native.ops()
        if ops is not None and target.device.type == "cpu":
            return M.mean_keep(ops.ktiw_hits(*self.model.one_hot_readout_parts(out), target))
        K, B, T, d = out.dec_states.shape
        S = out.enc_states.shape[2]
        chunk = max(1, PROBE_CHUNK // (K * T * S * max(d, self.model.symbols)))
        hits = []
        for start in range(0, B, chunk):
            part = Seq2SeqOutput(None, out.attn, out.dec_states[:, start:start + chunk],
                                 out.enc_states[:, start:start + chunk])
            logits = self.model.one_hot_logits(part)  # [K, b, T, S, V]
            hits.append(M.ktiw_probe_hits(logits, target[:, start:start + chunk]))
        return M.mean_keep(torch.cat(hits, dim=1))
