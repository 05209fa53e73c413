"""The results contract: what a sweep's results are, in one place.

Imports pyarrow, pandas and numpy only (never torch, Ray, or the rest of sweeper; scipy only
inside `stats`' functions, when a test runs), so that `analysis`, notebooks and the commands
that only read work on a laptop and start fast.

The contract, as each part's module states it:

- **Layout** (`layout`): `<root>/<sweep>/manifest.json`, `trials/part-*.parquet`,
  `trajectories/part-*.parquet`; the sweep-name rule (one folder name); trial ids (the hash of
  a trial's canonical config and `CONFIG_SCHEMA_VERSION`) and pack ids.
- **Commit rule** (`layout.committed_files`): a pack counts once its trials file exists; a
  compacted file replaces the files it names. Every reader takes its file lists from it.
- **Schemas** (`schema`): built from the parameter declarations of tasks and models and the
  metric declarations (`Metric`) of each family; `TABLE_SCHEMA_VERSION` in every file;
  older versions stay readable (`LEGACY_COLUMNS`).
- **Conformance** (`conformance`): which whole Parquet files are a table's; a foreign one (a
  required column missing, a column of another kind) is a damaged file, skipped by readers and
  moved aside by recovery.
- **Outcomes** (`rules`, `outcomes`): rules that families declare as data (`OutcomeRule`),
  one vectorised evaluation of them, thresholds as parameters; the trainer stores what it
  gives at the defaults; `OUTCOME_COLUMNS` are stored in every trials table.
- **Cell statistics** (`cells`): counts, success share, Wilson interval, and which statuses
  count, for every summary, diagram and sampler.
- **Reading** (`reading`): a root's sweeps, a manifest, what a compacted file replaces, today's
  column names (`current_names`), Arrow to pandas: for the store, the summary and `analysis`.
- **Words** (`words`): counts in messages, "1 seed", "2 seeds" (`count`).
- **Whole files** (`files`): a command's local outputs written whole, and the one line a write
  that fails is (`ResultsWriteError`, exit status 1).
- **Store** (`store`): one interface, one class per backend (`FileStore`: local or pyarrow.fs
  URIs such as s3://; `MemoryStore`), atomic whole-file writes, recovery, compaction.
"""

from sweeper.results.cells import COUNTED_STATUSES, cell_stats, counted, wilson_interval
from sweeper.results.errors import ResultsInputError
from sweeper.results.layout import (
    CONFIG_SCHEMA_VERSION,
    TABLES,
    canonical_json,
    check_sweep_name,
    committed_files,
    hash_text,
    pack_id,
    pack_of_file,
    trial_id,
)
from sweeper.results.outcomes import (
    DEFAULT_THRESHOLDS,
    DecisionWatch,
    Thresholds,
    derive_outcomes,
    label_entropy,
    plateau_level,
    recompute_outcomes,
    trial_outcomes,
    trials_outcomes,
    with_outcomes,
)
from sweeper.results.records import Record, failed_outcomes, trajectories_table, trials_table
from sweeper.results.rules import (
    CORE_RULES,
    OUTCOME_COLUMNS,
    SUCCESS_OUTCOMES,
    Category,
    Condition,
    OutcomeRule,
    outcome_columns,
    success_outcomes,
)
from sweeper.results.schema import (
    LEGACY_COLUMNS,
    TABLE_SCHEMA_VERSION,
    Metric,
    trajectory_schema,
    trials_schema,
)
from sweeper.results.store import FileStore, MemoryStore, Store

__all__ = [
    "CONFIG_SCHEMA_VERSION", "CORE_RULES", "COUNTED_STATUSES", "Category", "Condition",
    "DEFAULT_THRESHOLDS",
    "FileStore", "LEGACY_COLUMNS", "MemoryStore", "Metric", "OUTCOME_COLUMNS", "OutcomeRule",
    "Record", "ResultsInputError", "SUCCESS_OUTCOMES", "Store", "TABLES",
    "TABLE_SCHEMA_VERSION", "Thresholds", "cell_stats", "check_sweep_name", "committed_files",
    "counted", "derive_outcomes", "failed_outcomes", "label_entropy", "outcome_columns",
    "pack_id", "pack_of_file", "plateau_level", "recompute_outcomes", "success_outcomes",
    "trajectories_table", "trajectory_schema", "trial_id", "canonical_json", "hash_text",
    "trial_outcomes", "trials_outcomes", "DecisionWatch",
    "trials_schema", "trials_table", "wilson_interval", "with_outcomes",
]
