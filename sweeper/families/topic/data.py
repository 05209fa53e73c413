"""The topic task's sentences, drawn with torch (the task's declaration is in topic.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sweeper.families.topic.task import TopicTask
from sweeper.seeding import generator


@dataclass
class TopicData:
    words: torch.Tensor  # [S, m+1] long, topic word first
    labels: torch.Tensor  # [S] long

    def part(self, start: int, stop: int) -> TopicData:
        return TopicData(self.words[start:stop], self.labels[start:stop])


def generate(task: TopicTask, seed: int, device: str = "cpu") -> TopicData:
    """The trial's sentences, drawn once from its "task" stream (on CPU, so any device agrees)."""
    gen = generator(seed, "task")
    n, C, T = task.samples, task.classes, task.topic_words
    labels = torch.randint(C, (n,), generator=gen)
    own = torch.rand(n, generator=gen) < task.cooccurrence
    shift = torch.randint(1, max(C, 2), (n,), generator=gen)  # another class: y + shift mod C
    topic_class = torch.where(own, labels, (labels + shift) % C)
    topic = topic_class * T + torch.randint(T, (n,), generator=gen)
    distractors = task.n_topic + torch.randint(task.vocab, (n, task.distractors), generator=gen)
    words = torch.cat([topic[:, None], distractors], dim=1)
    return TopicData(words.to(device), labels.to(device))
