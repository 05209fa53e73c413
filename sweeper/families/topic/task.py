"""`topic-v1`: sentence classification by topic words (Lu, Mao, Nayak, ICLR 2021).

C classes with a uniform prior, T topic words per class (word ids c*T .. c*T+T-1), and a
vocabulary of non-topic words (ids C*T ..). A sentence of class y holds one topic word and m
distractors drawn uniformly with replacement from the non-topic words. With probability rho
(`cooccurrence`) the topic word belongs to class y, otherwise to a uniformly chosen other class;
rho = 1 is the paper's setting. The model sees no positions, so the topic word is stored first.

The data set is generated once per trial from the trial's "task" stream and split into train,
validation (1%) and test (19%) sentences, as in the paper's 3,999 / 50 / 950 split of 5,000.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.errors import ParameterError
from sweeper.registry import Entry, Param


@dataclass(frozen=True)
class TopicTask:
    classes: int  # C
    topic_words: int  # T per class
    distractors: int  # m per sentence
    vocab: int  # non-topic words
    samples: int
    cooccurrence: float  # rho

    @property
    def n_topic(self) -> int:
        return self.classes * self.topic_words

    @property
    def words(self) -> int:
        return self.n_topic + self.vocab

    @property
    def split(self) -> tuple[int, int, int]:
        """(train, validation, test) sentence counts."""
        val, test = self.samples // 100, self.samples * 19 // 100
        return self.samples - val - test, val, test

    def shape(self) -> tuple:
        return ("topic", self.classes, self.topic_words, self.distractors, self.vocab,
                self.samples)

    def derived(self) -> dict[str, float | int]:
        return {}


def check(params: dict, where: str) -> None:
    prefix = f"{where}." if where else ""
    if params["cooccurrence"] < 1 and params["classes"] < 2:
        raise ParameterError(f"{prefix}cooccurrence: got {params['cooccurrence']}; allowed: 1 "
                             "when classes is 1 (no other class to borrow a topic word from)")
    if params["samples"] * 80 // 100 < 1:
        raise ParameterError(f"{prefix}samples: got {params['samples']}; allowed: >= 2")


PARAMS = (
    Param("classes", int, 4, "C", low=1, high=1000, label="classes C", symbol="C"),
    Param("topic_words", int, 2, "topic words per class", low=1, high=1000,
          label="topic words per class"),
    Param("distractors", int, 20, "m, non-topic words per sentence", low=0, high=10_000,
          label="distractors m", symbol="m"),
    Param("vocab", int, 5000, "non-topic vocabulary size", low=1, high=10_000_000,
          label="vocabulary N", symbol="N"),
    Param("samples", int, 5000, "sentences generated per trial", low=2, high=10_000_000,
          label="sentences"),
    Param("cooccurrence", float, 1.0, "rho: P(topic word is of the sentence's class)",
          low=0, high=1, label="co-occurrence strength c", symbol="c"),
)
TASK = Entry("topic-v1", TopicTask, PARAMS,
             doc="Classify sentences by their topic word (Lu et al. 2021).", check=check)
