"""topic-v1 with kq-attention: a fixed data set per trial, full-batch (or minibatch) SGD.

Evaluated every `eval_every` steps: training loss, test and validation accuracy, mean attention
on the topic word (test set), and for each topic word its score s_t, |q||v_t| and the two sides
of Lu's identity with its relative residual; the largest |score| and embedding norm among the
non-topic words.
"""

from __future__ import annotations

import torch

from sweeper import metrics as M
from sweeper.families.topic.data import TopicData, generate
from sweeper.families.topic.model import Bags, KQAttention
from sweeper.layers.packed import keep_models
from sweeper.seeding import generator
from sweeper.spec import TrialSpec


def _stack(parts: list[TopicData]) -> TopicData:
    return TopicData(torch.stack([p.words for p in parts]), torch.stack([p.labels for p in parts]))


class TopicExperiment:
    def __init__(self, specs: list[TrialSpec], dtype: torch.dtype, device: str):
        seeds = [s.seed for s in specs]
        self.task = specs[0].make_task()
        configs = [s.make_model_config() for s in specs]  # init stds may differ per model
        self.model = KQAttention(configs[0], self.task.words, self.task.classes, seeds, dtype,
                                 device, configs)
        train, val, _ = self.task.split
        data = [generate(s.make_task(), s.seed, device) for s in specs]
        self.train = _stack([d.part(0, train) for d in data])  # words [K, n, m+1]
        self.val = _stack([d.part(train, train + val) for d in data])
        self.test = _stack([d.part(train + val, self.task.samples) for d in data])
        self.batch_size = specs[0].train["batch_size"]
        self.gens = [generator(s, "data", device) for s in seeds]
        # The fixed splits as bags of words, built once (sweeper.families.topic.model.Bags).
        words = self.task.words
        self.train_bags, self.val_bags, self.test_bags = (
            Bags(part.words, words) for part in (self.train, self.val, self.test))

    def keep(self, index: list[int]) -> None:
        """Go on with models `index` of the pack only (`Experiment.keep`): their parameters,
        data splits (bags rebuilt) and minibatch streams."""
        keep_models(self.model, index)
        rows = torch.tensor(index, dtype=torch.long, device=self.train.words.device)
        self.train, self.val, self.test = (
            TopicData(part.words.index_select(0, rows), part.labels.index_select(0, rows))
            for part in (self.train, self.val, self.test))
        self.gens = [self.gens[k] for k in index]
        self.train_bags, self.val_bags, self.test_bags = (
            Bags(part.words, self.task.words) for part in (self.train, self.val, self.test))

    def _loss(self, data: TopicData, bags: Bags | None = None) -> torch.Tensor:
        bags = bags if bags is not None else Bags(data.words, self.task.words)
        logits, _ = self.model.forward_bags(bags, attention=False)
        return M.token_nll(logits, data.labels).mean(dim=1)  # [K]

    def train_loss(self) -> torch.Tensor:
        if self.batch_size is None or self.batch_size >= self.train.labels.shape[1]:
            return self._loss(self.train, self.train_bags)
        n = self.train.labels.shape[1]
        idx = torch.stack([torch.randint(n, (self.batch_size,), generator=g, device=g.device)
                           for g in self.gens])  # [K, b]
        words = self.train.words.gather(1, idx[..., None].expand(-1, -1,
                                                                 self.train.words.shape[2]))
        return self._loss(TopicData(words, self.train.labels.gather(1, idx)))

    @torch.no_grad()
    def evaluate(self, probes: bool = True) -> dict[str, torch.Tensor]:
        """Every metric, `probes` or not: none of the topic family's is costly."""
        logits, attn = self.model.forward_bags(self.test_bags)
        val_logits, _ = self.model.forward_bags(self.val_bags, attention=False)
        n_topic, model = self.task.n_topic, self.model
        scores = model.scores()  # [K, W]
        topic_score = scores[:, :n_topic]
        embed_sq = model.embed[:, :n_topic].pow(2).sum(dim=-1)  # [K, n_topic]
        query_sq = model.query.pow(2).sum(dim=-1, keepdim=True)  # [K, 1]
        lhs, rhs, residual = M.lu_identity(topic_score, embed_sq, query_sq,
                                           self.task.distractors)
        return {
            "loss": self._loss(self.train, self.train_bags),
            "accuracy": M.mean_keep(M.token_hits(logits, self.test.labels)),
            "val_accuracy": M.mean_keep(M.token_hits(val_logits, self.val.labels)),
            "topic_attention": M.mean_keep(attn[..., 0]),
            "topic_score": topic_score,
            "topic_qv": (query_sq * embed_sq).sqrt(),
            "identity_lhs": lhs,
            "identity_rhs": rhs,
            "identity_residual": residual.max(dim=-1).values,
            "topic_score_mean": topic_score.mean(dim=-1),
            "distractor_score_max": scores[:, n_topic:].abs().max(dim=-1).values,
            "distractor_norm_max": model.embed[:, n_topic:].norm(dim=-1).max(dim=-1).values,
        }
